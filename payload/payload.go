// Package payload holds the bounds jethook keeps to whenever it reads
// inside a body a sender wrote: how deeply its JSON may nest. A body past
// them is still stored and delivered byte for byte; only what reads into
// it (a destination's filter, the dashboard's indented view, a provider's
// JSON pointer) treats it as unreadable, in time and memory that grow
// with its size and never with its depth.
package payload

// MaxDepth is how many arrays and objects deep a body's JSON may nest
// before jethook stops reading inside it. Real webhooks nest under a dozen
// levels; parsers that recurse per level (gjson, encoding/json's decoder
// into interfaces) are safe at this depth, while a few megabytes of "["
// would otherwise make them use hundreds of megabytes of stack.
const MaxDepth = 128

// TooDeep reports whether b, read as JSON, opens more than MaxDepth
// arrays and objects without closing them. It reads b once and allocates
// nothing. It does not check that b is JSON: brackets inside strings do
// not count, any others do.
func TooDeep(b []byte) bool {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxDepth {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}
