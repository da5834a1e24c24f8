package transform

import (
	"strings"
	"testing"
)

// stringEnd finds a string's closing quote eight bytes at a time: it must
// agree with reading byte by byte wherever the quote and the escapes fall.
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
	for n := 0; n < 24; n++ {
		for _, tail := range []string{`"`, `\""`, `\\"`, `\\\"x"`, `é"`, "\x80\"", ``, `\`} {
			s := `"` + strings.Repeat("a", n) + tail + `, "b"`
			if got, want := stringEnd(s, 0), byByte(s, 0); got != want {
				t.Errorf("stringEnd(%q) = %d, want %d", s, got, want)
			}
		}
	}
}
