package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Key is a compiled ordering key: a CEL expression in the environment of
// filters that gives, for each event, the value whose events a destination
// with `order:` delivers one at a time. It is safe for concurrent use.
type Key struct {
	prg cel.Program
}

// KeyKinds are the kinds of error Key.Eval reports: those of filters but
// "not a boolean", plus "empty" (the key is "" or null) and "not a key"
// (a list, a map or a boolean).
var KeyKinds = append(without(Kinds, "not a boolean"), "empty", "not a key")

func without(kinds []string, drop string) []string {
	var out []string
	for _, k := range kinds {
		if k != drop {
			out = append(out, k)
		}
	}
	return out
}

// CompileKey parses and type-checks expr, which must give a string, a
// number, or a value known only at run time (a field of the body). Its
// error is one line fit for a config error.
func CompileKey(expr string) (*Key, error) {
	e, err := environment()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("key is empty")
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("key does not compile: %s", oneLine(iss.Err().Error()))
	}
	switch t := ast.OutputType(); {
	case t.IsExactType(types.StringType), t.IsExactType(types.IntType), t.IsExactType(types.UintType),
		t.IsExactType(types.DoubleType), t.IsExactType(types.DynType):
	default:
		return nil, fmt.Errorf("key must be a string or a number, but gives %s", t)
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, fmt.Errorf("key: %v", err)
	}
	return &Key{prg: prg}, nil
}

// Eval gives the key of ev. A number is written in decimal (an integral
// double without a fraction, so that a JSON id 123 is "123"). A run-time
// error, an empty key or a value that is not a string or a number returns
// an *Error, which never quotes the payload.
func (k *Key) Eval(ev *Event) (string, error) {
	out, _, err := k.prg.Eval(&activation{ev: ev})
	if err != nil {
		return "", &Error{Kind: kindOf(err.Error())}
	}
	var s string
	switch v := out.Value().(type) {
	case string:
		s = v
	case int64:
		s = strconv.FormatInt(v, 10)
	case uint64:
		s = strconv.FormatUint(v, 10)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			s = strconv.FormatInt(int64(v), 10)
		} else {
			s = strconv.FormatFloat(v, 'g', -1, 64)
		}
	default:
		if out == types.NullValue {
			return "", &Error{Kind: "empty"}
		}
		return "", &Error{Kind: "not a key"}
	}
	if s == "" {
		return "", &Error{Kind: "empty"}
	}
	return s, nil
}
