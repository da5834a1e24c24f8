package transform

import (
	"fmt"
	"sync"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/dop251/goja"
)

// matchTimeout bounds one match of a regular expression that goja runs
// with regexp2, the backtracking engine it takes for back-references and
// lookaround: such a match is one step, which no interrupt reaches, and
// /^(a|aa)+\1$/ on fifty a's backtracks for years. It is the longest a run
// with the default timeout may take by the wall clock; regexp2 reads its
// clock every 100 ms, so a match stops up to 200 ms after it.
const matchTimeout = wallFactor * DefaultTimeout

// goja is the only user of regexp2 in jethook; the regular expressions it
// compiles take their match timeout from here.
func init() { regexp2.DefaultMatchTimeout = matchTimeout }

// keepClock keeps regexp2's clock going from the first script compiled
// on: regexp2 stops it a second after the last deadline it knows, and a
// deadline taken while it restarts is early by the time it stood still,
// which would cut a match short well before matchTimeout, and unseen. A
// match with a deadline a century away keeps it going; it wakes every
// 100 ms.
var keepClock = sync.OnceFunc(func() {
	re := regexp2.MustCompile("", regexp2.ECMAScript)
	re.MatchTimeout = 100 * 365 * 24 * time.Hour
	_, _ = re.MatchString("")
})

// boundRegExps makes the built-ins that match a regular expression
// (test, the Symbol.match, search and split that String.prototype's
// match, search and split call, and the next of the iterator that
// Symbol.matchAll, which String.prototype.matchAll calls, returns) fail
// the run as a timeout when one of their calls matched for matchTimeout
// or longer: regexp2 may have cut the match short, and goja takes a cut
// match for no match. Replacing is boundReplace's.
//
// exec is goja's own: goja guards it, and replacing it would take every
// regular expression off goja's fast paths for good (a split would call
// exec at each character). A cut exec takes matchTimeout by the wall
// clock in one step: with the default timeout that is a run's wall
// limit, and the run fails as a timeout (guard.end).
func (b *bounds) boundRegExps() {
	rt := b.rt
	rproto := rt.Get("RegExp").ToObject(rt).Get("prototype").ToObject(rt)
	timed := func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		m := b.startMatch()
		v := b.call(orig, call.This, call.Arguments...)
		m.found()
		return v
	}
	b.wrap(rproto, "test", timed)
	b.wrapSymbol(rproto, goja.SymMatch, "[Symbol.match]", timed)
	b.wrapSymbol(rproto, goja.SymSearch, "[Symbol.search]", timed)
	b.wrapSymbol(rproto, goja.SymSplit, "[Symbol.split]", timed)
	b.wrapSymbol(rproto, goja.SymMatchAll, "[Symbol.matchAll]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		it := b.call(orig, call.This, call.Arguments...).ToObject(rt)
		next, ok := goja.AssertFunction(it.Get("next"))
		if !ok {
			return it
		}
		b.define(it, "next", 0, func(call goja.FunctionCall) goja.Value { return timed(next, call) })
		return it
	})
}

// wrapSymbol replaces o[sym] by f, which is given the original.
func (b *bounds) wrapSymbol(o *goja.Object, sym *goja.Symbol, name string, f func(orig goja.Callable, call goja.FunctionCall) goja.Value) {
	orig, ok := goja.AssertFunction(o.GetSymbol(sym))
	if !ok {
		return
	}
	n := o.GetSymbol(sym).ToObject(b.rt).Get("length").ToInteger()
	fn := b.rt.ToValue(func(call goja.FunctionCall) goja.Value { return f(orig, call) }).ToObject(b.rt)
	_ = fn.DefineDataProperty("name", b.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = fn.DefineDataProperty("length", b.rt.ToValue(n), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = o.DefineDataPropertySymbol(sym, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// match times one built-in's matching.
type match struct {
	b     *bounds
	start time.Time
	done  bool
}

func (b *bounds) startMatch() *match { return &match{b: b, start: time.Now()} }

// found ends the matching; later calls do nothing. Matching that took
// matchTimeout or longer stops the run.
func (m *match) found() {
	if m.done {
		return
	}
	m.done = true
	if time.Since(m.start) >= matchTimeout {
		m.b.stop(&Error{Kind: KindTimeout, Msg: fmt.Sprintf("a regular expression matched for more than %v", matchTimeout)})
	}
}
