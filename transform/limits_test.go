package transform

import (
	"errors"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"
)

// hostile runs script's handler on a small JSON webhook and returns the
// error with how long the run took.
func hostile(t *testing.T, body string, l Limits) (*Error, time.Duration) {
	t.Helper()
	s, err := Compile("hostile.js", "addHandler('transform', (request, context) => {\n"+body+"\nreturn request;\n});", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{Method: "POST", Path: "/hook", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`)}
	start := time.Now()
	out, err := s.Run(req, Context{Route: "r", Destination: "d"})
	took := time.Since(start)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("run gave %v, %v; want a transform error", out, err)
	}
	return e, took
}

func TestAHostileScriptIsStoppedWithItsReason(t *testing.T) {
	cases := []struct {
		name, body string
		kinds      []string // what may stop it first
	}{
		{"an infinite loop", "for (;;) {}", []string{KindTimeout}},
		{"an infinite loop that catches everything", "for (;;) { try { for (;;) {} } catch (e) {} }", []string{KindTimeout}},
		{"a 1 GiB string at once", "const s = 'x'.repeat(1 << 30);", []string{KindThrew}},
		{"a 1 GiB padStart", "const s = ''.padStart(1 << 30, 'x');", []string{KindThrew}},
		// No timeout would stop these before the memory limit does.
		{"a string doubled until it is 1 GiB", "let s = 'x'; for (let i = 0; i < 30; i++) s += s; request.body = s.length;", []string{KindMemory}},
		{"an array grown element by element", "const a = []; for (;;) a.push({i: a.length});", []string{KindMemory}},
		{"a typed array of 1 GiB", "const b = new Uint8Array(1 << 30);", []string{KindThrew}},
		{"an unbounded recursion", "const f = (n) => f(n + 1) + 1; f(0);", []string{KindStack}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			l := Limits{Timeout: 200 * time.Millisecond, Memory: 64 << 20}
			if c.kinds[0] == KindMemory {
				l.Timeout = time.Minute
			}
			e, took := hostile(t, c.body, l)
			if !slices.Contains(c.kinds, e.Kind) {
				t.Fatalf("kind %q (%v), want one of %q", e.Kind, e, c.kinds)
			}
			if took > 10*time.Second {
				t.Errorf("stopped after %v", took)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			t.Logf("%v in %v; heap in use %d MiB", e, took.Round(time.Millisecond), after.HeapInuse>>20)
		})
	}
}

func TestAScriptStoppedByALimitDoesNotStopTheNextRun(t *testing.T) {
	s, err := Compile("loop.js", `addHandler('transform', (request, context) => {
  while (request.body.loop) {}
  request.headers['x-ran'] = 'yes';
  return request;
});`, nil, Limits{Timeout: 20 * time.Millisecond, Pool: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{"loop":true}`)}, Context{})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout {
		t.Fatalf("first run: %v, want a timeout", err)
	}
	for i := 0; i < 3; i++ {
		out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{"loop":false}`)}, Context{})
		if err != nil || out.Header.Get("X-Ran") != "yes" {
			t.Fatalf("run %d after the timeout: %+v, %v", i, out, err)
		}
	}
}
