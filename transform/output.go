package transform

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// methods a handler may set.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// output turns what the handler returned into the request to send; in is
// the request it was given and r the object it saw. nil, nil is a null:
// the event is dropped.
func (m *machine) output(in *Request, r *goja.Object, res goja.Value) (*Request, error) {
	if res == nil || goja.IsUndefined(res) {
		return nil, invalid("the handler returned undefined; return the request, or null to drop the event")
	}
	if goja.IsNull(res) {
		return nil, nil
	}
	o, ok := res.(*goja.Object)
	if !ok || o.ClassName() != "Object" {
		return nil, invalid("the handler returned a %s, not a request object", typeName(res))
	}
	if o == r {
		// The request it was given: what the script did not set is
		// read from in, without making it a JavaScript value first.
		o = nil
	}
	if _, ok := goja.AssertFunction(m.field(o, "then")); ok {
		return nil, invalid("the handler returned a promise; a handler must not be async")
	}
	if !slices.ContainsFunc([]string{"headers", "body", "path", "query", "method"}, func(k string) bool {
		v := m.field(o, k)
		return v != nil && !goja.IsUndefined(v)
	}) {
		return nil, invalid("the handler returned an object with none of a request's fields (headers, body, path, query, method)")
	}
	out := &Request{}
	var err error
	if out.Method, err = m.method(in, o); err != nil {
		return nil, err
	}
	if out.Path, err = m.path(in, o); err != nil {
		return nil, err
	}
	if out.Query, err = m.queryOut(in, o); err != nil {
		return nil, err
	}
	if out.Header, err = m.headers(in, o); err != nil {
		return nil, err
	}
	json := false
	if out.Body, json, err = m.bodyOut(in, o); err != nil {
		return nil, err
	}
	if json && out.Header.Get("Content-Type") == "" {
		out.Header.Set("Content-Type", "application/json")
	}
	return out, nil
}

func invalid(format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Msg: fmt.Sprintf(format, args...)}
}

func typeName(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		return strings.ToLower(o.ClassName())
	}
	return fmt.Sprintf("%T", v.Export()) // a primitive: cheap to export
}

// unset is what field gives for a field of the run's request that the
// script neither set nor deleted: a value no script can make.
var unset goja.Value = goja.NewSymbol("unset")

// field is o[key]; o nil is the run's request, where a field the script
// did not set or delete is unset (its value is the input's), and a
// deleted one nil.
func (m *machine) field(o *goja.Object, key string) goja.Value {
	if o != nil {
		return o.Get(key)
	}
	if key == "body" {
		if !m.bodyUsed {
			return unset
		}
		return m.bodyVal
	}
	if v, ok := m.request.vals.get(key); ok {
		return v
	}
	if slices.Contains(requestKeys, key) {
		return unset
	}
	return nil
}

// str reads o[key] (field) as a string; absent or unset is def.
func (m *machine) str(o *goja.Object, key, def string) (string, error) {
	v := m.field(o, key)
	if v == nil || v == unset || goja.IsUndefined(v) {
		return def, nil
	}
	s, ok := stringOf(v)
	if !ok {
		return "", invalid("request.%s is a %s, not a string", key, typeName(v))
	}
	return s, nil
}

func (m *machine) method(in *Request, o *goja.Object) (string, error) {
	s, err := m.str(o, "method", in.Method)
	if err != nil {
		return "", err
	}
	s = strings.ToUpper(s)
	if !slices.Contains(methods, s) {
		return "", invalid("request.method %q is not one of %s", clip(s), strings.Join(methods, ", "))
	}
	return s, nil
}

func (m *machine) path(in *Request, o *goja.Object) (string, error) {
	s, err := m.str(o, "path", in.Path)
	if err != nil {
		return "", err
	}
	if s == "" {
		s = "/"
	}
	if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?#") || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", invalid("request.path must start with / and hold no ?, #, space or control character")
	}
	if _, err := url.PathUnescape(s); err != nil {
		return "", invalid("request.path: %v", err)
	}
	return s, nil
}

