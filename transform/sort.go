package transform

import "github.com/dop251/goja"

// sortJS makes the comparators sort and toSorted are given: goja sorts in
// Go, in one step, and compares without a comparator in Go too: sorting a
// million strings that differ only at their ends runs for hours. With a
// comparator written in JavaScript each comparison is a step of the
// script, under its time limit. compare is the language's default order
// (by the strings' UTF-16 code units); comparing wraps a script's
// comparator, which could be a built-in written in Go.
const sortJS = "(function () {\n" +
	"\t'use strict';\n" +
	"\treturn {\n" +
	"\t\tcompare: function (a, b) {\n" +
	"\t\t\tconst x = typeof a === 'string' ? a : `${a}`, y = typeof b === 'string' ? b : `${b}`;\n" +
	"\t\t\treturn x < y ? -1 : x > y ? 1 : 0;\n" +
	"\t\t},\n" +
	"\t\tcomparing: function (f) { return function (a, b) { return f(a, b); }; },\n" +
	"\t};\n" +
	"})()"

var sortPrg = goja.MustCompile("sort.js", sortJS, true)

// sorting holds sortJS's functions for one runtime.
type sorting struct {
	compare   goja.Value
	comparing goja.Callable
}

func newSorting(rt *goja.Runtime) sorting {
	v, err := rt.RunProgram(sortPrg)
	if err != nil {
		panic(err)
	}
	o := v.ToObject(rt)
	comparing, _ := goja.AssertFunction(o.Get("comparing"))
	return sorting{compare: o.Get("compare"), comparing: comparing}
}

// comparator is what sort is given in place of its argument f: compare
// for none, f wrapped for a function, f itself otherwise (sort throws
// its TypeError).
func (b *bounds) comparator(f goja.Value) goja.Value {
	if goja.IsUndefined(f) {
		return b.sorting.compare
	}
	if _, ok := goja.AssertFunction(f); !ok {
		return f
	}
	return b.call(b.sorting.comparing, goja.Undefined(), f)
}
