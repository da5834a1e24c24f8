package filter

import (
	"encoding/json"
	"testing"

	"cel.dev/cel-go/common/types"
	"github.com/tidwall/gjson"
)

// FuzzMatch feeds arbitrary bodies to filters that walk them: a filter
// never panics, and on an object encoding/json takes (with "type" once), the
// lazily read "type" has the value encoding/json decodes.
func FuzzMatch(f *testing.F) {
	for _, seed := range []string{`{"type":"invoice.paid","data":{"object":{"amount":1}}}`, `[1,"a",{"b":null}]`,
		`{"type":"a\u00e9\"b"}`, `"x"`, `{"type":1e400}`, `{"a":{"a":{"a":[]}}}`, "{\"type\":\"\xff\"}", `{`} {
		f.Add([]byte(seed))
	}
	var filters []*Filter
	for _, expr := range []string{
		`body.type.startsWith("invoice.")`,
		`has(body.data.object.amount) && body.data.object.amount > 0`,
		`body.exists(x, x == null)`,
		`size(body) > 1 && body.all(k, k != "")`,
		`body == {"type": "x"} || body == [1] || body == null`,
	} {
		flt, err := Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		filters = append(filters, flt)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev := &Event{Body: body}
		for _, flt := range filters {
			_, _ = flt.Match(ev)
		}
		var v struct{ Type *string }
		if !json.Valid(body) || json.Unmarshal(body, &v) != nil || v.Type == nil {
			return
		}
		got, _ := (&activation{ev: ev}).ResolveName("body")
		o, ok := got.(*jsonObject)
		if !ok {
			t.Fatalf("body %q is an object to encoding/json, not to the filter", body)
		}
		n := 0
		o.r.ForEach(func(k, _ gjson.Result) bool {
			if k.Str == "type" {
				n++
			}
			return true
		})
		if n != 1 {
			return // a repeated key: the filter reads the first, encoding/json the last
		}
		if typ, found := o.Find(types.String("type")); !found || typ.Value() != *v.Type {
			t.Fatalf("body %q: type reads %v, encoding/json decodes %q", body, typ, *v.Type)
		}
	})
}
