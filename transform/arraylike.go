package transform

import (
	"math"
	"strconv"

	"github.com/dop251/goja"
)

// maxArgs is the most arguments apply, Reflect.apply and Reflect.construct
// pass, as in JavaScriptCore; V8 refuses about as many.
const maxArgs = 1 << 16

// arrayMethods are the methods of Array.prototype that go through their
// array's length in Go, in one step: each refuses a length past the run's
// bound instead.
var arrayMethods = []string{"concat", "copyWithin", "every", "fill", "filter", "find", "findIndex", "findLast",
	"findLastIndex", "forEach", "includes", "indexOf", "lastIndexOf", "map", "reduce", "reduceRight", "reverse",
	"shift", "slice", "some", "sort", "splice", "toReversed", "toSorted", "toSpliced", "unshift", "with"}

// bounds keeps the built-ins that go through an array, or an array-like
// object (one with a length), in one step to what one run may do: goja
// runs them in Go, where no interrupt reaches, and a length is a number
// anyone can write ({length: 1e9}, Array(1e9)).
type bounds struct {
	rt *goja.Runtime
	// maxLen is the longest array or array-like a built-in goes through.
	maxLen int64
	// maxChars is the longest string a built-in builds.
	maxChars int
	// gopd is Object.getOwnPropertyDescriptor as the runtime made it.
	gopd goja.Callable
	// joining holds the arrays being joined, innermost last: an array met
	// again inside itself joins as "", as in V8.
	joining []*goja.Object
	// sorting holds the comparators sort is given (sort.go).
	sorting sorting
	// stop ends the run in progress with an error, as its limits do.
	stop func(*Error)
}

// boundArrayLikes replaces or wraps the built-ins that take an array-like
// and work through it in one step, and takes Proxy out (a proxy's length
// could change between the check and the work); then those that replace
// (replace.go) and match (regexp.go). stop ends the run in progress.
func boundArrayLikes(rt *goja.Runtime, l Limits, stop func(*Error)) {
	_ = rt.GlobalObject().Delete("Proxy")
	gopd, _ := goja.AssertFunction(rt.Get("Object").ToObject(rt).Get("getOwnPropertyDescriptor"))
	b := &bounds{rt: rt, maxLen: maxElements(l), maxChars: int(l.Memory / 2), gopd: gopd, sorting: newSorting(rt), stop: stop}

	fproto := rt.Get("Function").ToObject(rt).Get("prototype").ToObject(rt)
	b.wrap(fproto, "apply", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		return b.call(orig, call.This, call.Argument(0), b.argList(call.Argument(1)))
	})
	reflect := rt.Get("Reflect").ToObject(rt)
	b.wrap(reflect, "apply", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		return b.call(orig, call.This, call.Argument(0), call.Argument(1), b.argList(call.Argument(2)))
	})
	b.wrap(reflect, "construct", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		args := []goja.Value{call.Argument(0), b.argList(call.Argument(1))}
		if len(call.Arguments) > 2 {
			args = append(args, call.Arguments[2])
		}
		return b.call(orig, call.This, args...)
	})

	aproto := rt.Get("Array").ToObject(rt).Get("prototype").ToObject(rt)
	for _, name := range arrayMethods {
		b.wrap(aproto, name, func(orig goja.Callable, call goja.FunctionCall) goja.Value {
			n := b.length(call.This, name)
			if name == "concat" {
				for _, a := range call.Arguments {
					if _, ok := a.(*goja.Object); ok {
						n += b.length(a, name)
					}
				}
			}
			if n > b.maxLen {
				panic(rangeError(rt, "Invalid array length"))
			}
			if name == "sort" || name == "toSorted" {
				return b.call(orig, call.This, b.comparator(call.Argument(0)))
			}
			return b.call(orig, call.This, call.Arguments...)
		})
	}
	b.define(aproto, "join", 1, func(call goja.FunctionCall) goja.Value {
		sep := goja.String(nil)
		if s := call.Argument(0); !goja.IsUndefined(s) {
			sep = b.str(s)
		}
		return b.join(call.This, sep, "join", func(v goja.Value) goja.Value { return v })
	})
	b.define(aproto, "toLocaleString", 0, func(call goja.FunctionCall) goja.Value {
		return b.join(call.This, nil, "toLocaleString", func(v goja.Value) goja.Value {
			o := v.ToObject(rt)
			f, ok := goja.AssertFunction(o.Get("toLocaleString"))
			if !ok {
				panic(rt.NewTypeError("toLocaleString is not a function"))
			}
			return b.call(f, v)
		})
	})
	str := rt.Get("String").ToObject(rt)
	b.define(str, "raw", 1, func(call goja.FunctionCall) goja.Value {
		raw := call.Argument(0).ToObject(rt).Get("raw")
		if raw == nil {
			raw = goja.Undefined()
		}
		return b.raw(raw.ToObject(rt), call.Arguments[min(1, len(call.Arguments)):])
	})
	sproto := str.Get("prototype").ToObject(rt)
	b.wrap(sproto, "concat", func(orig goja.Callable, call goja.FunctionCall) goja.Value {
		if goja.IsUndefined(call.This) || goja.IsNull(call.This) {
			return b.call(orig, call.This) // its TypeError
		}
		size := len(call.This.String())
		args := make([]goja.Value, len(call.Arguments))
		for i, a := range call.Arguments {
			s := b.str(a)
			args[i] = s
			if size += s.Length(); size > b.maxChars {
				panic(rangeError(rt, "Invalid string length"))
			}
		}
		return b.call(orig, call.This, args...)
	})
	b.define(aproto, "flat", 0, func(call goja.FunctionCall) goja.Value {
		depth := 1.0
		if d := call.Argument(0); !goja.IsUndefined(d) {
			if depth = d.ToFloat(); depth != depth {
				depth = 0
			}
		}
		return b.flat(call.This, depth, nil, goja.Undefined())
	})
	b.define(aproto, "flatMap", 1, func(call goja.FunctionCall) goja.Value {
		f, ok := goja.AssertFunction(call.Argument(0))
		if !ok {
			panic(rt.NewTypeError("flatMap mapper function is not callable"))
		}
		return b.flat(call.This, 1, f, call.Argument(1))
	})
	b.boundReplace()
	b.boundRegExps()
}

