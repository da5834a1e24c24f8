package transform

import (
	"errors"

	"github.com/dop251/goja"
)

// harden takes out of rt what could allocate a large block, or work for
// long, in one step, which no interrupt can stop: typed arrays and their
// buffers are gone; String.prototype.repeat, padStart and padEnd refuse a
// result larger than the run's memory limit with a RangeError, as V8 does
// past its longest string, and split a result longer than maxElements;
// Array.from and the methods that go through an array or array-like
// refuse one longer than maxElements (arraylike.go); iterators of arrays
// and strings are JavaScript (iterators.go); and JSON.stringify is
// jethook's own encoder, bounded in depth and size. Everything that grows
// step by step is bounded by the watchdog.
func harden(rt *goja.Runtime, l Limits, stop func(*Error)) {
	for _, name := range []string{"ArrayBuffer", "SharedArrayBuffer", "DataView", "Int8Array", "Uint8Array",
		"Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float32Array",
		"Float64Array", "BigInt64Array", "BigUint64Array"} {
		_ = rt.GlobalObject().Delete(name)
	}
	maxChars := l.Memory / 2 // JavaScript strings are UTF-16
	refuse := func() { panic(rangeError(rt, "Invalid string length")) }
	proto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	wrap := func(name string, size func(this goja.Value, args []goja.Value) int64) {
		orig, ok := goja.AssertFunction(proto.Get(name))
		if !ok {
			return
		}
		_ = proto.DefineDataProperty(name, rt.ToValue(func(call goja.FunctionCall) goja.Value {
			if size(call.This, call.Arguments) > maxChars {
				refuse()
			}
			v, err := orig(call.This, call.Arguments...)
			if err != nil {
				panic(err)
			}
			return v
		}), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	length := func(this goja.Value) int64 {
		if this == nil || goja.IsUndefined(this) || goja.IsNull(this) {
			return 0
		}
		return int64(len(this.String()))
	}
	arg := func(args []goja.Value) int64 {
		if len(args) == 0 {
			return 0
		}
		f := args[0].ToFloat()
		if f != f || f < 0 {
			return 0
		}
		if f > 1e18 {
			return 1 << 62
		}
		return int64(f)
	}
	wrap("repeat", func(this goja.Value, args []goja.Value) int64 {
		n, c := length(this), arg(args)
		if n > 0 && c > (1<<62)/n {
			return 1 << 62
		}
		return n * c
	})
	pad := func(this goja.Value, args []goja.Value) int64 { return arg(args) }
	wrap("padStart", pad)
	wrap("padEnd", pad)
	boundSplit(rt, proto, maxElements(l))
	boundArrayFrom(rt, l)
	boundArrayLikes(rt, l, stop)
	scriptIterators(rt)
	boundStringify(rt, l.Memory/4, maxElements(l)) // growing its buffer allocates about twice that
}

// boundArrayFrom makes Array.from refuse, with a RangeError, an array-like
// (an object with a length and no iterator) longer than maxElements: goja
// makes such an array in one step.
func boundArrayFrom(rt *goja.Runtime, l Limits) {
	array := rt.Get("Array").ToObject(rt)
	from, ok := goja.AssertFunction(array.Get("from"))
	if !ok {
		return
	}
	maxLen := maxElements(l)
	_ = array.DefineDataProperty("from", rt.ToValue(func(call goja.FunctionCall) goja.Value {
		if o, ok := call.Argument(0).(*goja.Object); ok {
			if it := o.GetSymbol(goja.SymIterator); it == nil || goja.IsUndefined(it) {
				if n := o.Get("length"); n != nil && n.ToFloat() > float64(maxLen) {
					panic(rangeError(rt, "Invalid array length"))
				}
			}
		}
		v, err := from(call.This, call.Arguments...)
		if err != nil {
			panic(err)
		}
		return v
	}), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// boundSplit makes String.prototype.split refuse, with a RangeError, to
// make more than maxLen strings: goja splits in one step, and splitting a
// string of a million characters makes a million strings.
func boundSplit(rt *goja.Runtime, proto *goja.Object, maxLen int64) {
	split, ok := goja.AssertFunction(proto.Get("split"))
	if !ok {
		return
	}
	_ = proto.DefineDataProperty("split", rt.ToValue(func(call goja.FunctionCall) goja.Value {
		limit := float64(maxLen + 1)
		if l := call.Argument(1); !goja.IsUndefined(l) {
			limit = min(limit, float64(uint32(l.ToInteger())))
		}
		v, err := split(call.This, call.Argument(0), rt.ToValue(limit))
		if err != nil {
			panic(err)
		}
		if v.ToObject(rt).Get("length").ToInteger() > maxLen {
			panic(rangeError(rt, "Invalid array length"))
		}
		return v
	}), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// boundStringify makes JSON.stringify jethook's encoder (stringifyJSON), which
// stops past MaxDepth levels or max bytes with a RangeError; goja's
// own recurses without bound and cannot be interrupted. With a replacer or
// an indent, the value is checked by the encoder first, then goja's
// stringify writes it; a replacer array longer than maxLen is refused, as
// goja makes a list of its length first.
func boundStringify(rt *goja.Runtime, max, maxLen int64) {
	json := rt.Get("JSON").ToObject(rt)
	stringify, ok := goja.AssertFunction(json.Get("stringify"))
	if !ok {
		return
	}
	_ = json.DefineDataProperty("stringify", rt.ToValue(func(call goja.FunctionCall) goja.Value {
		if r, ok := call.Argument(1).(*goja.Object); ok && r.ClassName() == "Array" && r.Get("length").ToFloat() > float64(maxLen) {
			panic(rangeError(rt, "Invalid array length"))
		}
		b, skip, err := stringifyJSON(rt, call.Argument(0), max)
		if err != nil {
			var e *Error
			switch {
			case errors.As(err, &e) && e.Kind == KindTooBig:
				panic(rangeError(rt, "Invalid string length"))
			case errors.As(err, &e):
				panic(rangeError(rt, "JSON.stringify: "+e.Msg))
			}
			panic(err)
		}
		if !goja.IsUndefined(call.Argument(1)) || !goja.IsUndefined(call.Argument(2)) {
			v, err := stringify(call.This, call.Arguments...)
			if err != nil {
				panic(err)
			}
			return v
		}
		if skip {
			return goja.Undefined()
		}
		return rt.ToValue(string(b))
	}), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// rangeError is a JavaScript RangeError with msg, to panic with.
func rangeError(rt *goja.Runtime, msg string) *goja.Object {
	o, err := rt.New(rt.Get("RangeError"), rt.ToValue(msg))
	if err != nil {
		panic(err)
	}
	return o
}
