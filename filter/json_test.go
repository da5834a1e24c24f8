package filter

import (
	"encoding/json"
	"testing"
)

// The lazy JSON values give every expression the same answer as the body
// decoded in full by encoding/json.
func TestTheLazyBodyAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","n":3,"f":2.5,"ok":true,"none":null,
		"a.b":1,"a*":2,"#":3,"esc\"aped":"tab\tand \u00e9",
		"obj":{"x":1,"y":[1,"two",{"z":false}]},"list":[3,1,2],"empty":{},"nolist":[],
		"dup":1,"dup":2}`)
	exprs := []string{
		`body.type == "invoice.paid"`,
		`body.n == 3 && body.n > 2.5 && body.f < 3`,
		`body.ok == true`,
		`body.none == null`,
		`body["a.b"] == 1 && body["a*"] == 2 && body["#"] == 3`,
		`body["esc\"aped"] == "tab\tand é"`,
		`body.obj.y[2].z == false`,
		`body.obj.y[1] == "two"`,
		`body.obj == {"x": 1, "y": [1, "two", {"z": false}]}`,
		`body.obj != {"x": 2}`,
		`body.list == [3, 1, 2]`,
		`2 in body.list`,
		`!(5 in body.list)`,
		`"type" in body && !("nope" in body)`,
		`size(body.list) == 3 && size(body.obj) == 2 && size(body.empty) == 0 && size(body.nolist) == 0`,
		`body.list.exists(x, x == 1) && body.list.all(x, x > 0)`,
		`body.list.filter(x, x > 1) == [3, 2]`,
		`body.list.map(x, x * 2.0) == [6.0, 2.0, 4.0]`,
		`body.obj.exists(k, k == "y")`,
		`body.list + [4] == [3, 1, 2, 4]`,
		`has(body.obj.x) && !has(body.obj.q)`,
		`type(body) == map && type(body.list) == list`,
		`body.list[1.0] == 1`,
		`string(body.n) == "3"`,
		`body.dup == 1 || body.dup == 2`,
		`dyn(body.empty) == {}`,
	}
	var decoded any
	if err := json.Unmarshal(body, &decoded); err != nil {
		t.Fatal(err)
	}
	env, err := environment()
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range exprs {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			f, err := Compile(expr)
			if err != nil {
				t.Fatal(err)
			}
			lazy, lerr := f.Match(&Event{Body: body})
			ast, _ := env.Compile(expr)
			prg, _ := env.Program(ast)
			out, _, derr := prg.Eval(map[string]any{"body": decoded})
			if lerr != nil || derr != nil {
				t.Fatalf("errors: lazy %v, decoded %v", lerr, derr)
			}
			if full := out.Value().(bool); lazy != full || !lazy {
				t.Errorf("lazy %v, decoded %v; want both true", lazy, full)
			}
		})
	}
}

// Scalars at the top level are JSON too; what is not JSON is null.
func TestABodyThatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, expr string }{
		{`42`, `body == 42`},
		{`"hi"`, `body == "hi"`},
		{`[1,2]`, `body[1] == 2`},
		{``, `body == null`},
		{`{"a":`, `body == null`},
		{`null`, `body == null`},
		{`{"a":1} trailing`, `body == null`},
	} {
		f, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Match(&Event{Body: []byte(tc.body)}); !ok || err != nil {
			t.Errorf("body %q: %s = %v, %v", tc.body, tc.expr, ok, err)
		}
	}
}
