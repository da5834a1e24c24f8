// Package payload holds the bounds jethook keeps to whenever it reads
// inside a body a sender wrote: how deeply its JSON may nest. A body past
// them is still stored and delivered byte for byte; only what reads into
// it (a destination's filter, the dashboard's indented view, a provider's
// JSON pointer) treats it as unreadable, in time and memory that grow
// with its size and never with its depth.
package payload

import "bytes"

// MaxDepth is how many arrays and objects deep a body's JSON may nest
// before jethook stops reading inside it. Real webhooks nest under a dozen
// levels; parsers that recurse per level (gjson, encoding/json's decoder
// into interfaces) are safe at this depth, while a few megabytes of "["
// would otherwise make them use hundreds of megabytes of stack.
const MaxDepth = 128

// TooDeep reports whether b, read as JSON, opens more than MaxDepth
// arrays and objects without closing them. It reads b at most once and
// allocates nothing. It does not check that b is JSON: brackets inside
// strings do not count, any others do.
func TooDeep(b []byte) bool {
	// Nesting deeper needs more openers than MaxDepth; most bodies have
	// fewer, and counting them is far quicker than following them.
	if bytes.Count(b, []byte{'{'})+bytes.Count(b, []byte{'['}) <= MaxDepth {
		return false
	}
	return depth(b, MaxDepth) > MaxDepth
}

// Depth is how many arrays and objects deep b, read as JSON, nests, as
// TooDeep counts them.
func Depth(b []byte) int { return depth(b, len(b)) }

// depth is b's depth, or stop+1 as soon as it goes past stop.
func depth(b []byte, stop int) int {
	d, deepest, inString := 0, 0, false
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
			d++
			if d > deepest {
				if d > stop {
					return d
				}
				deepest = d
			}
		case ']', '}':
			d--
		}
	}
	return deepest
}
