// Package filter owns destination filters: CEL expressions
// (https://cel.dev) that decide, from an event's headers, body, route and
// method, whether a destination wants it. It compiles them, evaluates them
// under a cost limit, and sorts run-time errors into a small set of kinds
// that never quote a payload.
package filter

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unsafe"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/payload"
)

// CostLimit bounds one evaluation in CEL's cost units (about one per
// operation or loop step, and one per ten bytes a string function reads):
// an expression that would cost more stops with an error, counted as no
// match. Reading a field of the body costs a handful; searching a 5 MiB
// raw body with string(raw).contains costs about 1.2 million; a loop
// that reaches the limit takes about 0.1 s of CPU.
const CostLimit = 2_000_000

// Event is what a filter sees of one webhook.
type Event struct {
	Route  string
	Method string
	// Header holds the request headers as net/http gives them; the filter
	// sees them as `headers`, names lower-case, several values of one name
	// joined with ", ".
	Header map[string][]string
	// Body is the raw body: `raw` as bytes, and `body` parsed as JSON (null
	// when it is not JSON).
	Body []byte
	// JSON says Body is known to pass IsJSON, checked when it was
	// received: `body` then reads it without checking it again (a scan of
	// the whole body, about half of what reading one field of a 1 KiB
	// body costs). False means not known: Match checks.
	JSON bool
}

// IsJSON reports whether body is what `body` reads as JSON: valid JSON
// nested no deeper than payload.MaxDepth. Otherwise `body` is null (or,
// too deep, an error).
func IsJSON(body []byte) bool {
	return !payload.TooDeep(body) && gjson.ValidBytes(body)
}

// Filter is a compiled filter expression. It is safe for concurrent use.
type Filter struct {
	prg    cel.Program
	reads  map[string]bool // the variables the expression names
	needs  [][]byte        // strings a raw body must hold to match (Excludes)
	values [][]string      // values a body must hold (Values)
}

// environment is the CEL environment every filter compiles in: the
// variables of an Event, the standard functions and the strings extension.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("body", cel.DynType),
		cel.Variable("raw", cel.BytesType),
		cel.Variable("route", cel.StringType),
		cel.Variable("method", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	)
})

// Compile parses and type-checks expr, which must be a boolean CEL
// expression. Its error is one line fit for a config error.
func Compile(expr string) (*Filter, error) {
	e, err := environment()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("filter is empty")
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("filter does not compile: %s", oneLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) {
		return nil, fmt.Errorf("filter must be a boolean expression, but gives %s (compare it: e.g. body.active == true)", t)
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, fmt.Errorf("filter: %v", err)
	}
	f := &Filter{prg: prg, reads: map[string]bool{}, needs: needs(ast.NativeRep().Expr()),
		values: equals(ast.NativeRep().Expr())}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if len(r.OverloadIDs) == 0 {
			f.reads[r.Name] = true
		}
	}
	return f, nil
}

// Reads reports whether the expression names the variable name (headers,
// body, raw, route or method): a caller with many events to match can
// leave out what it never reads.
func (f *Filter) Reads(name string) bool { return f.reads[name] }

// Match evaluates the filter on ev. A run-time error (a missing key, a
// wrong type, the cost limit) returns false with an *Error. Only what the
// expression names is prepared: a filter that does not read `body` never
// parses the JSON.
func (f *Filter) Match(ev *Event) (bool, error) {
	a := activations.Get().(*activation)
	a.ev = ev
	out, _, err := f.prg.Eval(a)
	*a = activation{}
	activations.Put(a)
	if err != nil {
		return false, &Error{Kind: kindOf(err.Error())}
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, &Error{Kind: "not a boolean"}
	}
	return b, nil
}

// Error is a filter that failed at run time on one event. It holds only
// the kind of failure: CEL's messages can quote values from the payload.
type Error struct {
	Kind string // one of Kinds
}

func (e *Error) Error() string { return "filter failed: " + e.Kind }

// Kinds are the kinds of run-time error Match reports, so that callers can
// count and log them by kind without growing.
var Kinds = []string{"no such key", "no such attribute", "no such overload", "index out of range",
	"division by zero", "overflow", "conversion", "cost limit", "not a boolean", "too deep", "too large", "other"}

// errTooDeep is what `body` is when the body nests deeper than
// payload.MaxDepth; its message names the kind (see kindOf).
var errTooDeep = fmt.Errorf("too deep: the body nests arrays and objects more than %d levels", payload.MaxDepth)

// kindOf sorts a CEL run-time error message into one of Kinds.
func kindOf(msg string) string {
	switch {
	case strings.Contains(msg, errTooDeep.Error()):
		return "too deep"
	case strings.Contains(msg, errTooLarge.Error()):
		return "too large"
	case strings.Contains(msg, "no such key"):
		return "no such key"
	case strings.Contains(msg, "no such attribute"), strings.Contains(msg, "undeclared reference"):
		return "no such attribute"
	case strings.Contains(msg, "no such overload"), strings.Contains(msg, "no matching overload"),
		strings.Contains(msg, "unsupported index"):
		return "no such overload"
	case strings.Contains(msg, "out of range"), strings.Contains(msg, "out of bounds"):
		return "index out of range"
	case strings.Contains(msg, "by zero"):
		return "division by zero"
	case strings.Contains(msg, "overflow"):
		return "overflow"
	case strings.Contains(msg, "conversion"), strings.Contains(msg, "invalid syntax"):
		return "conversion"
	case strings.Contains(msg, "cost limit"):
		return "cost limit"
	}
	return "other"
}

// oneLine folds CEL's multi-line messages (which draw a caret under the
// mistake) into one line.
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.Trim(l, ".| ^") == "" || strings.HasPrefix(l, "|") {
			continue
		}
		l = strings.TrimPrefix(l, "ERROR: <input>:")
		out = append(out, position.ReplaceAllString(l, "line $1 column $2:"))
	}
	return strings.Join(out, "; ")
}

// position is where CEL puts the line and column of a mistake.
var position = regexp.MustCompile(`^(\d+):(\d+):`)

// activations are reused across evaluations: a search matches one
// expression against millions of events. Nothing of an evaluation keeps
// its activation past Eval (its result is a bool).
var activations = sync.Pool{New: func() any { return new(activation) }}

// activation gives the expression its variables, each prepared the first
// time the expression reads it.
type activation struct {
	ev *Event

	headers map[string]string
	body    ref.Val // nil until read
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "headers":
		if a.headers == nil {
			a.headers = make(map[string]string, len(a.ev.Header))
			for k, vs := range a.ev.Header {
				a.headers[strings.ToLower(k)] = strings.Join(vs, ", ")
			}
		}
		return a.headers, true
	case "body":
		if a.body == nil {
			a.body = types.NullValue
			// The body is read in place, not copied (it may be megabytes):
			// nothing changes it while a filter runs, and nothing the
			// filter reads from it outlives the evaluation, whose result
			// is a bool.
			s := unsafe.String(unsafe.SliceData(a.ev.Body), len(a.ev.Body))
			switch {
			case a.ev.JSON:
				a.body = jsonValue(gjson.Parse(s))
			case payload.TooDeep(a.ev.Body):
				// gjson recurses once per level: checked first.
				a.body = types.WrapErr(errTooDeep)
			case gjson.Valid(s):
				a.body = jsonValue(gjson.Parse(s))
			}
		}
		return a.body, true
	case "raw":
		return a.ev.Body, true
	case "route":
		return a.ev.Route, true
	case "method":
		return a.ev.Method, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
