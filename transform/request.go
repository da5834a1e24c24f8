package transform

import (
	"slices"

	"github.com/dop251/goja"
)

// requestObject is the request a handler gets: each field is made from
// the run's Request when the script first reads it, the body decoded
// only then (lazy.go); what the script sets or deletes is kept. Made of Go
// fields, it costs a fraction of a plain object with its six properties
// defined anew on every run.
type requestObject struct {
	m    *machine
	req  *Request
	vals props // fields made or set
}

// requestKeys are a request's fields, in the order a script lists them.
var requestKeys = []string{"headers", "method", "path", "query", "parsed_query", "body"}

func (o *requestObject) Get(key string) goja.Value {
	m := o.m
	if key == "body" {
		if !m.bodyUsed {
			m.bodyUsed = true
			m.bodyVal = m.decodeBody()
		}
		return m.bodyVal
	}
	if v, ok := o.vals.get(key); ok {
		return v
	}
	var v goja.Value
	switch key {
	case "headers":
		v = m.hdrObj
	case "method":
		v = m.rt.ToValue(o.req.Method)
	case "path":
		v = m.rt.ToValue(o.req.Path)
	case "query":
		v = m.rt.ToValue(o.req.Query)
	case "parsed_query":
		v = m.parsedQuery()
	default:
		return nil
	}
	o.Set(key, v)
	return v
}

func (o *requestObject) Set(key string, val goja.Value) bool {
	if key == "body" {
		o.m.bodyUsed, o.m.bodyVal = true, val
		return true
	}
	o.vals.set(key, val)
	return true
}

func (o *requestObject) Has(key string) bool {
	if key == "body" {
		return !o.m.bodyUsed || o.m.bodyVal != nil
	}
	if v, ok := o.vals.get(key); ok {
		return v != nil
	}
	return slices.Contains(requestKeys, key)
}

func (o *requestObject) Delete(key string) bool {
	o.Set(key, nil)
	return true
}

func (o *requestObject) Keys() []string {
	keys := make([]string, 0, len(requestKeys)+len(o.vals))
	for _, k := range requestKeys {
		if o.Has(k) {
			keys = append(keys, k)
		}
	}
	for _, p := range o.vals {
		if p.val != nil && !slices.Contains(requestKeys, p.key) {
			keys = append(keys, p.key)
		}
	}
	return keys
}
