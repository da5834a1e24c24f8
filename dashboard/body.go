package dashboard

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/jethook/jethook/payload"
)

// maxShown bounds the part of a body a page shows.
const maxShown = 256 << 10

// maxIndented bounds the indented JSON a page shows: indenting adds up to
// two spaces per level to every line, so a deep body could grow a
// hundredfold.
const maxIndented = 8 << 20

// body is a payload as a page shows it: always as text in a <pre>.
type body struct {
	Kind  string // "JSON", "text" or "binary"
	Text  string // pretty JSON, the text, or a hex dump
	Size  int
	Shown int // how many bytes Text covers; less than Size when cut
}

// newBody formats b: indented JSON when it is JSON and its indented form
// surely fits in maxIndented, the text when it is printable UTF-8, else a
// hex dump. Beyond maxShown it shows the start.
func newBody(b []byte) body {
	out := body{Size: len(b), Shown: len(b)}
	if len(b) <= maxShown && indentable(b) && json.Valid(b) {
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

// indentable reports whether b, indented, surely fits in maxIndented:
// every byte may start a line of a newline and two spaces per level, plus
// a space after a colon.
func indentable(b []byte) bool {
	d := payload.Depth(b)
	return d <= payload.MaxDepth && len(b)*(2*d+2) <= maxIndented
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
