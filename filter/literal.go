package filter

import (
	"bytes"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// needs is what an expression's literals require of a raw body for it to
// be true: the bytes of each string that a field of `body` must equal,
// start with, end with or contain, in a condition the whole expression
// needs (the expression itself, or a term of its top-level &&). Reading a
// body to find a field is what a search spends most on; looking for bytes
// is cheaper.
func needs(e ast.Expr) [][]byte {
	if e.Kind() != ast.CallKind {
		return nil
	}
	c := e.AsCall()
	args := c.Args()
	switch name := c.FunctionName(); {
	case name == operators.LogicalAnd:
		var all [][]byte
		for _, a := range args {
			all = append(all, needs(a)...)
		}
		return all
	case name == operators.Equals && len(args) == 2:
		if lit, ok := plainString(args[1]); ok && inBody(args[0]) {
			return [][]byte{lit}
		}
		if lit, ok := plainString(args[0]); ok && inBody(args[1]) {
			return [][]byte{lit}
		}
	case (name == "startsWith" || name == "endsWith" || name == "contains") && c.IsMemberFunction() && len(args) == 1:
		if lit, ok := plainString(args[0]); ok && inBody(c.Target()) {
			return [][]byte{lit}
		}
	}
	return nil
}

// inBody reports whether e is a field of `body`: body.a, body["a"],
// body.a[0] and so on (not a presence test, has()).
func inBody(e ast.Expr) bool {
	for {
		switch e.Kind() {
		case ast.IdentKind:
			return e.AsIdent() == "body"
		case ast.SelectKind:
			if e.AsSelect().IsTestOnly() {
				return false
			}
			e = e.AsSelect().Operand()
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
				return false
			}
			e = c.Args()[0]
		default:
			return false
		}
	}
}

// plainString is e's bytes when e is a non-empty string literal that JSON
// writes only as itself, but for escapes: printable ASCII without `"`
// and `\`. (Any character may also be written \uXXXX: Excludes looks for
// a backslash in the body first.)
func plainString(e ast.Expr) ([]byte, bool) {
	if e.Kind() != ast.LiteralKind {
		return nil, false
	}
	s, ok := e.AsLiteral().(types.String)
	if !ok || s == "" {
		return nil, false
	}
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return []byte(s), true
}

// Excludes reports whether body alone shows that the expression cannot be
// true for it, without evaluating it: the expression compares a field of
// `body` to a string (==, startsWith, endsWith, contains) in a condition
// it needs, and the body holds neither that string's bytes nor a
// backslash (with which JSON could escape them). False says nothing: Match
// decides. Excludes never looks at headers or other variables, so it holds
// whatever they are. A field the body lacks makes Match return an error,
// which Excludes does not tell apart from false.
func (f *Filter) Excludes(body []byte) bool {
	if len(f.needs) == 0 || bytes.IndexByte(body, '\\') >= 0 {
		return false
	}
	for _, lit := range f.needs {
		if !bytes.Contains(body, lit) {
			return true
		}
	}
	return false
}
