package transform

import "github.com/dop251/goja"

// props are the properties a script set on one of the objects a run
// gives it (request, request.headers, context), in the order first set;
// a nil value is a deleted one. They are few, so a slice is both smaller
// and quicker than a map.
type props []prop

type prop struct {
	key string
	val goja.Value
}

// get is key's value and whether the script set or deleted it.
func (p props) get(key string) (goja.Value, bool) {
	for i := range p {
		if p[i].key == key {
			return p[i].val, true
		}
	}
	return nil, false
}

func (p *props) set(key string, val goja.Value) {
	for i := range *p {
		if (*p)[i].key == key {
			(*p)[i].val = val
			return
		}
	}
	*p = append(*p, prop{key, val})
}

// empty is p with nothing in it, its room kept.
func (p props) empty() props {
	clear(p)
	return p[:0]
}
