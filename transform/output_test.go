package transform

import (
	"errors"
	"net/http"
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
