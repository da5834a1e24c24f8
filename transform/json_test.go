package transform

import (
	"encoding/json"
	"strings"
	"testing"
)

// appendString's output reads back, with encoding/json, as the string
// encoding/json's own encoding reads back as: the same text, and U+FFFD for
// each byte that is not UTF-8.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f\x7f",
		"é ü 日本 \U0001F600", "bad \xff\xfe utf-8 \xc3", "\u2028\u2029", strings.Repeat("0123456789abcdef", 9) + `"` + strings.Repeat("x", 13),
		strings.Repeat("a", 7) + "\n" + strings.Repeat("b", 8) + "\x1f" + strings.Repeat("c", 9) + "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendString([]byte("prefix"), s)
		if !strings.HasPrefix(string(out), "prefix") {
			t.Fatalf("appendString(%q) lost what it appended to: %q", s, out)
		}
		var got, want string
		if err := json.Unmarshal(out[len("prefix"):], &got); err != nil {
			t.Fatalf("appendString(%q) = %s, not a JSON string: %v", s, out[len("prefix"):], err)
		}
		ref, _ := json.Marshal(s)
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("appendString(%q) reads back as %q, want %q", s, got, want)
		}
	})
}

// BenchmarkAppendString writes a 900-byte string of ASCII letters, as a
// field of a webhook's body often is, and one of text with a quote and a
// non-ASCII letter in every 64 bytes.
func BenchmarkAppendString(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"ascii", strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 25)},
		{"mixed", strings.Repeat(`Hello, "world": naïve text of sixty-four bytes, more or less...`, 14)},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 2*len(c.s))
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				buf = appendString(buf[:0], c.s)
			}
		})
	}
}
