package transform

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/dop251/goja"
	"github.com/tidwall/gjson"

	"github.com/jethook/jethook/payload"
	"github.com/jethook/jethook/provider"
)

// machine is one goja runtime with the script's top-level code run and its
// handler registered. A run that a limit stopped discards its machine: its
// state may be half-changed.
type machine struct {
	s       *Script
	rt      *goja.Runtime
	handler goja.Callable

	// What the run in progress reads; set by run.
	now      time.Time
	console  io.Writer
	query    string
	body     []byte
	bodyVal  goja.Value // the body as the script sees it, once read or set
	bodyUsed bool       // read or set: the body must be encoded from bodyVal
	decoded  goja.Value // the body as decodeBody made it, nil if it did not
	failMsg  string     // $transform.fail's message
	stopped  *Error     // why a built-in stopped the run (stop)
	guard    guard      // the run's, under the watchdog
	scratch  []byte     // where a body is encoded before it is copied out

	// The objects a run hands the script: made once per machine, given
	// the run's request before it and emptied after it (empty), so that
	// no run sees what another set on them.
	request *requestObject
	reqObj  *goja.Object
	hdr     *headerObject
	hdrObj  *goja.Object
	ctx     *contextObject
	ctxObj  *goja.Object
	proto   *goja.Object // Object.prototype, theirs until a script sets another
}

// errFail interrupts a run that called $transform.fail.
var errFail = errors.New("failed")

// stop ends the run in progress with e: a built-in found that it went
// past a bound it could only see after the step (regexp.go).
func (m *machine) stop(e *Error) {
	m.stopped = e
	m.rt.Interrupt(e)
}

// newMachine makes a runtime for s and runs its top-level code, under the
// run limits with ten times the timeout.
func (s *Script) newMachine() (*machine, error) {
	rt := goja.New()
	m := &machine{s: s, rt: rt, now: time.Now()}
	rt.SetMaxCallStackSize(MaxCallDepth)
	rt.SetTimeSource(func() time.Time { return m.now })
	harden(rt, s.limits, m.stop)
	m.install()
	m.proto = rt.NewObject().Prototype()
	m.request = &requestObject{m: m}
	m.reqObj = rt.NewDynamicObject(m.request)
	m.hdr = &headerObject{rt: rt, names: make(headerNames)}
	m.hdrObj = rt.NewDynamicObject(m.hdr)
	m.ctx = &contextObject{rt: rt}
	m.ctxObj = rt.NewDynamicObject(m.ctx)
	w := &m.guard
	w.watch(rt, 10*s.limits.Timeout, s.limits.Memory, true)
	err := engineSafe(func() error {
		_, err := rt.RunProgram(s.prg)
		return err
	})
	tripped := w.end()
	if err == nil && tripped != "" {
		err = &Error{Kind: tripped, Msg: "while running the script's top-level code"}
	}
	if m.stopped != nil {
		err = m.stopped
	}
	if err != nil {
		if e := runError(err, m); e != nil {
			e.Msg = strings.TrimPrefix(e.Msg+" (top-level code)", " ")
			return nil, fmt.Errorf("%s: %w", s.name, e)
		}
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if m.handler == nil {
		return nil, fmt.Errorf("%s: the script registers no handler; call addHandler('transform', (request, context) => { ...; return request; })", s.name)
	}
	return m, nil
}

// install defines the globals a script may use besides the language's
// own: addHandler, $transform.fail, console and process.env.
func (m *machine) install() {
	rt := m.rt
	_ = rt.Set("addHandler", func(call goja.FunctionCall) goja.Value {
		name := call.Argument(0).String()
		fn, ok := goja.AssertFunction(call.Argument(1))
		if !ok {
			panic(rt.NewTypeError("addHandler(%q, handler): handler is not a function", name))
		}
		if name != "transform" {
			panic(rt.NewTypeError("addHandler(%q, ...): the only handler is 'transform'", name))
		}
		m.handler = fn
		return goja.Undefined()
	})
	tf := rt.NewObject()
	_ = tf.Set("fail", func(call goja.FunctionCall) goja.Value {
		m.failMsg = call.Argument(0).String()
		rt.Interrupt(errFail)
		return goja.Undefined()
	})
	_ = rt.Set("$transform", tf)
	console := rt.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug"} {
		_ = console.Set(level, func(call goja.FunctionCall) goja.Value {
			if m.console == nil {
				return goja.Undefined()
			}
			parts := make([]string, len(call.Arguments))
			for i, a := range call.Arguments {
				parts[i] = display(rt, a)
			}
			fmt.Fprintf(m.console, "console.%s: %s\n", level, strings.Join(parts, " "))
			return goja.Undefined()
		})
	}
	_ = rt.Set("console", console)
	env := rt.NewObject()
	for k, v := range m.s.env {
		_ = env.Set(k, v)
	}
	process := rt.NewObject()
	_ = process.Set("env", env)
	_ = rt.Set("process", process)
}

