package transform

import (
	"github.com/dop251/goja"
)

// harden takes out of rt what could allocate a large block in one step,
// which no interrupt can stop: typed arrays and their buffers are gone, and
// String.prototype.repeat, padStart and padEnd refuse a result larger than
// the run's memory limit with a RangeError, as V8 does past its longest
// string. Everything that grows step by step is bounded by the watchdog.
func harden(rt *goja.Runtime, l Limits) {
	for _, name := range []string{"ArrayBuffer", "SharedArrayBuffer", "DataView", "Int8Array", "Uint8Array",
		"Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float32Array",
		"Float64Array", "BigInt64Array", "BigUint64Array"} {
		_ = rt.GlobalObject().Delete(name)
	}
	maxChars := l.Memory / 2 // JavaScript strings are UTF-16
	rangeError := rt.Get("RangeError")
	refuse := func() {
		o, err := rt.New(rangeError, rt.ToValue("Invalid string length"))
		if err != nil {
			panic(err)
		}
		panic(o)
	}
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
}
