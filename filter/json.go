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
		return &jsonList{r: r}
	}
	return &jsonObject{r: r}
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

// decoded is r decoded in full, for what the lazy values leave to CEL's own
// maps and lists.
func decoded(r gjson.Result) ref.Val { return types.DefaultTypeAdapter.NativeToValue(r.Value()) }

// jsonObject is a JSON object; it implements traits.Mapper. It lives for
// one evaluation.
type jsonObject struct {
	r     gjson.Result
	found map[types.String]ref.Val // values read so far, so a path read twice is scanned once
}

// Find returns the value of key; the first, if the object repeats it.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	if v, ok := o.found[k]; ok {
		return v, true
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
	if o.found == nil {
		o.found = make(map[types.String]ref.Val, 2)
	}
	o.found[k] = jsonValue(v)
	return o.found[k], true
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

func (o *jsonObject) Size() ref.Val {
	n := 0
	o.r.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	return types.Int(n)
}

func (o *jsonObject) Iterator() traits.Iterator { return decoded(o.r).(traits.Mapper).Iterator() }

func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) {
	return decoded(o.r).ConvertToNative(t)
}
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val { return decoded(o.r).ConvertToType(t) }
func (o *jsonObject) Equal(other ref.Val) ref.Val      { return decoded(o.r).Equal(other) }
func (o *jsonObject) Type() ref.Type                   { return types.MapType }
func (o *jsonObject) Value() any                       { return o.r.Value() }

// jsonList is a JSON array; it implements traits.Lister.
type jsonList struct {
	r     gjson.Result
	items []gjson.Result // nil until read
}

func (l *jsonList) elems() []gjson.Result {
	if l.items == nil {
		l.items = l.r.Array()
		if l.items == nil {
			l.items = []gjson.Result{}
		}
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
	items := l.elems()
	if i < 0 || int64(i) >= int64(len(items)) {
		return types.NewErr("index out of bounds: %d", i)
	}
	return jsonValue(items[i])
}

func (l *jsonList) Contains(v ref.Val) ref.Val {
	for _, it := range l.elems() {
		if jsonValue(it).Equal(v) == types.True {
			return types.True
		}
	}
	return types.False
}

func (l *jsonList) Size() ref.Val { return types.Int(len(l.elems())) }

func (l *jsonList) Iterator() traits.Iterator { return &jsonIterator{items: l.elems()} }

func (l *jsonList) Add(other ref.Val) ref.Val { return decoded(l.r).(traits.Adder).Add(other) }

func (l *jsonList) ConvertToNative(t reflect.Type) (any, error) {
	return decoded(l.r).ConvertToNative(t)
}
func (l *jsonList) ConvertToType(t ref.Type) ref.Val { return decoded(l.r).ConvertToType(t) }
func (l *jsonList) Equal(other ref.Val) ref.Val      { return decoded(l.r).Equal(other) }
func (l *jsonList) Type() ref.Type                   { return types.ListType }
func (l *jsonList) Value() any                       { return l.r.Value() }

var errIterator = errors.New("an iterator has no native value")

// jsonIterator walks the elements of a jsonList.
type jsonIterator struct {
	items []gjson.Result
	next  int
}

func (it *jsonIterator) HasNext() ref.Val { return types.Bool(it.next < len(it.items)) }

func (it *jsonIterator) Next() ref.Val {
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
