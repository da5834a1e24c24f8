package transform

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, handler, body string) (*Request, error) {
	t.Helper()
	s, err := Compile("t.js", "addHandler('transform', (request, context) => {\n"+handler+"\n});", nil, Limits{MaxBody: 1 << 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s.Run(&Request{Method: "POST", Path: "/hook", Query: "a=1", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}, Context{})
}

func TestWhatTheScriptLeavesAloneGoesOutAsTheSenderWroteIt(t *testing.T) {
	body := `{ "id": 12345678901234567890, "type": "a.b",
  "data": {"object": {"keep": 1.50, "drop": "x", "n": [1, 2, 3]}} }`
	cases := []struct{ name, handler, want string }{
		{"a body only read", "request.headers['x-type'] = request.body.type; return request;", body},
		{"a spread request", "return {...request, headers: {...request.headers, 'x-a': 'b'}};", body},
		{"a field dropped deep inside", "delete request.body.data.object.drop; return request;",
			`{"id":12345678901234567890,"type":"a.b","data":{"object":{"keep":1.50,"n":[1, 2, 3]}}}`},
		{"an element changed", "request.body.data.object.n[1] = 'two'; return request;",
			`{"id":12345678901234567890,"type":"a.b","data":{"object":{"keep":1.50,"drop":"x","n":[1,"two",3]}}}`},
		{"a field added", "request.body.extra = {at: null, ok: true}; return request;",
			`{"id":12345678901234567890,"type":"a.b","data":{"object": {"keep": 1.50, "drop": "x", "n": [1, 2, 3]}},"extra":{"at":null,"ok":true}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, c.handler, body)
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Body) != c.want {
				t.Errorf("body\n%s\nwant\n%s", out.Body, c.want)
			}
		})
	}
}

func TestWhatAHandlerMayNotReturn(t *testing.T) {
	cases := []struct{ name, handler, kind, msg string }{
		{"nothing", "request.x = 1;", KindInvalid, "returned undefined"},
		{"a string", "return 'hello';", KindInvalid, "returned a string"},
		{"a promise", "return Promise.resolve(request);", KindInvalid, "must not be async"},
		{"an object that is no request", "return {status: 200};", KindInvalid, "none of a request's fields"},
		{"a body larger than max_body", "request.body = {s: 'x'.repeat(2000)}; return request;", KindTooBig, "larger than max_body"},
		{"a string body larger than max_body", "request.body = 'x'.repeat(2000); return request;", KindTooBig, "larger than max_body"},
		{"a body nested too deeply", "let o = {}; for (let i = 0; i < 200; i++) o = {o}; request.body = o; return request;", KindInvalid, "deeper than 128"},
		{"a body that refers to itself", "const o = {}; o.self = o; request.body = o; return request;", KindInvalid, "refers to itself"},
		{"a header value with a line break", "request.headers['x-a'] = 'a\\r\\nInjected: 1'; return request;", KindInvalid, `request.headers["x-a"]: control character`},
		{"a header name with a space", "request.headers['x a'] = 'b'; return request;", KindInvalid, "not a valid header name"},
		{"a path to another host", "request.path = 'http://elsewhere/'; return request;", KindInvalid, "must start with /"},
		{"a method of its own", "request.method = 'BREW'; return request;", KindInvalid, "is not one of"},
		{"an exception", "throw new Error('no ' + request.body.type);", KindThrew, "Error: no a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, c.handler, `{"type":"a"}`)
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.kind || !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("got %v, want kind %q with %q", err, c.kind, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "transform_error: "+c.kind) {
				t.Errorf("error text %q", err)
			}
		})
	}
}

func TestCompileErrorsSayWhere(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"a syntax error", "addHandler('transform', (request) => {\n  return request\n  }}\n", "t.js:3:4: SyntaxError: "},
		{"no handler", "const x = 1;", "t.js: the script registers no handler"},
		{"another handler", "addHandler('verify', (r) => r);", `addHandler("verify", ...): the only handler is 'transform'`},
		{"a top-level loop", "for (;;) {}", "t.js: transform_error: timeout"},
		{"an empty script", "  \n", "t.js: the script is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile("t.js", c.src, nil, Limits{Timeout: 10e6})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestHeadersReadAndChangeAsAnObject(t *testing.T) {
	cases := []struct{ name, handler, want string }{
		{"names in any case", "request.headers['X-A'] = request.headers['CONTENT-TYPE']; return request;", "Content-Type=application/json X-A=application/json"},
		{"deleted", "delete request.headers['content-type']; return request;", ""},
		{"spread into a new object", "return {...request, headers: {...request.headers, 'x-b': ['1', '2']}};", "Content-Type=application/json X-B=1 X-B=2"},
		{"listed", "request.headers['x-keys'] = Object.keys(request.headers).join(' '); return request;", "Content-Type=application/json X-Keys=content-type"},
		{"replaced", "request.headers = {'x-only': 1}; return request;", "X-Only=1"},
		{"tested with in", "request.headers['x-in'] = String('content-type' in request.headers) + String('nope' in request.headers); return request;", "Content-Type=application/json X-In=truefalse"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, c.handler, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k, vs := range out.Header {
				for _, v := range vs {
					got = append(got, k+"="+v)
				}
			}
			slices.Sort(got)
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("headers %q, want %q", s, c.want)
			}
		})
	}
}

func TestTheRequestItWasGivenGoesOutWithWhatTheScriptSetDeletedOrLeft(t *testing.T) {
	body := `{"a": 1}`
	cases := []struct {
		name, handler           string
		method, path, query, ct string
		body                    string
	}{
		{"left alone", "return request;", "POST", "/hook", "a=1", "application/json", body},
		{"query and body set to null", "request.query = null; request.body = null; return request;", "POST", "/hook", "", "application/json", "null"},
		{"fields deleted", "delete request.query; delete request.method; delete request.body; delete request.headers; return request;", "POST", "/hook", "", "", ""},
		{"fields set", "request.method = 'put'; request.path = '/b'; request.query = {x: ['1', '2']}; request.body = 'hi'; return request;", "PUT", "/b", "x=1&x=2", "application/json", "hi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, c.handler, body)
			if err != nil {
				t.Fatal(err)
			}
			if out.Method != c.method || out.Path != c.path || out.Query != c.query || out.Header.Get("Content-Type") != c.ct || string(out.Body) != c.body {
				t.Errorf("got %s %s ?%s content-type %q body %q, want %s %s ?%s %q %q",
					out.Method, out.Path, out.Query, out.Header.Get("Content-Type"), out.Body, c.method, c.path, c.query, c.ct, c.body)
			}
		})
	}
}

// What a script reads of a JSON body is what the body holds, whether or
// not the ingress had found it to be JSON: keys with escapes, containers
// large and small, whitespace, and a value of every kind.
func TestAScriptReadsTheBodyAsJSONHasIt(t *testing.T) {
	stripe, err := os.ReadFile("../filter/testdata/stripe-invoice-paid.json")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 80)
	bodies := []string{
		string(stripe),
		`{"a\"b": 1, "c\\d": [1, {"e": "f\"}]"}], "\u0042": true, "A": false, "n": null, "x": -1.5e3}`,
		` [ {"k": "` + long + `", "l": [[], {}, [{"m": "]}"}]]}, {"k": 2} , "` + long + `" ] `,
		`{"outer": {"inner": {"deep": {"s": "` + long + `", "t": [1, 2, 3]}, "after": "` + long + `"}, "last": 1}, "z": {}}`,
		`"just a string"`,
		`12345678901234567890`,
	}
	s, err := Compile("t.js", `addHandler('transform', (request, context) => {
  const b = request.body;
  const keys = b && typeof b === 'object' ? Object.keys(b) : [];
  request.body = {copy: JSON.parse(JSON.stringify(b)), keys};
  return request;
});`, nil, Limits{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range bodies {
		for _, known := range []bool{true, false} {
			out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(body), JSON: known}, Context{})
			if err != nil {
				t.Fatalf("body %d, JSON known %v: %v", i, known, err)
			}
			var got struct {
				Copy any
				Keys []string
			}
			if err := json.Unmarshal(out.Body, &got); err != nil {
				t.Fatalf("body %d: %v", i, err)
			}
			var want any
			if err := json.Unmarshal([]byte(body), &want); err != nil {
				t.Fatal(err)
			}
			if f, ok := want.(float64); ok {
				want = float64(float32(f)) // JavaScript's number, as encoding/json reads it back
				got.Copy = float64(float32(got.Copy.(float64)))
			}
			if !reflect.DeepEqual(got.Copy, want) {
				t.Errorf("body %d, JSON known %v: the script read\n%v\nwant\n%v", i, known, got.Copy, want)
			}
			if m, ok := want.(map[string]any); ok && len(got.Keys) != len(m) {
				t.Errorf("body %d: keys %q, want those of %v", i, got.Keys, m)
			}
		}
	}
}

// A body wrongly marked as JSON (Request.JSON) is not checked again: it
// reads as whatever it seems to hold, and nothing fails in the engine.
func TestABodyWronglyMarkedAsJSONFailsNothing(t *testing.T) {
	s, err := Compile("t.js", `addHandler('transform', (request, context) => {
  const b = request.body;
  const seen = [typeof b, b && typeof b === 'object' ? Object.keys(b) : [], b && b.a, b && b[0], JSON.stringify(b)];
  if (b && typeof b === 'object') b.added = 1;
  request.headers['x-seen'] = JSON.stringify(seen);
  return request;
});`, nil, Limits{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"a":`, `[1, 2`, `"abc`, `{"a" 1}`, `}{`, ``, `   `, `{"a": "\`, `{"a": [}`, `[{]`, `{,}`, `{"` + strings.Repeat(`a`, 100) + `": {{{{`, `tru`, `-`, `{"a": 1,}`} {
		out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(body), JSON: true}, Context{})
		var e *Error
		if errors.As(err, &e) && e.Kind == KindEngine {
			t.Errorf("%q: %v", body, err)
		}
		if err == nil && out.Header.Get("X-Seen") == "" {
			t.Errorf("%q: the script did not run", body)
		}
	}
}

// An array's length is a number a script sets: a header's values are read
// from the first thousand elements only, without making room for more.
func TestAHeaderOfAnArrayOfAnyLengthIsItsFirstValues(t *testing.T) {
	out, err := run(t, "const a = ['x', 'y']; a.length = 1e9; request.headers['x-a'] = a; request.query = {q: a}; return request;", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Header.Values("X-A"); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("x-a %q, want x and y", got)
	}
	if out.Query != "q=x&q=y" {
		t.Errorf("query %q, want q=x&q=y", out.Query)
	}
}