// maxElements is the longest array a built-in may go through in one step
// under l: about a million at the default memory limit.
func maxElements(l Limits) int64 { return l.Memory / 64 }

// wrap replaces o[name] by f, which is given the original.
func (b *bounds) wrap(o *goja.Object, name string, f func(orig goja.Callable, call goja.FunctionCall) goja.Value) {
	orig, ok := goja.AssertFunction(o.Get(name))
	if !ok {
		return
	}
	n := o.Get(name).ToObject(b.rt).Get("length").ToInteger()
	b.define(o, name, int(n), func(call goja.FunctionCall) goja.Value { return f(orig, call) })
}

// define makes f o's method name, taking n arguments, as built-ins are:
// writable, configurable, not enumerable.
func (b *bounds) define(o *goja.Object, name string, n int, f func(goja.FunctionCall) goja.Value) {
	fn := b.rt.ToValue(f).ToObject(b.rt)
	_ = fn.DefineDataProperty("name", b.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = fn.DefineDataProperty("length", b.rt.ToValue(n), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = o.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// str is v as a string, as the language makes one of it: goja's ToString
// gives numbers and booleans back as they are.
func (b *bounds) str(v goja.Value) goja.String {
	if s, ok := v.ToString().(goja.String); ok {
		return s
	}
	return b.rt.ToValue(v.String()).(goja.String)
}

// call calls f, rethrowing what it throws.
func (b *bounds) call(f goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := f(this, args...)
	if err != nil {
		panic(err)
	}
	return v
}

// length is v's length, as the built-in named what reads it: v's length
// must be a number or another primitive held as a plain value, for a
// getter, or an object's valueOf, could give the built-in another number
// than the one checked here.
func (b *bounds) length(v goja.Value, what string) int64 {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return 0 // the built-in throws its own TypeError
	}
	o := v.ToObject(b.rt)
	if o.ClassName() != "Array" && b.accessor(o, "length") {
		panic(b.rt.NewTypeError("%s: jethook does not run it on an object whose length is a getter", what))
	}
	l := o.Get("length")
	if l == nil {
		return 0
	}
	if _, ok := l.(*goja.Object); ok {
		panic(b.rt.NewTypeError("%s: jethook does not run it on an object whose length is an object", what))
	}
	f := l.ToFloat()
	switch {
	case f != f || f <= 0:
		return 0
	case f > math.MaxInt64/2:
		return math.MaxInt64 / 2
	}
	return int64(f)
}

// accessor reports whether o has key, its own or inherited, as a getter or
// setter.
func (b *bounds) accessor(o *goja.Object, key string) bool {
	for p := o; p != nil; p = p.Prototype() {
		d := b.call(b.gopd, goja.Undefined(), p, b.rt.ToValue(key))
		if !goja.IsUndefined(d) {
			return d.ToObject(b.rt).Get("value") == nil
		}
	}
	return false
}

// argList reads an array-like into a new array of at most maxArgs
// elements, for a built-in that turns it into arguments: each element is
// read once, here.
func (b *bounds) argList(v goja.Value) goja.Value {
	o, ok := v.(*goja.Object)
	if !ok {
		return v // undefined and null are no arguments; the rest throws
	}
	n := b.length(o, "apply")
	if n > maxArgs {
		panic(rangeError(b.rt, "Maximum call stack size exceeded"))
	}
	items := make([]any, n)
	for i := range items {
		e := o.Get(strconv.Itoa(i))
		if e == nil {
			e = goja.Undefined()
		}
		items[i] = e
	}
	return b.rt.NewArray(items...)
}

// join is Array.prototype.join with elements turned into strings by str,
// refusing a result longer than maxChars.
func (b *bounds) join(this goja.Value, sep goja.String, what string, str func(goja.Value) goja.Value) goja.Value {
	o := this.ToObject(b.rt)
	for _, a := range b.joining {
		if a == o {
			return b.rt.ToValue("")
		}
	}
	n := b.length(o, what)
	if n > b.maxLen {
		panic(rangeError(b.rt, "Invalid array length"))
	}
	if sep == nil {
		sep = b.rt.ToValue(",").(goja.String)
	}
	b.joining = append(b.joining, o)
	defer func() { b.joining = b.joining[:len(b.joining)-1] }()
	var sb goja.StringBuilder
	size := 0
	add := func(s goja.String) {
		if size += s.Length(); size > b.maxChars {
			panic(rangeError(b.rt, "Invalid string length"))
		}
		sb.WriteString(s)
	}
	for i := int64(0); i < n; i++ {
		if i > 0 {
			add(sep)
		}
		if e := o.Get(strconv.FormatInt(i, 10)); e != nil && !goja.IsUndefined(e) && !goja.IsNull(e) {
			add(b.str(str(e)))
		}
	}
	return sb.String()
}

// raw is String.raw(template, ...subs) for template.raw, refusing a
// result longer than maxChars.
func (b *bounds) raw(raw *goja.Object, subs []goja.Value) goja.Value {
	n := b.length(raw, "String.raw")
	if n > b.maxLen {
		panic(rangeError(b.rt, "Invalid array length"))
	}
	var sb goja.StringBuilder
	size := 0
	add := func(v goja.Value) {
		if v == nil {
			v = goja.Undefined()
		}
		s := b.str(v)
		if size += s.Length(); size > b.maxChars {
			panic(rangeError(b.rt, "Invalid string length"))
		}
		sb.WriteString(s)
	}
	for i := int64(0); i < n; i++ {
		add(raw.Get(strconv.FormatInt(i, 10)))
		if i+1 < n && i < int64(len(subs)) {
			add(subs[i])
		}
	}
	return sb.String()
}

// flat is Array.prototype.flat, and flatMap when mapper is not nil: it
// goes through at most maxLen elements, at all depths together, and nests
// no deeper than MaxCallDepth.
func (b *bounds) flat(this goja.Value, depth float64, mapper goja.Callable, thisArg goja.Value) goja.Value {
	o := this.ToObject(b.rt)
	var out []any
	budget := b.maxLen
	var into func(src *goja.Object, depth float64, level int)
	into = func(src *goja.Object, depth float64, level int) {
		if level > MaxCallDepth {
			panic(rangeError(b.rt, "Maximum call stack size exceeded"))
		}
		n := b.length(src, "flat")
		if budget -= n; budget < 0 {
			panic(rangeError(b.rt, "Invalid array length"))
		}
		for i := int64(0); i < n; i++ {
			k := strconv.FormatInt(i, 10)
			e := src.Get(k)
			if e == nil {
				continue // a hole
			}
			if mapper != nil && level == 0 {
				e = b.call(mapper, thisArg, e, b.rt.ToValue(i), src)
			}
			if eo, ok := e.(*goja.Object); ok && depth >= 1 && eo.ClassName() == "Array" {
				into(eo, depth-1, level+1)
				continue
			}
			out = append(out, e)
		}
	}
	into(o, depth, 0)
	return b.rt.NewArray(out...)
}
