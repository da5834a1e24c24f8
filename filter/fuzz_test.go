package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"cel.dev/cel-go/common/types"
	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/payload"
)

// FuzzMatch feeds arbitrary bodies to filters that walk them: a filter
// never panics, and on an object encoding/json takes (with "type" once), the
// lazily read "type" has the value encoding/json decodes.
func FuzzMatch(f *testing.F) {
	for _, seed := range []string{`{"type":"invoice.paid","data":{"object":{"amount":1}}}`, `[1,"a",{"b":null}]`,
		`{"type":"a\u00e9\"b"}`, `"x"`, `{"type":1e400}`, `{"a":{"a":{"a":[]}}}`, "{\"type\":\"\xff\"}", `{`} {
		f.Add([]byte(seed))
	}
	var filters []*Filter
	for _, expr := range []string{
		`body.type.startsWith("invoice.")`,
		`has(body.data.object.amount) && body.data.object.amount > 0`,
		`body.exists(x, x == null)`,
		`size(body) > 1 && body.all(k, k != "")`,
		`body == {"type": "x"} || body == [1] || body == null`,
	} {
		flt, err := Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, flt)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev := &Event{Body: body}
		for _, flt := range filters {
			_, _ = flt.Match(ev)
		}
		var v struct{ Type *string }
		if !json.Valid(body) || json.Unmarshal(body, &v) != nil || v.Type == nil {
			return
		}
		got, _ := (&activation{ev: ev}).ResolveName("body")
		o, ok := got.(*jsonObject)
		if !ok {
			t.Fatalf("body %q is an object to encoding/json, not to the filter", body)
		}
		n := 0
		o.r.ForEach(func(k, _ gjson.Result) bool {
			if k.Str == "type" {
				n++
			}
			return true
		})
		if n != 1 {
			return // a repeated key: the filter reads the first, encoding/json the last
		}
		if typ, found := o.Find(types.String("type")); !found || typ.Value() != *v.Type {
			t.Fatalf("body %q: type reads %v, encoding/json decodes %q", body, typ, *v.Type)
		}
	})
}

// grown is prefix, then unit n times, then suffix, for fuzz targets that
// need bodies deeper and larger than a fuzzer writes by itself: n is up to
// 65,535 and a unit up to 16 bytes, a megabyte (larger bodies are the unit
// test's; here they would slow each run to seconds).
func grown(prefix, unit []byte, n uint16, suffix []byte) []byte {
	unit = unit[:min(len(unit), 16)]
	return append(append(prefix, bytes.Repeat(unit, int(n))...), suffix...)
}

// FuzzHostileBody feeds deeply nested and huge JSON to filters that read
// the body every way the lazy values allow (fields, indexes, size, in,
// macros over lists and objects, whole-value equality): a filter never
// panics, and a body past payload.MaxDepth is always an error of kind
// "too deep", never parsed.
func FuzzHostileBody(f *testing.F) {
	for _, seed := range []struct {
		prefix, unit string
		n            uint16
		suffix       string
	}{
		{"", "[", 65535, ""},
		{"", "[", payload.MaxDepth, ""},
		{"", `{"a":`, 1000, "1"},
		{"[", "0,", 65535, "0]"},
		{`{"type":"x","list":[`, `{"a":[1,2]},`, 65535, "0]}"},
		{"{", `"k":"v",`, 65535, `"type":"x"}`},
		{`"`, `\"[`, 65535, `"`},
	} {
		f.Add([]byte(seed.prefix), []byte(seed.unit), seed.n, []byte(seed.suffix))
	}
	var filters []*Filter
	for _, expr := range []string{
		`body.type == "x"`,
		`size(body) > 3 && body[3] != null`,
		`1 in body || "k" in body`,
		`body.exists(x, x == null)`,
		`body.all(k, k != "")`,
		`body.map(x, x).size() > 0`,
		`body == [0] || body == {"type": "x"} || body != null`,
		`body.list.exists(x, x.a[1] == 2)`,
	} {
		flt, err := Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, flt)
	}
	f.Fuzz(func(t *testing.T, prefix, unit []byte, n uint16, suffix []byte) {
		ev := &Event{Body: grown(prefix, unit, n, suffix)}
		deep := payload.TooDeep(ev.Body)
		for _, flt := range filters {
			_, err := flt.Match(ev)
			var fe *Error
			if deep && (!errors.As(err, &fe) || fe.Kind != "too deep") {
				t.Fatalf("a body nested past %d levels gave %v, want kind too deep", payload.MaxDepth, err)
			}
		}
	})
}