// queryOut reads request.query: a string (a leading "?" is dropped), or an
// object of names to a value or an array of values.
func (m *machine) queryOut(in *Request, o *goja.Object) (string, error) {
	v := m.field(o, "query")
	if v == unset {
		return in.Query, nil
	}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return "", nil
	}
	if s, ok := stringOf(v); ok {
		s = strings.TrimPrefix(s, "?")
		if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '#' || r == 0x7f }) {
			return "", invalid("request.query holds a space, # or control character; encode it (encodeURIComponent)")
		}
		return s, nil
	}
	qo, ok := v.(*goja.Object)
	if !ok || qo.ClassName() != "Object" {
		return "", invalid("request.query is a %s, not a string or an object", typeName(v))
	}
	vals := url.Values{}
	for _, k := range qo.Keys() {
		for _, s := range values(qo.Get(k)) {
			vals.Add(k, s)
		}
	}
	return vals.Encode(), nil
}

// maxValues is how many elements of an array values reads.
const maxValues = 1000

// values is a header's or query parameter's value as strings: an array
// gives one each, of its first maxValues elements; null and undefined
// none.
func values(v goja.Value) []string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
		n := min(o.Get("length").ToInteger(), maxValues)
		out := make([]string, 0, max(n, 0))
		for i := int64(0); i < n; i++ {
			out = append(out, values(o.Get(fmt.Sprint(i)))...)
		}
		return out
	}
	return []string{v.String()}
}

// headers reads request.headers: names checked as tokens, values without
// control characters (RFC 9110 §5.1, §5.5). Errors name the header, never
// its value.
func (m *machine) headers(in *Request, o *goja.Object) (http.Header, error) {
	v := m.field(o, "headers")
	if v == unset {
		return in.Header.Clone(), nil
	}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return http.Header{}, nil
	}
	ho, ok := v.(*goja.Object)
	if !ok || ho.ClassName() != "Object" {
		return nil, invalid("request.headers is a %s, not an object", typeName(v))
	}
	if ho.ExportType() == headerObjectType {
		return ho.Export().(*headerObject).header()
	}
	h := http.Header{}
	for _, k := range ho.Keys() {
		if err := addHeader(h, m.hdr.names, k, ho.Get(k)); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// addHeader adds header k with value v (a string, an array of values, or
// null or undefined for none) to h; names gives k's canonical form.
func addHeader(h http.Header, names headerNames, k string, v goja.Value) error {
	if !token(k) {
		return invalid("request.headers: %q is not a valid header name", clip(k))
	}
	name := names.canonical(k)
	vs := values(v)
	for _, s := range vs {
		if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return invalid("request.headers[%q]: control character in its value", strings.ToLower(name))
		}
	}
	if old := h[name]; old != nil {
		vs = append(old, vs...)
	}
	if len(vs) > 0 {
		h[name] = vs
	}
	return nil
}

// token reports whether s is an HTTP token (RFC 9110 §5.6.2).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// bodyOut is the body to send: the original bytes when the script neither
// read nor set the body of the request it returned, a string's text, or
// any other value as JSON (json true).
func (m *machine) bodyOut(in *Request, o *goja.Object) (body []byte, json bool, err error) {
	v := m.field(o, "body")
	if v == unset {
		return in.Body, false, nil
	}
	if v == nil || goja.IsUndefined(v) {
		return nil, false, nil
	}
	if v == m.decoded && untouched(v) {
		return in.Body, false, nil
	}
	if s, ok := stringOf(v); ok {
		if int64(len(s)) > m.s.limits.MaxBody {
			return nil, false, tooBig(m.s.limits.MaxBody)
		}
		return []byte(s), false, nil
	}
	b, err := encodeJSON(m.rt, m.scratch, v, m.s.limits.MaxBody)
	if err != nil {
		return nil, false, err
	}
	if cap(b) <= maxScratch {
		m.scratch = b
	}
	// A copy of its size: the scratch buffer grew by doubling, and it is
	// the next run's.
	return bytes.Clone(b), true, nil
}

// maxScratch is the largest scratch buffer a machine keeps.
const maxScratch = 64 << 10

func tooBig(max int64) *Error {
	return &Error{Kind: KindTooBig, Msg: fmt.Sprintf("the body returned is larger than max_body (%d bytes)", max)}
}
