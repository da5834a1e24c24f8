package provider

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/jethook/jethook/payload"
)

func TestJSONPointers(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":{"b~c/d":["x",{"e":"y"}],"n":12},"dup":"first","dup":"last","s":"\u00e9"}`)
	for _, tc := range []struct {
		ptr, want string
		ok        bool
	}{
		{"/a/b~0c~1d/0", "x", true},
		{"/a/b~0c~1d/1/e", "y", true},
		{"/dup", "last", true},
		{"/s", "é", true},
		{"/a/n", "", false},
		{"/a/b~0c~1d/2", "", false},
		{"/a/b~0c~1d/-1", "", false},
		{"/missing", "", false},
		{"/a/b~0c~1d/0/x", "", false},
	} {
		got, ok := jsonPointer(body, tc.ptr)
		if got != tc.want || ok != tc.ok {
			t.Errorf("jsonPointer(%q) = %q, %v; want %q, %v", tc.ptr, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := jsonScalar(body, "/a/n"); got != "12" || !ok {
		t.Errorf("jsonScalar(/a/n) = %q, %v", got, ok)
	}
	if _, ok := jsonPointer([]byte(`{"a":"x"} trailing`), "/a"); ok {
		t.Error("a body with trailing text has no pointers")
	}
}

// A sender's body is read by a pointer without recursing per level and
// without building its wide objects or long arrays.
func TestJSONPointersIntoHostileBodiesCostBoundedMemory(t *testing.T) {
	deep := strings.Repeat(`{"a":`, payload.MaxDepth+1) + `"x"` + strings.Repeat("}", payload.MaxDepth+1)
	var wide strings.Builder
	wide.WriteString(`{"id":"x"`)
	for i := 0; wide.Len() < 5<<20; i++ {
		wide.WriteString(`,"k`)
		wide.WriteString(strings.Repeat("a", i%7))
		wide.WriteString(`":0`)
	}
	wide.WriteString("}")
	long := `{"list":[` + strings.Repeat("0,", 5<<19) + `"x"]}`
	for _, tc := range []struct {
		name, body, ptr string
		ok              bool
	}{
		{"nesting past the bound is not read", deep, "/a", false},
		{"a wide object is read member by member", wide.String(), "/id", true},
		{"a long array is read element by element", long, "/list/2621440", true},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, ok := jsonPointer([]byte(tc.body), tc.ptr)
		runtime.ReadMemStats(&after)
		if ok != tc.ok || ok && got != "x" {
			t.Errorf("%s: got %q, %v", tc.name, got, ok)
		}
		// The body's own copy ([]byte(tc.body)) is 5 MiB; the decoder
		// buffers it once more.
		if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
			t.Errorf("%s: allocated %d MiB", tc.name, n>>20)
		}
	}
}

// FuzzJSONPointerOnHostileBodies feeds deeply nested and large JSON to the JSON pointers
// providers read ids, timestamps and signatures with: they never panic,
// and a body nested past payload.MaxDepth has no pointers.
func FuzzJSONPointerOnHostileBodies(f *testing.F) {
	for _, seed := range []struct {
		prefix, unit string
		n            uint16
		suffix, ptr  string
	}{
		{"", "[", 65535, "", "/0"},
		{"", `{"a":`, 200, "1", "/a/a"},
		{`{"id":"x","l":[`, "0,", 65535, "0]}", "/l/65535"},
		{"{", `"k":0,`, 65535, `"id":"x"}`, "/id"},
	} {
		f.Add([]byte(seed.prefix), []byte(seed.unit), seed.n, []byte(seed.suffix), seed.ptr)
	}
	f.Fuzz(func(t *testing.T, prefix, unit []byte, n uint16, suffix []byte, ptr string) {
		unit = unit[:min(len(unit), 16)]
		b := append(append(prefix, bytes.Repeat(unit, int(n))...), suffix...)
		_, ok := jsonPointer(b, "/"+ptr)
		if ok && payload.TooDeep(b) {
			t.Fatal("a pointer read a body nested past the bound")
		}
		_, _ = jsonScalar(b, "/"+ptr)
	})
}
