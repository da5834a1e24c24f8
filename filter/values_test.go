package filter

import (
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

func TestValuesAreTheStringsABodyFieldMustEqual(t *testing.T) {
	for _, c := range []struct {
		expr string
		want [][]string
	}{
		{`body.data.object.metadata.order_id == "1004"`, [][]string{{"1004"}}},
		{`"1004" == body["order"].id`, [][]string{{"1004"}}},
		{`body.type == "a" && headers["x"] == "b" && body.items[0].sku == "é\"\\"`, [][]string{{"a"}, {"é\"\\"}}},
		{`body == "whole"`, [][]string{{"whole"}}},
		{`body.id == ""`, [][]string{{""}}},
		{`body.n == 1004`, [][]string{{key(1004)}}},
		{`body.n == 1004u && body.m == -0.0 && body.x == 2.5e-3`, [][]string{{key(1004)}, {key(0)}, {key(0.0025)}}},
		{`body.type == "a" || body.type == "b"`, [][]string{{"a", "b"}}},
		{`body.type in ["invoice.paid", "invoice.payment_failed"] && body.n in [1, 2.5]`, [][]string{{"invoice.paid", "invoice.payment_failed"}, {key(1), key(2.5)}}},
		{`body.a == "x" && body.b == "y" || body.c in ["z"]`, [][]string{{"x", "z"}}},
		{`body.type in []`, [][]string{{}}},
		// Nothing a body must hold:
		{`body.type == "a" || headers["x"] == "b"`, nil},
		{`body.type in ["a", body.other]`, nil},
		{`"a" in body.tags`, nil},
		{`!(body.type == "a")`, nil},
		{`body.type != "a"`, nil},
		{`headers["x-github-event"] == "push"`, nil},
		{`has(body.type) == true`, nil},
		{`body.type.startsWith("invoice.")`, nil},
		{`body.n == double("NaN")`, nil},
		{`route == "stripe"`, nil},
	} {
		f, err := Compile(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := f.Values(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Values() = %q, want %q", c.expr, got, c.want)
		}
	}
}

func key(f float64) string { return string(numberKey(nil, f)) }

func TestANumberOfTheBodyEqualsAnIntOrUintOfTheSameValue(t *testing.T) {
	for _, expr := range []string{`body.n == 1004`, `body.n == 1004u`, `body.n == 1004.0`, `body.z == 0`} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Match(&Event{Body: []byte(`{"n": 1.004e3, "z": -0}`), JSON: true}); !ok || err != nil {
			t.Errorf("%s is %v (%v) for n 1.004e3", expr, ok, err)
		}
	}
}

// stringsOf is every value of the JSON r that BodyValues gives, as an
// expression reads it, found by walking gjson's tree: the oracle for
// BodyValues.
func stringsOf(r gjson.Result, out []string) []string {
	switch {
	case r.Type == gjson.String:
		return append(out, validUTF8(r.Str))
	case r.Type == gjson.Number:
		return append(out, key(r.Num))
	case r.IsObject() || r.IsArray():
		r.ForEach(func(_, v gjson.Result) bool {
			out = append(out, stringsOf(v, nil)...)
			return true
		})
	}
	return out
}

func FuzzBodyValues(f *testing.F) {
	for _, seed := range []string{
		`{"id":"evt_1","data":{"object":{"metadata":{"order_id":"1004"}}}}`,
		`{"a" : "b", "c"	:["d", 1, "e", {"f":"g"}], "h": null}`,
		`{"q\"uote":"v\"al","back\\":"s\\","u":"\u00e9\ud83d\ude00","bad":"\udc00"}`,
		"{\"raw\":\"\xff\xfe\",\"k\":\"caf\xc3\xa9\"}",
		`"top"`, `["x","y"]`, `{}`, `[]`, `{"a":"\\"}`, `{"a":"\\\""}`,
		` { "k" : "v" } `, "{\"k\"\n:\"v\",\"w\":\"x\"\r\n}",
		`[1,-2.5,3e2,-0,{"a":[10,"b",1e400]},0.1]`, `{"n": 1004 , "m":-7}`, `12`, `-0.0`,
	} {
		f.Add([]byte(seed))
	}
	for _, name := range []string{"testdata/github-push.json", "testdata/stripe-invoice-paid.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []string
		BodyValues(body, func(s []byte) { got = append(got, string(s)) })
		if !IsJSON(body) {
			return // any answer will do: such a body is null to an expression
		}
		want := stringsOf(gjson.ParseBytes(body), nil)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("body %q:\nBodyValues %q\nits strings  %q", body, got, want)
		}
	})
}
