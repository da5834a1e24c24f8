package filter

import (
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/tidwall/gjson"
)

// A JSON body reaches the expression as lazy values over the raw text:
// reading body.type scans the body for that one key and skips the rest,
// instead of decoding every value of a payload the filter never reads
// (decoding all of a 5 KB Stripe event took about 70 µs, more than posting
// it to a backend on loopback). Objects and lists are scanned again on
// each access, which costs microseconds; what CEL needs of a whole value
// (equality, conversion) decodes that value alone.

// jsonValue is r as a CEL value: null, bool, double, string, or a lazy
// object or list.
func jsonValue(r gjson.Result) ref.Val {
	switch r.Type {
	case gjson.Null:
		return types.NullValue
	case gjson.False:
		return types.False
	case gjson.True:
		return types.True
	case gjson.Number:
		return types.Double(r.Num)
	case gjson.String:
		return types.String(validUTF8(r.Str))
	}
	if r.IsArray() {
		return &jsonList{r: r, size: -1}
	}
	return &jsonObject{r: r, size: -1}
}

// validUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json decodes it.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// Bounds on what one evaluation builds from a body, so that its memory
// grows with what the expression reads and never with the body's size
// (see docs/filters.md, "Limits"). Going past one is a run-time error of
// kind "too large", which counts as no match.
const (
	// MaxElems is how many elements of one list a filter may index: the
	// first MaxElems of a longer list can be indexed, the rest cannot.
	// Macros (all, exists, map, filter), `in` and size() read any list
	// without building it; the cost limit bounds how far they go.
	MaxElems = 10_000
	// MaxDecoded is the most JSON text one object or list may span when
	// CEL needs it as a whole value (comparing it with ==, converting it,
	// adding lists).
	MaxDecoded = 256 << 10
)

// errTooLarge is the message of every error a bound above causes; it
// names the kind (see kindOf).
var errTooLarge = errors.New("too large: a list or object past the filter's bounds")

// decoded is r decoded in full, for what the lazy values leave to CEL's own
// maps and lists, or an error when r spans more than MaxDecoded bytes.
func decoded(r gjson.Result) ref.Val {
	if len(r.Raw) > MaxDecoded {
		return types.WrapErr(errTooLarge)
	}
	return types.DefaultTypeAdapter.NativeToValue(r.Value())
}

// decodedNative is decoded(r) as a Go value of type t.
func decodedNative(r gjson.Result, t reflect.Type) (any, error) {
	if len(r.Raw) > MaxDecoded {
		return nil, errTooLarge
	}
	return decoded(r).ConvertToNative(t)
}

// decodedValue is decoded(r).Value(), or errTooLarge.
func decodedValue(r gjson.Result) any {
	if len(r.Raw) > MaxDecoded {
		return errTooLarge
	}
	return r.Value()
}

// count is how many elements or keys r has, counted without building them.
func count(r gjson.Result) int {
	n := 0
	r.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	return n
}

// sizeDiffers reports whether other is a list or map whose size is not
// n: such values are unequal without decoding anything.
func sizeDiffers(other ref.Val, n int) bool {
	s, ok := other.(traits.Sizer)
	if !ok {
		return false
	}
	size, ok := s.Size().(types.Int)
	return ok && int(size) != n
}

// jsonObject is a JSON object; it implements traits.Mapper. It lives for
// one evaluation.
type jsonObject struct {
	r     gjson.Result
	found []foundKey // values read so far, so a path read twice is scanned once
	size  int        // -1 until counted
}

// maxFound is how many keys of one jsonObject are kept once read. An
// expression reads a few keys of an object: a short slice finds them
// sooner than a map, and costs one allocation less. Past maxFound keys (a
// macro over the object's keys), a key is scanned for each time it is
// read.
const maxFound = 8

// foundKey is a key of a jsonObject read, and its value.
type foundKey struct {
	k types.String
	v ref.Val
}

// Find returns the value of key; the first, if the object repeats it.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	for _, f := range o.found {
		if f.k == k {
			return f.v, true
		}
	}
	var v gjson.Result
	found := false
	o.r.ForEach(func(name, value gjson.Result) bool {
		if name.Str == string(k) {
			v, found = value, true
			return false
		}
		return true
	})
	if !found {
		return nil, false
	}
	val := jsonValue(v)
	if len(o.found) < maxFound {
		o.found = append(o.found, foundKey{k, val})
	}
	return val, true
}

func (o *jsonObject) Get(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found {
		return types.NewErr("no such key: %v", key)
	}
	return v
}

func (o *jsonObject) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if types.IsError(v) {
		return v
	}
	return types.Bool(found)
}

func (o *jsonObject) count() int {
	if o.size < 0 {
		o.size = count(o.r)
	}
	return o.size
}

func (o *jsonObject) Size() ref.Val { return types.Int(o.count()) }

// Fold walks the whole object without building it, for CEL's macros; the
// cost limit charges every step.
func (o *jsonObject) Fold(f traits.Folder) {
	kf, ok := f.(interface{ FoldKeyOnly() bool })
	keyOnly := ok && kf.FoldKeyOnly()
	o.r.ForEach(func(k, v gjson.Result) bool {
		if keyOnly {
			return f.FoldEntry(jsonValue(k), nil)
		}
		return f.FoldEntry(jsonValue(k), jsonValue(v))
	})
}

