package dashboard

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// maxShown bounds the part of a body a page shows.
const maxShown = 256 << 10

// body is a payload as a page shows it: always as text in a <pre>.
type body struct {
	Kind  string // "JSON", "text" or "binary"
	Text  string // pretty JSON, the text, or a hex dump
	Size  int
	Shown int // how many bytes Text covers; less than Size when cut
}

// newBody formats b: indented JSON when it is JSON, the text when it is
// printable UTF-8, else a hex dump. Beyond maxShown it shows the start.
func newBody(b []byte) body {
	out := body{Size: len(b), Shown: len(b)}
	if len(b) <= maxShown && json.Valid(b) {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			out.Kind, out.Text = "JSON", buf.String()
			return out
		}
	}
	if len(b) > maxShown {
		b, out.Shown = b[:maxShown], maxShown
	}
	if printable(b) {
		out.Kind, out.Text = "text", string(b)
		return out
	}
	out.Kind, out.Text = "binary", hex.Dump(b)
	return out
}

// printable is true for UTF-8 text without control characters other than
// tab and line breaks (a cut may split the last rune).
func printable(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
		b = b[n:]
	}
	return true
}
