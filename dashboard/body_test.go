package dashboard

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzNewBody feeds deeply nested and large JSON to the dashboard's body
// view: it never panics, never shows more than maxIndented of indented
// JSON, and shows every body it does not indent byte for byte (up to
// maxShown) or as a hex dump.
func FuzzNewBody(f *testing.F) {
	for _, seed := range []struct {
		prefix, unit string
		n            uint16
		suffix       string
	}{
		{"", "[", 9999, strings.Repeat("]", 9999)},
		{"", "[", 65535, ""},
		{"[", "[0],", 65535, "0]"},
		{`{"a":`, `{"b":`, 100, "1"},
	} {
		f.Add([]byte(seed.prefix), []byte(seed.unit), seed.n, []byte(seed.suffix))
	}
	f.Fuzz(func(t *testing.T, prefix, unit []byte, n uint16, suffix []byte) {
		unit = unit[:min(len(unit), 16)]
		b := append(append(prefix, bytes.Repeat(unit, int(n))...), suffix...)
		out := newBody(b)
		if out.Kind == "JSON" && len(out.Text) > maxIndented {
			t.Fatalf("%d bytes of indented JSON", len(out.Text))
		}
		if out.Kind == "text" && out.Text != string(b[:out.Shown]) {
			t.Fatal("text not shown as it is")
		}
	})
}
