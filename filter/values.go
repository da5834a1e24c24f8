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
	for i := 0; i < len(body); {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return
		}
		start := i + q + 1
		end, escaped := stringEnd(body, start)
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
		if escaped || !utf8.Valid(s) {
			s = []byte(validUTF8(gjson.ParseBytes(body[start-1 : end+1]).Str))
		}
		fn(s)
	}
}

// stringEnd is the index of the quote that ends the JSON string whose
// text starts at body[i], or -1 if none does, and whether the string
// holds an escape.
func stringEnd(body []byte, i int) (int, bool) {
	escaped := false
	for i <= len(body) {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			return -1, escaped
		}
		bs := bytes.IndexByte(body[i:i+q], '\\')
		if bs < 0 {
			return i + q, escaped
		}
		escaped = true
		i += bs + 2 // the backslash and the character it escapes
	}
	return -1, escaped
}
