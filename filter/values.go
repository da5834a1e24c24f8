package filter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"github.com/tidwall/gjson"
)

// Values are what a body must hold for the expression to be true, as
// BodyValues gives values (a string's bytes, or a number's key): one
// value at least of each group. A group comes from a field of `body`
// compared with a literal (==, or `in` a list of literals), in a
// condition the whole expression needs: the expression itself, or a term
// of its top-level &&; both sides of an || make one group. A store that
// knows which values a stretch of webhooks holds can pass over a stretch
// that lacks every value of a group unread.
func (f *Filter) Values() [][]string { return f.values }

// equals is what Values returns for the expression e.
func equals(e ast.Expr) [][]string {
	if e.Kind() != ast.CallKind {
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd:
		var all [][]string
		for _, a := range args {
			all = append(all, equals(a)...)
		}
		return all
	case operators.LogicalOr:
		// Either side's first group is needed if that side is true.
		var one []string
		for _, a := range args {
			g := equals(a)
			if len(g) == 0 {
				return nil // a side that needs nothing
			}
			one = append(one, g[0]...)
		}
		return [][]string{one}
	case operators.Equals:
		if len(args) != 2 {
			return nil
		}
		for i, lit := range []ast.Expr{args[1], args[0]} {
			if v, ok := literalValue(lit); ok && inBody(args[i]) {
				return [][]string{{v}}
			}
		}
	case operators.In:
		if len(args) != 2 || !inBody(args[0]) || args[1].Kind() != ast.ListKind {
			return nil
		}
		one := []string{}
		for _, el := range args[1].AsList().Elements() {
			v, ok := literalValue(el)
			if !ok {
				return nil
			}
			one = append(one, v)
		}
		return [][]string{one}
	}
	return nil
}

// literalValue is e's value as BodyValues gives it, when e is a string or
// number literal.
func literalValue(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	var f float64
	switch v := e.AsLiteral().(type) {
	case types.String:
		return string(v), true
	case types.Int:
		f = float64(v)
	case types.Uint:
		f = float64(v)
	case types.Double:
		if math.IsNaN(float64(v)) {
			return "", false
		}
		f = float64(v)
	default:
		return "", false
	}
	return string(numberKey(nil, f)), true
}

// numberKey is how BodyValues gives the number f: 0xff, which no UTF-8
// string holds, then f's bits (a body's numbers are doubles to an
// expression, and compare equal to an int or uint of the same value).
func numberKey(dst []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 == 0
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xff), math.Float64bits(f))
}

// BodyValues calls fn with each value of the JSON text body that an
// expression can compare for equality: each string value (not the keys
// of objects) as an expression reads it, unescaped, with bytes that are
// not UTF-8 replaced; and each number as a key of its value (numberKey).
// fn must not keep v. For a body that is not JSON what it finds means
// nothing: an expression reads such a body as null, whose fields equal
// nothing.
func BodyValues(body []byte, fn func(v []byte)) {
	// A string needs decoding only if it holds a backslash, or bytes that
	// are not UTF-8. Both are looked for once in the whole body: each
	// string of a body that is UTF-8 is, since its quotes are ASCII.
	valid := utf8.Valid(body)
	slash := bytes.IndexByte(body, '\\') // the next backslash; -1: none
	var key [9]byte
	for i := 0; i < len(body); {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			numbers(body[i:], key[:0], fn)
			return
		}
		numbers(body[i:i+q], key[:0], fn)
		start := i + q + 1
		end, escaped := stringEnd(body, start, &slash)
		if end < 0 {
			return
		}
		i = end + 1
		j := i
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j < len(body) && body[j] == ':' {
			continue // a key
		}
		s := body[start:end]
		if escaped || !valid {
			s = []byte(validUTF8(gjson.ParseBytes(body[start-1 : end+1]).Str))
		}
		fn(s)
	}
}

// numbers calls fn with the key of each number in gap, the text between
// two strings of a JSON body. A number ends where gjson ends it: at
// whitespace, ',', ']' or '}'.
func numbers(gap, key []byte, fn func([]byte)) {
	for k := 0; k < len(gap); k++ {
		if c := gap[k]; c != '-' && (c < '0' || c > '9') {
			continue
		}
		end := k + 1
		for end < len(gap) && gap[end] > ' ' && gap[end] != ',' && gap[end] != ']' && gap[end] != '}' {
			end++
		}
		if f, ok := integer(gap[k:end]); ok {
			fn(numberKey(key, f))
		} else if f, err := strconv.ParseFloat(unsafe.String(&gap[k], end-k), 64); err == nil || errors.Is(err, strconv.ErrRange) {
			fn(numberKey(key, f))
		}
		k = end
	}
}

// integer is the value of n when n is an integer of at most 15 digits
// (which a double holds exactly): most numbers of a webhook, read
// without strconv.
func integer(n []byte) (float64, bool) {
	neg := len(n) > 0 && n[0] == '-'
	if neg {
		n = n[1:]
	}
	if len(n) == 0 || len(n) > 15 {
		return 0, false
	}
	v := int64(0)
	for _, c := range n {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return float64(v), true
}

// stringEnd is the index of the quote that ends the JSON string whose
// text starts at body[i], or -1 if none does, and whether the string
// holds an escape. slash is the index of the body's next backslash at or
// after i (-1: none); stringEnd moves it past the string.
func stringEnd(body []byte, i int, slash *int) (int, bool) {
	escaped := false
	for {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return -1, escaped
		}
		end, quoted := i+q, false
		for *slash >= 0 && *slash < end {
			escaped = true
			past := *slash + 2 // a backslash escapes the byte after it
			if n := bytes.IndexByte(body[min(past, len(body)):], '\\'); n < 0 {
				*slash = -1
			} else {
				*slash = past + n
			}
			if past > end { // it escapes this quote: look on after it
				quoted, i = true, past
				break
			}
		}
		if !quoted {
			return end, escaped
		}
	}
}
