package transform

import "github.com/dop251/goja"

// iteratorsJS makes the iterators of arrays (values, keys, entries) and of
// strings in JavaScript. Spreading ([...a], f(...a)), Array.from, new Set
// and destructuring drive an iterator from a loop in Go: with goja's own
// iterators, written in Go too, spreading Array(1e9) is one step no
// interrupt reaches, allocating hundreds of bytes an element; with these,
// each next() is a step of the script, under its time and memory limits.
// It names nothing a script could have replaced: it runs before the script.
const iteratorsJS = `(function () {
	'use strict';
	const toObject = Object, TypeErr = TypeError, iterator = Symbol.iterator;
	function arrayIterator(a, kind) {
		let i = 0;
		return {
			next() {
				if (a === undefined || !(i < a.length)) {
					a = undefined;
					return {value: undefined, done: true};
				}
				const k = i++;
				return {value: kind === 0 ? a[k] : kind === 1 ? k : [k, a[k]], done: false};
			},
			[iterator]() { return this; },
		};
	}
	function receiver(self, name) {
		if (self === undefined || self === null) {
			throw new TypeErr(name + ' called on null or undefined');
		}
		return toObject(self);
	}
	return {
		values: function values() { return arrayIterator(receiver(this, 'Array.prototype.values'), 0); },
		keys: function keys() { return arrayIterator(receiver(this, 'Array.prototype.keys'), 1); },
		entries: function entries() { return arrayIterator(receiver(this, 'Array.prototype.entries'), 2); },
		string: {[iterator]() {
			const s = '' + receiver(this, 'String.prototype[Symbol.iterator]');
			let i = 0;
			return {
				next() {
					if (i >= s.length) {
						return {value: undefined, done: true};
					}
					const c = s[i++];
					if (c >= '\uD800' && c <= '\uDBFF' && i < s.length && s[i] >= '\uDC00' && s[i] <= '\uDFFF') {
						return {value: c + s[i++], done: false};
					}
					return {value: c, done: false};
				},
				[iterator]() { return this; },
			};
		}}[iterator],
	};
})()`

var iteratorsPrg = goja.MustCompile("iterators.js", iteratorsJS, true)

// scriptIterators puts iteratorsJS's iterators in place of goja's.
func scriptIterators(rt *goja.Runtime) {
	v, err := rt.RunProgram(iteratorsPrg)
	if err != nil {
		panic(err)
	}
	its := v.ToObject(rt)
	aproto := rt.Get("Array").ToObject(rt).Get("prototype").ToObject(rt)
	for _, name := range []string{"values", "keys", "entries"} {
		_ = aproto.DefineDataProperty(name, its.Get(name), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	_ = aproto.DefineDataPropertySymbol(goja.SymIterator, its.Get("values"), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	sproto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	_ = sproto.DefineDataPropertySymbol(goja.SymIterator, its.Get("string"), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}
