package transform

import (
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// headerObject is request.headers: the request's headers under lower-case
// names, each a string (several values joined with ", "), read from src
// when the script reads them; what the script sets or deletes is kept
// apart, and src is never changed. Names are case-insensitive.
type headerObject struct {
	rt    *goja.Runtime
	src   http.Header
	set   props // by lower-case name, in the order set
	names headerNames
}

// headerNames remembers the canonical form (http.CanonicalHeaderKey) of
// the header names a machine's runs use, at most maxHeaderNames of them: a
// script names the same few on every run, in lower case, which
// CanonicalHeaderKey copies each time.
type headerNames map[string]string

const maxHeaderNames = 64

// canonical is http.CanonicalHeaderKey(k).
func (n headerNames) canonical(k string) string {
	if c, ok := n[k]; ok {
		return c
	}
	c := http.CanonicalHeaderKey(k)
	if n != nil && len(n) < maxHeaderNames {
		n[k] = c
	}
	return c
}

var headerObjectType = reflect.TypeFor[*headerObject]()

func (o *headerObject) Get(key string) goja.Value {
	k := strings.ToLower(key)
	if v, ok := o.set.get(k); ok {
		return v
	}
	vs, ok := o.src[o.names.canonical(k)]
	if !ok {
		return nil
	}
	if len(vs) == 1 {
		return o.rt.ToValue(vs[0])
	}
	return o.rt.ToValue(strings.Join(vs, ", "))
}

func (o *headerObject) Set(key string, val goja.Value) bool {
	o.set.set(strings.ToLower(key), val)
	return true
}

func (o *headerObject) Has(key string) bool { return o.Get(key) != nil }

func (o *headerObject) Delete(key string) bool {
	o.Set(key, nil)
	return true
}

func (o *headerObject) Keys() []string {
	keys := make([]string, 0, len(o.src)+len(o.set))
	for k := range o.src {
		if k := strings.ToLower(k); o.Has(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, p := range o.set {
		if _, ok := o.src[o.names.canonical(p.key)]; !ok && p.val != nil {
			keys = append(keys, p.key)
		}
	}
	return keys
}

// header is what o holds now, with room for one more.
func (o *headerObject) header() (http.Header, error) {
	h := make(http.Header, len(o.src)+len(o.set)+1)
	for k, vs := range o.src {
		if !slices.ContainsFunc(o.set, func(p prop) bool { return strings.EqualFold(p.key, k) }) {
			h[k] = vs
		}
	}
	for _, p := range o.set {
		if err := addHeader(h, o.names, p.key, p.val); err != nil {
			return nil, err
		}
	}
	return h, nil
}
