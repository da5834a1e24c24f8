package transform

import (
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// encodeJSON writes v as JSON.stringify would, in buf's room (from its
// start; nil makes room), into at most max bytes and MaxDepth levels of
// arrays and objects: past either it stops with an *Error, having built
// no more than that. toJSON methods (Date's) are called; functions and
// symbols are left out of objects and are null in arrays; NaN and the
// infinities are null.
func encodeJSON(rt *goja.Runtime, buf []byte, v goja.Value, max int64) ([]byte, error) {
	e := &encoder{rt: rt, buf: buf[:0], max: max, what: "the body returned", raw: true}
	if _, err := e.value(v, 0, ""); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// stringifyJSON writes v as JSON.stringify does, what encodeJSON writes
// but with what comes from the body written anew, not as it came; skip
// is true when v has no JSON form (undefined, a function, a symbol), for
// which JSON.stringify returns undefined.
func stringifyJSON(rt *goja.Runtime, v goja.Value, max int64) (b []byte, skip bool, err error) {
	e := &encoder{rt: rt, max: max, what: "the value"}
	if skip, err = e.value(v, 0, ""); err != nil {
		return nil, false, err
	}
	return e.buf, skip, nil
}

type encoder struct {
	rt   *goja.Runtime
	buf  []byte
	max  int64
	what string // names the value in errors
	raw  bool   // what the script did not change of the body goes out as it came
}

func (e *encoder) tooDeep() error {
	return invalid("%s nests deeper than %d levels (or refers to itself)", e.what, MaxDepth)
}

func (e *encoder) full() error {
	if int64(len(e.buf)) > e.max {
		return tooBig(e.max)
	}
	return nil
}

// value writes v; skip is true when v has no JSON form (undefined, a
// function, a symbol) and nothing was written.
func (e *encoder) value(v goja.Value, depth int, key string) (skip bool, err error) {
	if v == nil || goja.IsUndefined(v) {
		return true, nil
	}
	if goja.IsNull(v) {
		e.buf = append(e.buf, "null"...)
		return false, e.full()
	}
	o, isObj := v.(*goja.Object)
	if !isObj {
		return e.primitive(v)
	}
	if lo, la := lazyOf(o); lo != nil && e.raw {
		return false, e.lazyObject(lo, depth)
	} else if la != nil && e.raw {
		return false, e.lazyArray(la, depth)
	}
	if fn, ok := goja.AssertFunction(o.Get("toJSON")); ok {
		r, err := fn(o, e.rt.ToValue(strings.Clone(key))) // key may be in the request's body
		if err != nil {
			return false, err
		}
		if ro, ok := r.(*goja.Object); ok && ro == o {
			return false, invalid("toJSON returned its own object")
		}
		return e.value(r, depth, key)
	}
	switch o.ClassName() {
	case "Function":
		return true, nil
	case "Number", "String", "Boolean":
		return e.primitive(e.rt.ToValue(o.Export()))
	}
	if depth >= MaxDepth {
		return false, e.tooDeep()
	}
	if o.ClassName() == "Array" {
		n := o.Get("length").ToInteger()
		e.buf = append(e.buf, '[')
		for i := int64(0); i < n; i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			k := strconv.FormatInt(i, 10)
			skip, err := e.value(o.Get(k), depth+1, k)
			if err != nil {
				return false, err
			}
			if skip {
				e.buf = append(e.buf, "null"...)
			}
			if err := e.full(); err != nil {
				return false, err
			}
		}
		e.buf = append(e.buf, ']')
		return false, e.full()
	}
	e.buf = append(e.buf, '{')
	first := true
	for _, k := range o.Keys() {
		mark := len(e.buf)
		if !first {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		skip, err := e.value(o.Get(k), depth+1, k)
		if err != nil {
			return false, err
		}
		if skip {
			e.buf = e.buf[:mark]
			continue
		}
		first = false
		if err := e.full(); err != nil {
			return false, err
		}
	}
	e.buf = append(e.buf, '}')
	return false, e.full()
}

// Go types of the primitives goja's ExportType gives, to read a string
// or a number without boxing it in an interface, as Export does.
var (
	stringType  = reflect.TypeFor[string]()
	int64Type   = reflect.TypeFor[int64]()
	float64Type = reflect.TypeFor[float64]()
)

func (e *encoder) primitive(v goja.Value) (skip bool, err error) {
	switch v.ExportType() {
	case stringType:
		e.buf = appendString(e.buf, v.String())
		return false, e.full()
	case int64Type:
		e.buf = strconv.AppendInt(e.buf, v.ToInteger(), 10)
		return false, e.full()
	case float64Type:
		if x := v.ToFloat(); math.IsNaN(x) || math.IsInf(x, 0) {
			e.buf = append(e.buf, "null"...)
		} else {
			e.buf = append(e.buf, v.String()...) // JavaScript's own number format
		}
		return false, e.full()
	}
	switch x := v.Export().(type) {
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case int64:
		e.buf = strconv.AppendInt(e.buf, x, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			e.buf = append(e.buf, "null"...)
		} else {
			e.buf = append(e.buf, v.String()...) // JavaScript's own number format
		}
	case string:
		e.buf = appendString(e.buf, x)
	case *big.Int:
		return false, invalid("a BigInt has no JSON form")
	default:
		if _, ok := v.(*goja.Symbol); ok {
			return true, nil
		}
		return false, invalid("a %T has no JSON form", x)
	}
	return false, e.full()
}

// appendString appends s as a JSON string; bytes that are not UTF-8 become
// U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		// A run of bytes that need no escape goes in at once, found eight
		// at a time while it lasts.
		j := i
		for j+8 <= len(s) && plain8(s[j:j+8]) {
			j += 8
		}
		for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// plain8 reports whether none of the eight bytes of s needs an escape in
// a JSON string: each is ASCII, from 0x20 on, and neither '"' nor '\\'.
// It tests all eight at once as one word (a byte below n shows as a
// borrow into its top bit of w − n·ones that w's own top bit does not
// explain; a byte equal to c is a zero byte of w ^ c·ones).
func plain8(s string) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	w := word(s)
	quote, backslash := w^('"'*ones), w^('\\'*ones)
	bad := w | (w-0x20*ones)&^w | (quote-ones)&^quote | (backslash-ones)&^backslash
	return bad&tops == 0
}

// lazyObject writes an object read from the body: as it came when the
// script changed nothing in it, else key by key, the values the script
// did not read as they came.
func (e *encoder) lazyObject(o *lazyObject, depth int) error {
	if o.untouched() {
		e.buf = append(e.buf, o.d.raw(o.v)...)
		return e.full()
	}
	if depth >= MaxDepth {
		return e.tooDeep()
	}
	o.edit()
	e.buf = append(e.buf, '{')
	first := true
	for _, f := range o.fields {
		mark := len(e.buf)
		if !first {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, f.key)
		e.buf = append(e.buf, ':')
		if f.val != nil {
			skip, err := e.value(f.val, depth+1, f.key)
			if err != nil {
				return err
			}
			if skip {
				e.buf = e.buf[:mark]
				continue
			}
		} else {
			e.buf = append(e.buf, o.d.raw(f.raw)...)
		}
		first = false
		if err := e.full(); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return e.full()
}

// lazyArray writes an array read from the body, as lazyObject does.
func (e *encoder) lazyArray(a *lazyArray, depth int) error {
	if a.untouched() {
		e.buf = append(e.buf, a.d.raw(a.v)...)
		return e.full()
	}
	if depth >= MaxDepth {
		return e.tooDeep()
	}
	e.buf = append(e.buf, '[')
	for i, v := range a.vals {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		switch {
		case v != nil:
			skip, err := e.value(v, depth+1, strconv.Itoa(i))
			if err != nil {
				return err
			}
			if skip {
				e.buf = append(e.buf, "null"...)
			}
		case i < len(a.raws):
			e.buf = append(e.buf, a.d.raw(a.raws[i])...)
		default:
			e.buf = append(e.buf, "null"...)
		}
		if err := e.full(); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return e.full()
}
