package filter

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jethook/jethook/payload"
)

// hostile are bodies a sender may post to make a filter's reading of
// `body` cost memory out of proportion to their size: five megabytes
// (the default max_body) of nesting, of one long list, and of one wide
// object.
var hostile = map[string][]byte{
	"open brackets":            []byte(strings.Repeat("[", 5<<20)),
	"nested objects":           []byte(strings.Repeat(`{"a":`, payload.MaxDepth+1) + "1" + strings.Repeat("}", payload.MaxDepth+1)),
	"a long list":              []byte("[" + strings.Repeat("0,", 5<<19) + "0]"),
	"a wide object":            wideObject(5 << 20),
	"a long list in an object": []byte(`{"type":"x","list":[` + strings.Repeat("0,", 5<<19) + "0]}"),
}

// wideObject is an object of about n bytes, of distinct keys k0, k1, …
// and "type" last.
func wideObject(n int) []byte {
	b := []byte("{")
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, `"k%d":0,`, i)
	}
	return append(b, `"type":"x"}`...)
}

// A hostile body is an ordinary run-time error of a documented kind, or an
// answer, and one evaluation allocates a bounded amount of memory, stack
// included, whatever the body's size or depth.
func TestAHostileBodyCostsBoundedMemory(t *testing.T) {
	// Not parallel: it measures the process's memory. What one evaluation
	// allocates in all (garbage included) is bounded by the cost limit,
	// what it holds at once (the memory taken from the OS, stacks
	// included) by the filter's bounds.
	const maxAlloc, maxSys = 64 << 20, 64 << 20
	tests := []struct {
		name, body, expr string
		want             bool
		kind             string
	}{
		{"five megabytes of [ are too deep", "open brackets", `body.type == "x"`, false, "too deep"},
		{"valid JSON nested past the bound is too deep", "nested objects", `has(body.a)`, false, "too deep"},
		{"a long list can be counted", "a long list", `size(body) > 1000000`, true, ""},
		{"a long list can be indexed below the bound", "a long list", `body[9999] == 0`, true, ""},
		{"a long list cannot be indexed past the bound", "a long list", `body[10000] == 0`, false, "too large"},
		{"a long list is iterated until the cost limit", "a long list", `body.exists(x, x == 1)`, false, "cost limit"},
		{"a long list is iterated until an answer", "a long list", `body.exists(x, x == 0)`, true, ""},
		{"a long list is searched without building it", "a long list", `1 in body`, false, ""},
		{"a long list is not null, without decoding it", "a long list", `body != null`, true, ""},
		{"a long list differs from a short one, without decoding it", "a long list", `body != [0]`, true, ""},
		{"a long list cannot be added to", "a long list", `size(body + [1]) > 0`, false, "too large"},
		{"a wide object's key is found", "a wide object", `body.type == "x"`, true, ""},
		{"a wide object's keys are iterated", "a wide object", `body.exists(k, k == "k1")`, true, ""},
		{"a wide object's keys are iterated until the cost limit", "a wide object", `body.exists(k, k == "none")`, false, "cost limit"},
		{"a big object cannot be compared whole", "a long list in an object", `body == {"type": "x", "list": [0]}`, false, "too large"},
		{"a field beside a long list is read", "a long list in an object", `body.type == "x" && size(body.list) > 1`, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			ev := &Event{Body: hostile[tc.body]}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got, err := f.Match(ev)
			runtime.ReadMemStats(&after)
			if got != tc.want {
				t.Errorf("Match = %v, want %v (err %v)", got, tc.want, err)
			}
			var fe *Error
			switch {
			case tc.kind == "" && err != nil:
				t.Errorf("Match failed: %v", err)
			case tc.kind != "" && (!errors.As(err, &fe) || fe.Kind != tc.kind):
				t.Errorf("Match error = %v, want kind %q", err, tc.kind)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > maxAlloc {
				t.Errorf("one evaluation allocated %d MiB, want at most %d MiB", n>>20, maxAlloc>>20)
			}
			if n := int64(after.Sys) - int64(before.Sys); n > maxSys {
				t.Errorf("one evaluation took %d MiB more from the OS (stacks included), want at most %d MiB", n>>20, maxSys>>20)
			}
		})
	}
}

// Every bound's error sorts into a kind of its own, listed in Kinds.
func TestTheBoundsHaveKinds(t *testing.T) {
	t.Parallel()
	for _, err := range []error{errTooDeep, errTooLarge} {
		k := kindOf("evaluation: " + err.Error())
		if k == "other" || !strings.Contains(strings.Join(Kinds, ","), k) {
			t.Errorf("%q sorts as %q", err, k)
		}
	}
}
