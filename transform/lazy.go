package transform

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// A JSON body reaches the script as lazy objects and arrays: each reads
// its own level of the raw JSON (keys and the extent of each value, not
// the values) when the script looks into it, and makes a value into a
// JavaScript one when the script reads it. A script that reads two
// fields of a 5 KB body decodes two fields, not 5 KB; and what it leaves
// alone goes back out as the sender wrote it, numbers past 2^53 included.

// bodyString is s, which may be in d's text (the request's body), as a
// string to hand the script: a copy, so that a string a script keeps
// (in a global, a key of a global object) does not keep the whole body,
// unless it is half of the body or more, which then keeps at most twice
// its size, and the copy would cost most of what copying the body did.
// The body does not change (Request.Body).
func bodyString(d *doc, s string) string {
	if 2*len(s) >= len(d.s) {
		return s
	}
	return strings.Clone(s)
}

// jsValue is the value v of d as a JavaScript value: objects and arrays
// lazy.
func jsValue(rt *goja.Runtime, d *doc, v span) goja.Value {
	raw := d.raw(v)
	switch raw[0] {
	case '"':
		return rt.ToValue(bodyString(d, unescape(raw[1:len(raw)-1])))
	case '{':
		return rt.NewDynamicObject(&lazyObject{rt: rt, d: d, v: v})
	case '[':
		return rt.NewDynamicArray(&lazyArray{rt: rt, d: d, v: v})
	case 't':
		return rt.ToValue(true)
	case 'f':
		return rt.ToValue(false)
	case 'n':
		return goja.Null()
	}
	f, _ := strconv.ParseFloat(raw, 64) // past the float range: ±Inf, as JSON.parse reads it
	return rt.ToValue(f)
}

// lazyObject is a JSON object as a script sees it. members lists its
// keys and values as written, read in one pass over its level as far as
// the keys the script looked for: no further than the last of them, to
// the end when it lists them all. A value is made when the script reads
// it and kept in made, so that reading it again gives the same object.
// Once the script sets or deletes a key, fields holds the object instead
// (edit).
type lazyObject struct {
	rt      *goja.Runtime
	d       *doc
	v       span
	started bool
	at      cursor // where the next member is, once started
	done    bool   // every member is in members
	members []member
	escaped bool // a key in members is written with an escape
	made    []made
	edited  bool
	fields  []field
}

// member is a key of a lazyObject as written (between its quotes) and
// its value.
type member struct{ key, val span }

// made is the value made of members[i].
type made struct {
	i int
	v goja.Value
}

// field is one key of an edited lazyObject: its value as written, and its
// value once made or set (nil before).
type field struct {
	key string
	raw span
	val goja.Value
}

// read lists one more member in members; false when none is left.
func (o *lazyObject) read() bool {
	if o.done {
		return false
	}
	if !o.started {
		o.started, o.at = true, o.d.start(o.v)
		o.members = make([]member, 0, min(o.d.size(o.v), 32))
	}
	key, val, ok := o.d.member(o.v, &o.at)
	if !ok {
		o.done = true
		return false
	}
	o.members = append(o.members, member{key, val})
	if strings.IndexByte(o.d.raw(key), '\\') >= 0 {
		o.escaped = true
	}
	return true
}

// all lists every member in members.
func (o *lazyObject) all() {
	if o.read() {
		o.members = slices.Grow(o.members, max(o.d.size(o.v)-len(o.members), 0))
		for o.read() {
		}
	}
}

// key is members[i]'s key, in the body.
func (o *lazyObject) key(i int) string {
	k := o.d.raw(o.members[i].key)
	if o.escaped {
		k = unescape(k)
	}
	return k
}

// find is the index of key in members, or -1. A key written twice is
// read as its first value, as filters read it.
func (o *lazyObject) find(key string) int {
	for i := range o.members {
		if o.is(i, key) {
			return i
		}
	}
	for o.read() {
		if i := len(o.members) - 1; o.is(i, key) {
			return i
		}
	}
	return -1
}

// is reports whether members[i]'s key is key.
func (o *lazyObject) is(i int, key string) bool {
	if o.escaped {
		return o.key(i) == key
	}
	return o.d.raw(o.members[i].key) == key
}

// edit makes fields of members and made.
func (o *lazyObject) edit() {
	if o.edited {
		return
	}
	o.all()
	o.edited = true
	o.fields = make([]field, len(o.members), len(o.members)+1)
	for i, m := range o.members {
		o.fields[i] = field{key: o.key(i), raw: m.val} // in the body: Keys copies it
	}
	for _, m := range o.made {
		o.fields[m.i].val = m.v
	}
	o.members, o.made = nil, nil
}

// findField is the index of key in fields, or -1.
func (o *lazyObject) findField(key string) int {
	for i := range o.fields {
		if o.fields[i].key == key {
			return i
		}
	}
	return -1
}

