package transform

import (
	"strings"

	"github.com/dop251/goja"
)

// boundReplace bounds what String.prototype.replace and replaceAll, and
// RegExp.prototype[Symbol.replace] through which they replace a regular
// expression's matches, build in one step. goja writes every replacement
// in Go, and a replacement string's $' (the rest of the string after the
// match) or $` (the part before it) is as long as the string, once per
// match: 'x'.repeat(2e4).replace(/x/g, "$'") makes 2·10^8 characters. A
// replacement string is therefore handed to goja as a replacer function
// that expands it as goja would and refuses, with a RangeError, a total
// past maxChars. replaceAll of a string also refuses more than maxLen
// matches, which goja lists all before it replaces any.
func (b *bounds) boundReplace() {
	rt := b.rt
	sproto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	b.wrap(sproto, "replace", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		return b.replaceString(orig, call, false)
	})
	b.wrap(sproto, "replaceAll", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		return b.replaceString(orig, call, true)
	})
	rproto := rt.Get("RegExp").ToObject(rt).Get("prototype").ToObject(rt)
	b.wrapSymbol(rproto, goja.SymReplace, "[Symbol.replace]", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		s := call.Argument(0).ToString()
		m := b.startMatch()
		v := b.call(orig, call.This, s, b.replacer(call.Argument(1), m.found))
		m.found()
		return v
	})
}

// replaceString is String.prototype.replace, or replaceAll when all is
// true, with its replacement string bounded. A search value with its own
// Symbol.replace (a RegExp) replaces as it does.
func (b *bounds) replaceString(orig goja.Callable, call goja.FunctionCall, all bool) goja.Value {
	this, search := call.This, call.Argument(0)
	if goja.IsUndefined(this) || goja.IsNull(this) {
		return b.call(orig, this, call.Arguments...) // its TypeError
	}
	if o, ok := search.(*goja.Object); ok {
		if m := o.GetSymbol(goja.SymReplace); m != nil && !goja.IsUndefined(m) && !goja.IsNull(m) {
			return b.call(orig, this, call.Arguments...)
		}
	}
	// The order in which the language turns them into strings.
	s := b.str(this)
	find := b.str(search)
	if all && b.occurrences(s, find) > b.maxLen {
		panic(rangeError(b.rt, "Invalid array length"))
	}
	return b.call(orig, s, find, b.replacer(call.Argument(1), nil))
}

// occurrences is about how many times replaceAll finds find in s: exactly
// for a string of valid UTF-16, and never fewer than its bound allows.
func (b *bounds) occurrences(s, find goja.String) int64 {
	n := find.Length()
	if n == 0 {
		return int64(s.Length()) + 1
	}
	if int64(s.Length()/n) <= b.maxLen {
		return int64(s.Length() / n)
	}
	return int64(strings.Count(s.String(), find.String()))
}

// replacer is what a replace built-in is given for replacement: a
// function as it is (what it returns is made step by step, under the
// run's limits), else its string as a function that expands it and counts
// what it adds. first, when not nil, is called before the first
// replacement is made: every match has been found by then.
func (b *bounds) replacer(replacement goja.Value, first func()) goja.Value {
	if f, ok := goja.AssertFunction(replacement); ok {
		if first == nil {
			return replacement
		}
		return b.rt.ToValue(func(call goja.FunctionCall) goja.Value {
			first()
			return b.call(f, call.This, call.Arguments...)
		})
	}
	rep := b.str(replacement)
	made := 0
	return b.rt.ToValue(func(call goja.FunctionCall) goja.Value {
		if first != nil {
			first()
		}
		return b.substitute(rep, call.Arguments, &made)
	})
}

// substitute is rep with its $ patterns replaced for one match, as goja's
// writeSubstitution makes it: args are the match, its captures, the
// match's position and the string. made counts the characters made for
// every match of the call so far; past maxChars it panics with a
// RangeError, before making them.
func (b *bounds) substitute(rep goja.String, args []goja.Value, made *int) goja.Value {
	n := len(args) - 2 // the match and its captures
	capture := func(i int) goja.String {
		if goja.IsUndefined(args[i]) {
			return goja.String(nil)
		}
		return b.str(args[i])
	}
	matched := capture(0)
	pos := int(args[n].ToInteger())
	s := b.str(args[n+1])
	l, rl := s.Length(), rep.Length()
	tail := pos + matched.Length()
	add := func(size int) {
		if *made += size; *made > b.maxChars {
			panic(rangeError(b.rt, "Invalid string length"))
		}
	}
	var sb goja.StringBuilder
	lit := 0 // where the literal text not yet written starts
	for i := 0; i < rl-1; i++ {
		if rep.CharAt(i) != '$' {
			continue
		}
		add(i - lit)
		sb.WriteSubstring(rep, lit, i)
		lit = i + 2 // past the pattern, and where the scan goes on
		next := lit
		switch ch := rep.CharAt(i + 1); ch {
		case '$':
			add(1)
			sb.WriteRune('$')
		case '`':
			add(pos)
			sb.WriteSubstring(s, 0, pos)
		case '\'':
			if tail < l {
				add(l - tail)
				sb.WriteSubstring(s, tail, l)
			}
		case '&':
			add(matched.Length())
			sb.WriteString(matched)
		default:
			number, j := 0, i+1
			for ; j < rl; j++ {
				d := rep.CharAt(j)
				if d < '0' || d > '9' || number*10+int(d-'0') >= n {
					break
				}
				number = number*10 + int(d-'0')
			}
			if number == 0 {
				lit = i // "$" and ch stay as they are
				break
			}
			c := capture(number)
			add(c.Length())
			sb.WriteString(c)
			lit, next = j, j
		}
		i = next - 1
	}
	add(rl - lit)
	if lit == 0 {
		return rep // no $ pattern: the string itself
	}
	sb.WriteSubstring(rep, lit, rl)
	return sb.String()
}