// display is how console shows a value: strings as they are, the rest as
// JSON where it can be.
func display(rt *goja.Runtime, v goja.Value) string {
	if s, ok := stringOf(v); ok {
		return s
	}
	if _, ok := v.(*goja.Object); ok {
		if b, err := encodeJSON(rt, nil, v, 64<<10); err == nil {
			return string(b)
		}
	}
	return v.String()
}

// decodeBody is the body as the script sees it: lazy objects and arrays
// (lazy.go) when it is JSON that nests no deeper than MaxDepth (and is
// smaller than maxDoc), else a string. A body the ingress found to be such
// JSON (Request.JSON) is not checked again.
func (m *machine) decodeBody() goja.Value {
	// Depth first: it reads the body once without recursion, where
	// gjson's validation recurses as deep as the body nests.
	if len(m.body) <= maxDoc && (m.request.req.JSON || !payload.TooDeep(m.body) && gjson.ValidBytes(m.body)) {
		// The lazy values read the body where it is, not a copy of it
		// per run: what they hand the script (strings, keys) they copy
		// (jsValue, lazyObject.Keys), and Request.Body does not change.
		s := unsafe.String(unsafe.SliceData(m.body), len(m.body))
		d := newDoc(s)
		at := skipSpace(s, 0)
		end := len(strings.TrimRight(s, " \t\r\n"))
		if at >= end {
			return m.rt.ToValue(string(m.body))
		}
		m.decoded = jsValue(m.rt, d, spanOf(at, end))
		return m.decoded
	}
	return m.rt.ToValue(string(m.body))
}

// parsedQuery is the query string as an object: each name's value, or
// its values as an array when it came several times.
func (m *machine) parsedQuery() goja.Value {
	o := m.rt.NewObject()
	vals, _ := url.ParseQuery(m.query)
	for k, vs := range vals {
		if len(vs) == 1 {
			_ = o.Set(k, vs[0])
			continue
		}
		items := make([]any, len(vs))
		for i, v := range vs {
			items[i] = v
		}
		_ = o.Set(k, m.rt.NewArray(items...))
	}
	return o
}

// errUnpinned is a run to do again, pinned (watch).
var errUnpinned = errors.New("run again, pinned")

// run runs the handler on req, pinned to its thread or not (watch). keep
// says whether the machine may be reused.
func (m *machine) run(req *Request, c Context, pin bool) (out *Request, keep bool, err error) {
	rt := m.rt
	m.now = c.Now
	if m.now.IsZero() {
		m.now = time.Now()
	}
	m.console, m.query, m.body = c.Console, req.Query, req.Body
	m.bodyVal, m.bodyUsed, m.decoded, m.failMsg, m.stopped = nil, false, nil, "", nil
	m.request.req, m.hdr.src, m.ctx.c, m.ctx.req = req, req.Header, c, req
	for _, o := range [...]*goja.Object{m.reqObj, m.hdrObj, m.ctxObj} {
		if err := o.SetPrototype(m.proto); err != nil {
			return nil, false, &Error{Kind: KindEngine, Msg: clip(err.Error())}
		}
	}
	defer m.empty()
	r, ctx := m.reqObj, m.ctxObj

	w := &m.guard
	w.watch(rt, m.s.limits.Timeout, m.s.limits.Memory, pin)
	err = engineSafe(func() error {
		res, err := m.handler(goja.Undefined(), r, ctx)
		if err == nil {
			out, err = m.output(req, r, res)
		}
		return err
	})
	tripped := w.end()
	if tripped == kindUnpinned {
		// Whatever stopped it, it may only have waited for a CPU.
		rt.ClearInterrupt()
		return nil, false, errUnpinned
	}
	if m.stopped != nil {
		// The run may have ended before it saw the interrupt.
		rt.ClearInterrupt()
		return nil, false, m.stopped
	}
	if tripped != "" {
		rt.ClearInterrupt()
		return nil, false, &Error{Kind: tripped, Msg: limitText(tripped, m.s.limits)}
	}
	if err != nil {
		if e := runError(err, m); e != nil {
			// A limit or $transform.fail stopped it mid-way: its state
			// may be half-changed.
			keep := e.Kind == KindThrew || e.Kind == KindInvalid || e.Kind == KindTooBig
			rt.ClearInterrupt()
			return nil, keep, e
		}
		return nil, false, &Error{Kind: KindThrew, Msg: clip(err.Error())}
	}
	return out, true, nil
}

