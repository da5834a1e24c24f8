package filter

import (
	"bytes"
	"unicode/utf8"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"github.com/tidwall/gjson"
)

// Values are the strings a field of `body` must equal in a condition the
// whole expression needs (the expression itself, or a term of its
// top-level &&). A body whose string values (StringValues) lack one of
// them cannot match, so a store that knows which values a stretch of
// webhooks holds can pass over a stretch without them unread.
func (f *Filter) Values() []string { return f.values }

// equals is what Values returns for the expression e.
func equals(e ast.Expr) []string {
	if e.Kind() != ast.CallKind {
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd:
		var all []string
		for _, a := range args {
			all = append(all, equals(a)...)
		}
		return all
	case operators.Equals:
		if len(args) != 2 {
			return nil
		}
		for i, lit := range []ast.Expr{args[1], args[0]} {
			if s, ok := stringLiteral(lit); ok && inBody(args[i]) {
				return []string{s}
			}
		}
	}
	return nil
}

// stringLiteral is e's value when e is a string literal.
func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// StringValues calls fn with each string value of the JSON text body,
// leaving out the keys of its objects, as an expression reads it:
// unescaped, with bytes that are not UTF-8 replaced. fn must not keep s.
// For a body that is not JSON what it finds means nothing: an expression
// reads such a body as null, whose fields equal nothing.
func StringValues(body []byte, fn func(s []byte)) {
	// A string needs decoding only if it holds a backslash, or bytes that
	// are not UTF-8. Both are looked for once in the whole body: each
	// string of a body that is UTF-8 is, since its quotes are ASCII.
	valid := utf8.Valid(body)
	slash := bytes.IndexByte(body, '\\') // the next backslash; -1: none
	for i := 0; i < len(body); {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return
		}
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