// Iterator walks the object's keys for what does not fold it, if it has
// at most MaxElems.
func (o *jsonObject) Iterator() traits.Iterator {
	if o.count() > MaxElems {
		return &jsonIterator{err: types.WrapErr(errTooLarge)}
	}
	keys := make([]gjson.Result, 0, o.count())
	o.r.ForEach(func(k, _ gjson.Result) bool {
		keys = append(keys, k)
		return true
	})
	return &jsonIterator{items: keys}
}

func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) { return decodedNative(o.r, t) }
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val            { return decoded(o.r).ConvertToType(t) }

func (o *jsonObject) Equal(other ref.Val) ref.Val {
	if _, ok := other.(traits.Mapper); !ok || sizeDiffers(other, o.count()) {
		return types.False
	}
	return decoded(o.r).Equal(other)
}

func (o *jsonObject) Type() ref.Type { return types.MapType }
func (o *jsonObject) Value() any     { return decodedValue(o.r) }

// jsonList is a JSON array; it implements traits.Lister. Only its first
// MaxElems elements are ever built.
type jsonList struct {
	r     gjson.Result
	size  int            // -1 until counted
	items []gjson.Result // the first MaxElems elements; nil until read
}

func (l *jsonList) count() int {
	if l.size < 0 {
		l.size = count(l.r)
	}
	return l.size
}

// elems is the list's first MaxElems elements.
func (l *jsonList) elems() []gjson.Result {
	if l.items == nil {
		l.items = make([]gjson.Result, 0, min(l.count(), MaxElems))
		l.r.ForEach(func(_, v gjson.Result) bool {
			l.items = append(l.items, v)
			return len(l.items) < MaxElems
		})
	}
	return l.items
}

func (l *jsonList) Get(index ref.Val) ref.Val {
	i, ok := index.(types.Int)
	if !ok {
		if d, isDouble := index.(types.Double); isDouble && float64(d) == float64(int64(d)) {
			i, ok = types.Int(d), true
		}
	}
	if !ok {
		return types.MaybeNoSuchOverloadErr(index)
	}
	if i < 0 || int64(i) >= int64(l.count()) {
		return types.NewErr("index out of bounds: %d", i)
	}
	if i >= MaxElems {
		return types.WrapErr(errTooLarge)
	}
	return jsonValue(l.elems()[i])
}

// Contains walks the whole list without building it: the cost limit
// charges `in` by the list's size.
func (l *jsonList) Contains(v ref.Val) ref.Val {
	found := types.False
	l.r.ForEach(func(_, it gjson.Result) bool {
		if jsonValue(it).Equal(v) == types.True {
			found = types.True
		}
		return found != types.True
	})
	return found
}

func (l *jsonList) Size() ref.Val { return types.Int(l.count()) }

// Fold walks the whole list without building it, for CEL's macros (all,
// exists, map, filter); the cost limit charges every step.
func (l *jsonList) Fold(f traits.Folder) {
	i := types.Int(0)
	l.r.ForEach(func(_, v gjson.Result) bool {
		ok := f.FoldEntry(i, jsonValue(v))
		i++
		return ok
	})
}

// Iterator walks the list for what does not fold it, if it has at most
// MaxElems elements.
func (l *jsonList) Iterator() traits.Iterator {
	if l.count() > MaxElems {
		return &jsonIterator{err: types.WrapErr(errTooLarge)}
	}
	return &jsonIterator{items: l.elems()}
}

func (l *jsonList) Add(other ref.Val) ref.Val {
	v := decoded(l.r)
	if a, ok := v.(traits.Adder); ok {
		return a.Add(other)
	}
	return v
}

func (l *jsonList) ConvertToNative(t reflect.Type) (any, error) { return decodedNative(l.r, t) }
func (l *jsonList) ConvertToType(t ref.Type) ref.Val            { return decoded(l.r).ConvertToType(t) }

func (l *jsonList) Equal(other ref.Val) ref.Val {
	if _, ok := other.(traits.Lister); !ok || sizeDiffers(other, l.count()) {
		return types.False
	}
	return decoded(l.r).Equal(other)
}

func (l *jsonList) Type() ref.Type { return types.ListType }
func (l *jsonList) Value() any     { return decodedValue(l.r) }

var errIterator = errors.New("an iterator has no native value")

// jsonIterator walks the elements of a jsonList or the keys of a
// jsonObject; one over a list or object past MaxElems yields err once.
type jsonIterator struct {
	items []gjson.Result
	next  int
	err   ref.Val
}

func (it *jsonIterator) HasNext() ref.Val {
	return types.Bool(it.err != nil || it.next < len(it.items))
}

func (it *jsonIterator) Next() ref.Val {
	if it.err != nil {
		err := it.err
		it.err = nil
		return err
	}
	if it.next >= len(it.items) {
		return nil
	}
	it.next++
	return jsonValue(it.items[it.next-1])
}
func (it *jsonIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, errIterator
}
func (it *jsonIterator) ConvertToType(ref.Type) ref.Val { return types.NewErr("iterator has no type") }
func (it *jsonIterator) Equal(ref.Val) ref.Val          { return types.NewErr("iterator has no equality") }
func (it *jsonIterator) Type() ref.Type                 { return types.IteratorType }
func (it *jsonIterator) Value() any                     { return nil }
