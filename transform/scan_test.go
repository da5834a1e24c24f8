package transform

import (
	"strconv"
	"strings"
	"testing"
)

// stringEnd finds a string's closing quote eight bytes at a time, then
// with strings.IndexByte: it must agree with reading byte by byte wherever
// the quote and the escapes fall.
func TestStringEndFindsTheClosingQuoteWhereverItFalls(t *testing.T) {
	byByte := func(s string, i int) int {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(s)
	}
	for n := 0; n < 8*quoteWords+24; n++ {
		for _, tail := range []string{`"`, `\""`, `\\"`, `\\\"x"`, `é"`, "\x80\"", ``, `\`} {
			s := `"` + strings.Repeat("a", n) + tail + `, "b"`
			if got, want := stringEnd(s, 0), byByte(s, 0); got != want {
				t.Errorf("stringEnd(%q) = %d, want %d", s, got, want)
			}
		}
	}
}

// BenchmarkStringEnd times finding the end of a short string and of a
// long one (the bench scenario's 976 bytes of padding).
func BenchmarkStringEnd(b *testing.B) {
	for _, n := range []int{12, 976} {
		s := `"` + strings.Repeat("x", n) + `","type":"bench.event"}`
		b.Run(strconv.Itoa(n)+" bytes", func(b *testing.B) {
			for b.Loop() {
				if stringEnd(s, 0) != n+2 {
					b.Fatal("wrong end")
				}
			}
		})
	}
}
