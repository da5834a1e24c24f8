package transform

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// A JSON body is read in one pass (newDoc) that finds where each of its
// larger objects and arrays ends; the members of a level the script reads
// are then listed (member) stepping over what they hold through those
// ends, instead of reading it again. Without them, reading
// body.data.object.id would go through the object three times, once per
// level.

// doc is a JSON body and the extents of its objects and arrays of at
// least minContainer bytes, in the order they open.
type doc struct {
	s  string
	cs []container
}

// container is one object or array of a doc: where it opens and ends,
// the index of the first container after everything it holds, and how
// many commas it holds at its own level (its members less one). Offsets
// are 32 bits: a doc is at most maxDoc bytes.
type container struct{ open, end, next, commas int32 }

// maxDoc is the largest body newDoc indexes.
const maxDoc = math.MaxInt32

// minContainer is the size below which objects and arrays are not
// recorded: stepping over them byte by byte costs little, and a body of
// many small ones would otherwise make a large index.
const minContainer = 64

// newDoc indexes s, which is JSON. If it is not, nothing fails: what the
// script reads of it is only less sensible.
func newDoc(s string) *doc {
	// A guess at how many containers are large enough to be recorded.
	d := &doc{s: s, cs: make([]container, 0, len(s)/256+4)}
	var stack [32]int
	open := stack[:0] // indices in d.cs of the containers not closed yet
	for i := 0; i < len(s); i++ {
		for i < len(s) && !structural[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		switch s[i] {
		case '"':
			i = stringEnd(s, i) - 1
		case ',':
			if n := len(open); n > 0 {
				d.cs[open[n-1]].commas++
			}
		case '{', '[':
			open = append(open, len(d.cs))
			d.cs = append(d.cs, container{open: int32(i), end: int32(len(s))})
		default: // '}', ']'
			n := len(open)
			if n == 0 {
				continue
			}
			k := open[n-1]
			open = open[:n-1]
			if i+1-int(d.cs[k].open) < minContainer {
				// What it holds is smaller still, so not recorded: it is
				// the last one.
				d.cs = d.cs[:k]
				continue
			}
			d.cs[k].end, d.cs[k].next = int32(i+1), int32(len(d.cs))
		}
	}
	for _, k := range open {
		d.cs[k].next = int32(len(d.cs))
	}
	return d
}

// structural marks the bytes newDoc stops at.
var structural = [256]bool{'"': true, ',': true, '{': true, '}': true, '[': true, ']': true}

// container is the index in d.cs of the container that opens at at, or
// -1 when it is not recorded.
func (d *doc) container(at int32) int {
	k, ok := slices.BinarySearchFunc(d.cs, at, func(c container, at int32) int { return cmp.Compare(c.open, at) })
	if !ok {
		return -1
	}
	return k
}

// size is how many members the value at v.at holds, a guess when it is
// not recorded.
func (d *doc) size(v span) int {
	if k := d.container(v.at); k >= 0 {
		return int(d.cs[k].commas) + 1
	}
	return 8
}

// stringEnd is the end of the JSON string that opens at s[i], past its
// closing quote.
func stringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		j = nextQuote(s, j)
		if j == len(s) {
			break
		}
		b := j
		for s[b-1] == '\\' {
			b--
		}
		if (j-b)%2 == 0 { // not escaped
			return j + 1
		}
	}
	return len(s)
}

// nextQuote is the index of the first '"' in s at or after j, or len(s).
// It looks at eight bytes at a time for the first quoteWords words: most
// strings of a body are short, too short for strings.IndexByte to make
// up for its call. Past them it calls it, which looks at 16 or 32 bytes
// at a time.
func nextQuote(s string, j int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for n := 0; j+8 <= len(s) && n < quoteWords; j, n = j+8, n+1 {
		x := word(s[j:j+8]) ^ ones*'"'
		// The lowest byte of x that is zero, if any, has its high bit
		// set in this; the bits above it may be wrong.
		if m := (x - ones) &^ x & highs; m != 0 {
			return j + bits.TrailingZeros64(m)/8
		}
	}
	if k := strings.IndexByte(s[j:], '"'); k >= 0 {
		return j + k
	}
	return len(s)
}

// quoteWords is how many words nextQuote reads itself.
const quoteWords = 4

// word is the first eight bytes of s as one little-endian word, read at
// once.
func word(s string) uint64 {
	_ = s[7] // one bounds check for the eight
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// span is a value of a doc: d.s[at:end].
type span struct{ at, end int32 }

func (d *doc) raw(v span) string { return d.s[v.at:v.end] }

// value is the value that starts at s[i]; next is the index in d.cs of
// the first container at or after i, moved past this value.
func (d *doc) value(i int, next *int) span {
	s := d.s
	switch s[i] {
	case '"':
		return spanOf(i, stringEnd(s, i))
	case '{', '[':
		if k := *next; k < len(d.cs) && int(d.cs[k].open) == i {
			*next = int(d.cs[k].next)
			return span{d.cs[k].open, d.cs[k].end}
		}
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = stringEnd(s, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return spanOf(i, j+1)
				}
			}
		}
		return spanOf(i, len(s))
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\n' && s[j] != '\r' && s[j] != '\t' {
		j++
	}
	return spanOf(i, j)
}

func spanOf(at, end int) span { return span{int32(at), int32(end)} }

// cursor is where a reading of an object's or array's members is: the
// next member's offset, and the index in d.cs of the first container at
// or after it.
type cursor struct{ i, next int }

// start is a cursor at the first member of the object or array v.
func (d *doc) start(v span) cursor {
	next := len(d.cs)
	if k := d.container(v.at); k >= 0 {
		next = k + 1
	}
	return cursor{skipSpace(d.s[:v.end], int(v.at)+1), next}
}

// member reads the member of the object or array v at c and moves c past
// it: for an object its key (what is written between its quotes) and
// value, for an array its value. ok is false when there is none left.
func (d *doc) member(v span, c *cursor) (key, val span, ok bool) {
	s := d.s[:v.end]
	i := c.i
	if s[v.at] == '{' {
		if i >= len(s) || s[i] != '"' {
			return span{}, span{}, false
		}
		ke := stringEnd(s, i)
		if ke-1 <= i {
			return span{}, span{}, false
		}
		key = spanOf(i+1, ke-1)
		if i = skipSpace(s, ke); i >= len(s) || s[i] != ':' {
			return span{}, span{}, false
		}
		i = skipSpace(s, i+1)
	}
	if i >= len(s) || s[i] == '}' || s[i] == ']' {
		return span{}, span{}, false
	}
	val = d.value(i, &c.next)
	if i = skipSpace(s, int(val.end)); i < len(s) && s[i] == ',' {
		i = skipSpace(s, i+1)
	}
	c.i = i
	return key, val, true
}

// unescape is the text of a JSON string's content as written between its
// quotes.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	return gjson.Parse(`"` + s + `"`).String()
}