func (o *lazyObject) Get(key string) goja.Value {
	if o.edited {
		i := o.findField(key)
		if i < 0 {
			return nil
		}
		f := &o.fields[i]
		if f.val == nil {
			f.val = jsValue(o.rt, o.d, f.raw)
		}
		return f.val
	}
	i := o.find(key)
	if i < 0 {
		return nil
	}
	for _, m := range o.made {
		if m.i == i {
			return m.v
		}
	}
	v := jsValue(o.rt, o.d, o.members[i].val)
	if o.made == nil {
		o.made = make([]made, 0, 4) // a script reads a few, not one at a time
	}
	o.made = append(o.made, made{i, v})
	return v
}

func (o *lazyObject) Set(key string, val goja.Value) bool {
	o.edit()
	if i := o.findField(key); i >= 0 {
		o.fields[i].val = val
	} else {
		o.fields = append(o.fields, field{key: key, val: val})
	}
	return true
}

func (o *lazyObject) Has(key string) bool {
	if o.edited {
		return o.findField(key) >= 0
	}
	return o.find(key) >= 0
}

func (o *lazyObject) Delete(key string) bool {
	o.edit()
	if i := o.findField(key); i >= 0 {
		o.fields = append(o.fields[:i:i], o.fields[i+1:]...)
	}
	return true
}

func (o *lazyObject) Keys() []string {
	if o.edited {
		keys := make([]string, len(o.fields))
		for i, f := range o.fields {
			keys[i] = strings.Clone(f.key)
		}
		return keys
	}
	o.all()
	keys := make([]string, len(o.members))
	for i := range o.members {
		keys[i] = strings.Clone(o.key(i))
	}
	return keys
}

// untouched reports whether the object encodes as its raw JSON: nothing
// set or deleted, and no object or array read from it that could have been
// changed.
func (o *lazyObject) untouched() bool {
	if o.edited {
		return false
	}
	for _, m := range o.made {
		if !untouched(m.v) {
			return false
		}
	}
	return true
}

// untouched reports whether v, read from a lazy body, still encodes as
// its raw JSON.
func untouched(v goja.Value) bool {
	obj, ok := v.(*goja.Object)
	if !ok {
		return true
	}
	if lo, la := lazyOf(obj); lo != nil {
		return lo.untouched()
	} else if la != nil {
		return la.untouched()
	}
	return false
}

var (
	lazyObjectType = reflect.TypeFor[*lazyObject]()
	lazyArrayType  = reflect.TypeFor[*lazyArray]()
)

// lazyOf is o's lazy object or array, if it is one. It never calls
// Export on another object, which would copy it whole.
func lazyOf(o *goja.Object) (*lazyObject, *lazyArray) {
	switch o.ExportType() {
	case lazyObjectType:
		return o.Export().(*lazyObject), nil
	case lazyArrayType:
		return nil, o.Export().(*lazyArray)
	}
	return nil, nil
}

// stringOf is v's text when v is a string primitive.
func stringOf(v goja.Value) (string, bool) {
	if v == nil {
		return "", false
	}
	if _, ok := v.(*goja.Object); ok {
		return "", false
	}
	s, ok := v.Export().(string)
	return s, ok
}

// lazyArray is a JSON array as a script sees it: raws holds the extents
// of its elements in the body once read, vals the values made or set
// since.
type lazyArray struct {
	rt      *goja.Runtime
	d       *doc
	v       span
	indexed bool
	raws    []span
	vals    []goja.Value
	changed bool
}

func (a *lazyArray) index() {
	if a.indexed {
		return
	}
	a.indexed = true
	a.raws = make([]span, 0, a.d.size(a.v))
	for c := a.d.start(a.v); ; {
		_, val, ok := a.d.member(a.v, &c)
		if !ok {
			break
		}
		a.raws = append(a.raws, val)
	}
	a.vals = make([]goja.Value, len(a.raws))
}

func (a *lazyArray) Len() int {
	a.index()
	return len(a.vals)
}

func (a *lazyArray) Get(i int) goja.Value {
	a.index()
	if i < 0 || i >= len(a.vals) {
		return nil
	}
	if a.vals[i] == nil {
		if i >= len(a.raws) {
			return goja.Undefined()
		}
		a.vals[i] = jsValue(a.rt, a.d, a.raws[i])
	}
	return a.vals[i]
}

func (a *lazyArray) Set(i int, val goja.Value) bool {
	a.index()
	if i < 0 {
		return false
	}
	if i >= len(a.vals) && !a.SetLen(i+1) {
		return false
	}
	a.vals[i] = val
	a.changed = true
	return true
}

// maxLen is the longest a script may make an array read from the body:
// growing it is one step no interrupt can stop.
const maxLen = 1 << 20

func (a *lazyArray) SetLen(n int) bool {
	a.index()
	if n < 0 || n > max(maxLen, len(a.vals)) {
		return false
	}
	for len(a.vals) < n {
		a.vals = append(a.vals, goja.Undefined())
	}
	a.vals = a.vals[:n]
	if n < len(a.raws) {
		a.raws = a.raws[:n]
	}
	a.changed = true
	return true
}

func (a *lazyArray) untouched() bool {
	if !a.indexed {
		return true
	}
	if a.changed {
		return false
	}
	for _, v := range a.vals {
		if v != nil && !untouched(v) {
			return false
		}
	}
	return true
}
