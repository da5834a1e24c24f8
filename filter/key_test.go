package filter_test

import (
	"errors"
	"testing"

	"github.com/jethook/jethook/filter"
)

func TestAKeyIsTheValueAsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, expr, body, want, kind string }{
		{"a string", `body.data.object.id`, `{"data":{"object":{"id":"sub_1"}}}`, "sub_1", ""},
		{"an integral JSON number without a fraction", `body.id`, `{"id":450789469}`, "450789469", ""},
		{"a fractional number", `body.v`, `{"v":1.5}`, "1.5", ""},
		{"an int expression", `size(raw)`, `{}`, "2", ""},
		{"a missing key", `body.nope`, `{}`, "", "no such key"},
		{"an empty string", `body.id`, `{"id":""}`, "", "empty"},
		{"null", `body.id`, `{"id":null}`, "", "empty"},
		{"a list", `body.ids`, `{"ids":[1]}`, "", "not a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, err := filter.CompileKey(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Eval(&filter.Event{Body: []byte(tc.body)})
			var fe *filter.Error
			switch {
			case tc.kind == "" && (err != nil || got != tc.want):
				t.Errorf("key %q (%v), want %q", got, err, tc.want)
			case tc.kind != "" && (!errors.As(err, &fe) || fe.Kind != tc.kind):
				t.Errorf("error %v, want kind %q", err, tc.kind)
			}
		})
	}
}

func TestAKeyMustBeAStringOrANumber(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{`body.a == 1`, `[1, 2]`, `{"a": 1}`, ` `} {
		if _, err := filter.CompileKey(expr); err == nil {
			t.Errorf("%s compiled as a key", expr)
		}
	}
}