// empty drops what a run left on the machine: its request, and what the
// script set on the objects it was given.
func (m *machine) empty() {
	m.console, m.body, m.bodyVal, m.decoded = nil, nil, nil, nil
	m.request.req, m.request.vals = nil, m.request.vals.empty()
	m.hdr.src, m.hdr.set = nil, m.hdr.set.empty()
	m.ctx.c, m.ctx.req, m.ctx.vals = Context{}, nil, m.ctx.vals.empty()
}

// engineSafe runs f, turning a Go panic inside the engine into a
// KindEngine error: it is goja's bug, not the script's, and the machine
// goes, the event fails with it, and jethook goes on.
func engineSafe(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Kind: KindEngine, Msg: clip(fmt.Sprintf("the JavaScript engine failed: %v", p))}
		}
	}()
	return f()
}

// contextKeys are the fields of a handler's context, in order.
var contextKeys = []string{"route", "destination", "event_id", "attempt", "event_type", "received_at", "connection"}

// contextObject is a handler's context: its fields are made from c, and
// event_type from req, when read, and a script may set its own.
// connection holds the names Hookdeck scripts read
// (context.connection.source.name).
type contextObject struct {
	rt   *goja.Runtime
	c    Context
	req  *Request
	vals props
}

func (o *contextObject) Get(key string) goja.Value {
	if v, ok := o.vals.get(key); ok {
		return v
	}
	var v goja.Value
	switch key {
	case "route":
		v = o.rt.ToValue(o.c.Route)
	case "destination":
		v = o.rt.ToValue(o.c.Destination)
	case "event_id":
		v = o.rt.ToValue(o.c.EventID)
	case "attempt":
		v = o.rt.ToValue(o.c.Attempt)
	case "event_type":
		// The type search, admin and the dashboard show: they cannot
		// disagree. A body the ingress found to be JSON is not checked
		// again, as search does not.
		t := ""
		if o.req.JSON {
			t = provider.EventTypeOfJSON(o.req.Header, o.req.Body)
		} else {
			t = provider.EventType(o.req.Header, o.req.Body)
		}
		v = o.rt.ToValue(t)
	case "received_at":
		if o.c.ReceivedAt.IsZero() {
			return nil
		}
		v = o.rt.ToValue(o.c.ReceivedAt.UTC().Format(time.RFC3339Nano))
	case "connection":
		src, dst, conn := o.rt.NewObject(), o.rt.NewObject(), o.rt.NewObject()
		_ = src.Set("name", o.c.Route)
		_ = dst.Set("name", o.c.Destination)
		_ = conn.Set("source", src)
		_ = conn.Set("destination", dst)
		v = conn
	default:
		return nil
	}
	o.Set(key, v)
	return v
}

func (o *contextObject) Set(key string, val goja.Value) bool {
	o.vals.set(key, val)
	return true
}

func (o *contextObject) Has(key string) bool { return o.Get(key) != nil }

func (o *contextObject) Delete(key string) bool {
	o.Set(key, goja.Undefined())
	return true
}

func (o *contextObject) Keys() []string {
	keys := append([]string(nil), contextKeys...)
	for _, p := range o.vals {
		if !slices.Contains(keys, p.key) {
			keys = append(keys, p.key)
		}
	}
	return keys
}

// limitText says which limit a run went past.
func limitText(kind string, l Limits) string {
	switch kind {
	case KindTimeout:
		return fmt.Sprintf("the run used more than %v of CPU time", l.Timeout)
	case KindMemory:
		return fmt.Sprintf("the run allocated more than %d MiB", l.Memory>>20)
	}
	return kind
}

// runError turns what goja returned into an *Error, nil when it is none
// of goja's.
func runError(err error, m *machine) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if errors.Is(ie.Unwrap(), errFail) {
			return &Error{Kind: KindFailed, Msg: clip(m.failMsg), At: where(ie.Stack())}
		}
		if l, ok := ie.Value().(limitError); ok {
			return &Error{Kind: string(l), Msg: limitText(string(l), m.s.limits), At: where(ie.Stack())}
		}
		return &Error{Kind: KindThrew, Msg: clip(fmt.Sprint(ie.Value())), At: where(ie.Stack())}
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Kind: KindStack, Msg: fmt.Sprintf("calls nested deeper than %d", MaxCallDepth), At: where(so.Stack())}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := "exception"
		if v := ex.Value(); v != nil {
			msg = v.String()
		}
		return &Error{Kind: KindThrew, Msg: clip(msg), At: where(ex.Stack())}
	}
	return nil
}

// where is the script position of the innermost frame that has one.
func where(stack []goja.StackFrame) string {
	for i := range stack {
		p := stack[i].Position()
		if p.Line > 0 {
			return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
		}
	}
	return ""
}

// clip keeps an error message to one short line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
