package filter

import (
	"testing"
)

func TestExcludesOnlyBodiesThatCannotMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		expr     string
		body     string
		excludes bool
	}{
		{"a field equal to a string the body lacks", `body.id == "evt_9"`, `{"id":"evt_1"}`, true},
		{"the string on the left", `"evt_9" == body.id`, `{"id":"evt_1"}`, true},
		{"a string the body holds is left to Match", `body.id == "evt_1"`, `{"id":"evt_1"}`, false},
		{"a string the body holds elsewhere is left to Match", `body.id == "evt_1"`, `{"id":"x","other":"evt_1"}`, false},
		{"a prefix the body lacks", `body.type.startsWith("invoice.")`, `{"type":"charge.paid"}`, true},
		{"a suffix the body lacks", `body.type.endsWith(".paid")`, `{"type":"charge.failed"}`, true},
		{"a part the body lacks", `body.type.contains("paid")`, `{"type":"charge.failed"}`, true},
		{"an index path", `body["data"]["items"][0].id == "x9"`, `{"data":{"items":[{"id":"x1"}]}}`, true},
		{"one term of a top-level && is enough", `headers["x-kind"] == "a" && body.id == "evt_9"`, `{"id":"evt_1"}`, true},
		{"a term inside || is not", `body.id == "evt_9" || body.id == "evt_1"`, `{"id":"evt_1"}`, false},
		{"a negation is not", `!(body.id == "evt_9")`, `{"id":"evt_1"}`, false},
		{"!= is not", `body.id != "evt_9"`, `{"id":"evt_1"}`, false},
		{"a header is not the body", `headers["x-kind"] == "zzz"`, `{"id":"evt_1"}`, false},
		{"the raw body is not a field", `string(raw) == "zzz"`, `{"id":"evt_1"}`, false},
		{"a presence test is not a field", `has(body.id) == true`, `{"id":"evt_1"}`, false},
		{"a number can be written many ways", `body.n == 1004`, `{"n":1.004e3}`, false},
		{"a \\u escape can spell the string", `body.id == "evt_1"`, `{"id":"\u0065vt_1"}`, false},
		{"an escaped slash can spell the string", `body.url == "a/b"`, `{"url":"a\/b"}`, false},
		{"any backslash leaves it to Match", `body.id == "evt_9"`, `{"id":"evt_1","s":"\n"}`, false},
		{"a string with a quote is left to Match", `body.s == "a\"b"`, `{"s":"ab"}`, false},
		{"a string beyond ASCII is left to Match", `body.s == "é"`, `{"s":"e"}`, false},
		{"the replacement character is left to Match", `body.s == "\uFFFD"`, "{\"s\":\"\xff\"}", false},
		{"an empty string is left to Match", `body.s == ""`, `{"t":"x"}`, false},
		{"a body that is not JSON cannot match either", `body.id == "evt_9"`, `id=evt_1`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := Compile(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			ev := &Event{Route: "r", Method: "POST", Header: map[string][]string{"X-Kind": {"a"}}, Body: []byte(tt.body)}
			if got := f.Excludes(ev.Body); got != tt.excludes {
				t.Errorf("Excludes(%s) = %v, want %v", tt.body, got, tt.excludes)
			}
			if matched, _ := f.Match(ev); matched && f.Excludes(ev.Body) {
				t.Errorf("%s matches %s, which Excludes rules out", tt.expr, tt.body)
			}
		})
	}
}

// FuzzExcludes checks that a body Excludes rules out never matches, for
// expressions of every kind Excludes reads.
func FuzzExcludes(f *testing.F) {
	for _, seed := range []string{`{"id":"evt_1","type":"invoice.paid"}`, `{"id":"\u0065vt_1"}`, `{"id":"evt_1","id":"x"}`,
		`{"a":[{"id":"evt_1"}]}`, `{"type":"pre.invoice.paid.post"}`, "{\"id\":\"evt_1\xff\"}", `"evt_1"`, `{"id":["evt_1"]}`} {
		f.Add([]byte(seed))
	}
	var filters []*Filter
	for _, expr := range []string{
		`body.id == "evt_1"`,
		`body.a[0].id == "evt_1"`,
		`body.type.startsWith("invoice.") && body.type.endsWith(".paid")`,
		`body.type.contains("invoice")`,
		`body["id"] == "evt_1" && size(body) > 0`,
	} {
		flt, err := Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, flt)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, flt := range filters {
			for _, known := range []bool{false, IsJSON(body)} {
				if ok, _ := flt.Match(&Event{Body: body, JSON: known}); ok && flt.Excludes(body) {
					t.Fatalf("a body that matches is excluded: %q", body)
				}
			}
		}
	})
}
