package transform

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
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
		// Built-ins that would work in one uninterruptible step.
		{"JSON.stringify of an object nested 1,000 deep", "let o = {}; for (let i = 0; i < 1000; i++) o = {o}; JSON.stringify(o);", []string{KindThrew}},
		{"JSON.stringify of a 1 GiB result", "const s = 'x'.repeat(1 << 20); const a = []; for (let i = 0; i < 1024; i++) a.push(s); JSON.stringify(a);", []string{KindThrew, KindMemory}},
		{"Array.from a billion-long array-like", "Array.from({length: 1e9});", []string{KindThrew}},
		{"Array.from a billion-long array-like with a map", "Array.from({length: 1e9}, (_, i) => i);", []string{KindThrew}},
		{"an argument list 2^53 long", "Math.max.apply(null, {length: 2 ** 53 - 1});", []string{KindThrew}},
		// One step each, without the bounds: for years, or for hours.
		{"a regular expression that backtracks, in test", "/^(a|aa)+\\1$/.test('a'.repeat(50) + 'b');", []string{KindTimeout}},
		{"sort of long strings that differ at their ends", "const s = 'x'.repeat(2e6); const v = []; for (let i = 0; i < 24; i++) v.push(s + String.fromCharCode(65 + i)); const a = []; for (let i = 0; i < 1 << 16; i++) a.push(v[i * 7 % 24]); a.sort();", []string{KindTimeout}},
		{"sort of them with Math.max, a comparator written in Go", "const s = 'x'.repeat(2e6); const v = []; for (let i = 0; i < 24; i++) v.push(s + String.fromCharCode(65 + i)); const a = []; for (let i = 0; i < 1 << 16; i++) a.push(v[i * 7 % 24]); a.sort(Math.max);", []string{KindTimeout, KindMemory}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			l := Limits{Timeout: 200 * time.Millisecond, Memory: 64 << 20}
			if c.kinds[0] != KindTimeout {
				l.Timeout = time.Minute // what stops it is not the time
			}
			e, took := hostile(t, c.body, l)
			if !slices.Contains(c.kinds, e.Kind) {
				t.Fatalf("kind %q (%v), want one of %q", e.Kind, e, c.kinds)
			}
			// How far it got, which the machine's load does not change as
			// it changes the time it took: each script sets out to make
			// at least 1 GiB, or to go on for ever.
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			if allocated >= 1<<30 {
				t.Errorf("allocated %d MiB before it stopped; want less than 1 GiB, 16 times the limit", allocated>>20)
			}
			t.Logf("%v in %v, %d MiB allocated; heap in use %d MiB", e, took.Round(time.Millisecond), allocated>>20, after.HeapInuse>>20)
		})
	}
}

// TestABuiltInThatWorksInOneStepIsBounded runs, under a 16 MiB memory
// limit, built-ins that goja runs in one step, in Go, where no interrupt
// reaches: each on a size at which goja alone allocates well over the
// limit, or goes through 10^8 elements. Each must end in a transform error
// having allocated no more than a few times the limit (the process's
// allocations, runtime.MemStats.TotalAlloc).
func TestABuiltInThatWorksInOneStepIsBounded(t *testing.T) {
	const memory = 16 << 20
	cases := []struct {
		name, body string
		kinds      []string // what may stop it
	}{
		{"Function.prototype.apply of a long array-like", "Math.max.apply(null, {length: 1e7});", []string{KindThrew}},
		{"Reflect.apply of a long array-like", "Reflect.apply(Math.max, null, {length: 1e7});", []string{KindThrew}},
		{"Reflect.construct with a long array-like", "Reflect.construct(Array, {length: 1e7});", []string{KindThrew}},
		{"fill of Array(n)", "Array(2e6).fill(0);", []string{KindThrew}},
		{"fill of an array-like", "Array.prototype.fill.call({length: 2e6}, 0);", []string{KindThrew}},
		{"fill of an array-like whose length is a getter", "let n = 0; Array.prototype.fill.call({get length() { return n++ ? 2e6 : 1; }}, 0);", []string{KindThrew}},
		{"with on Array(n)", "Array(2e6).with(0, 1);", []string{KindThrew}},
		{"concat of Array(n)", "[].concat(Array(1e8));", []string{KindThrew}},
		{"join of a sparse array with a long separator", "Array(1e6).join('x'.repeat(200));", []string{KindThrew}},
		{"join of long strings", "Array(64).fill('x'.repeat(4 << 20)).join('');", []string{KindThrew}},
		{"toLocaleString of long strings", "Array(64).fill('x'.repeat(4 << 20)).toLocaleString();", []string{KindThrew}},
		{"flat of an array holding Array(n)", "[Array(1e8)].flat();", []string{KindThrew}},
		{"flatMap to Array(n)", "[1].flatMap(() => Array(1e8));", []string{KindThrew}},
		{"spreading Array(n) into an array", "[...Array(1e6)];", []string{KindMemory}},
		{"spreading Array(n) into a call", "Math.max(...Array(2e5));", []string{KindMemory}},
		{"spreading a long string", "[...'x'.repeat(1e6)];", []string{KindMemory}},
		{"split into characters", "'x'.repeat(4e6).split('');", []string{KindThrew}},
		{"String.raw of a long array-like", "String.raw({raw: {length: 1e7}});", []string{KindThrew}},
		{"String.prototype.concat of long strings", "const s = 'x'.repeat(4 << 20); ''.concat(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s);", []string{KindThrew}},
		{"JSON.stringify with a long replacer array", "const r = []; r.length = 1e7; JSON.stringify({}, r);", []string{KindThrew}},
		// Few matches: Go's regexp takes its state for each from a
		// sync.Pool, which -race empties at random.
		{"replace of each match by the rest of the string", "('x'.repeat(100) + 'y'.repeat(1e6)).replace(/x/g, \"$'\");", []string{KindThrew, KindMemory}},
		{"replaceAll of a string by what comes before it", "'x'.repeat(2e4).replaceAll('x', '$`');", []string{KindThrew, KindMemory}},
		{"replaceAll of a string by a long one", "'x'.repeat(1e4).replaceAll('x', 'y'.repeat(1e5));", []string{KindThrew, KindMemory}},
		{"replace by $' repeated", "'x'.repeat(1e6).replace('x', \"$'\".repeat(1e3));", []string{KindThrew, KindMemory}},
		{"replaceAll of the empty string in a long one", "'x'.repeat(4e6).replaceAll('', '');", []string{KindThrew}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			e, took := hostile(t, c.body, Limits{Timeout: time.Minute, Memory: memory})
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v in %v, %d MiB allocated", e, took.Round(time.Millisecond), allocated>>20)
			if !slices.Contains(c.kinds, e.Kind) {
				t.Errorf("kind %q (%v), want one of %q", e.Kind, e, c.kinds)
			}
			if allocated > 6*memory {
				t.Errorf("%d MiB allocated; want at most %d", allocated>>20, 6*memory>>20)
			}
		})
	}
}

func TestJSONStringifyWritesWhatGojasWouldWithinItsBounds(t *testing.T) {
	t.Parallel()
	s, err := Compile("stringify.js", `addHandler('transform', (request, context) => {
  const v = {a: 1, b: [1, 'two', null, undefined, () => 1], c: {d: new Date(0), e: NaN}, f: undefined, g: 'é"\n', h: request.body};
  request.body = {
    plain: JSON.stringify(v),
    indented: JSON.stringify({a: [1]}, null, 2),
    replaced: JSON.stringify({a: 1, b: 2}, ['a']),
    nothing: typeof JSON.stringify(undefined),
    fn: typeof JSON.stringify(() => 1),
    number: JSON.stringify(1.5),
  };
  return request;
});`, nil, Limits{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{"x": [1, 2]}`)}, Context{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"plain":"{\"a\":1,\"b\":[1,\"two\",null,null,null],\"c\":{\"d\":\"1970-01-01T00:00:00.000Z\",\"e\":null},\"g\":\"é\\\"\\n\",\"h\":{\"x\":[1,2]}}",` +
		`"indented":"{\n  \"a\": [\n    1\n  ]\n}","replaced":"{\"a\":1}","nothing":"undefined","fn":"undefined","number":"1.5"}`
	if string(out.Body) != want {
		t.Errorf("got\n %s\nwant\n %s", out.Body, want)
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

// A run is not pinned to its thread at first: one that took longer than
// a share of its time limit by the wall clock, here waiting in Go rather
// than running, is run again pinned, on another machine, where the CPU
// time it uses is what counts; and the script's next runs start pinned.
func TestARunSlowOnlyByTheWallClockIsRunAgainPinned(t *testing.T) {
	s, err := Compile("wait.js", `addHandler('transform', (request, context) => {
  if (typeof wait === 'function') wait();
  request.headers['x-ran'] = 'yes';
  return request;
});`, nil, Limits{Timeout: 20 * time.Millisecond, Pool: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.get()
	if err != nil {
		t.Fatal(err)
	}
	waited := 0
	if err := m.rt.Set("wait", func() {
		waited++
		time.Sleep(3 * s.limits.Timeout)
	}); err != nil {
		t.Fatal(err)
	}
	s.put(m)
	out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{}`)}, Context{})
	if err != nil || out.Header.Get("X-Ran") != "yes" {
		t.Fatalf("Run = %+v, %v; want the request with x-ran", out, err)
	}
	if waited != 1 {
		t.Errorf("the slow machine ran %d times, want once", waited)
	}
	m2, err := s.get()
	if err != nil {
		t.Fatal(err)
	}
	if m2 == m {
		t.Error("the slow machine was kept")
	}

	// For a while, the script's runs start pinned: one as slow by the
	// wall clock, and no slower by the CPU's, runs once, where it began.
	waited = 0
	if err := m2.rt.Set("wait", func() {
		waited++
		time.Sleep(3 * s.limits.Timeout)
	}); err != nil {
		t.Fatal(err)
	}
	s.put(m2)
	out, err = s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{}`)}, Context{})
	if err != nil || out.Header.Get("X-Ran") != "yes" {
		t.Fatalf("the next Run = %+v, %v; want the request with x-ran", out, err)
	}
	if m3, _ := s.get(); waited != 1 || m3 != m2 {
		t.Errorf("the next run waited %d times, on the machine it began on: %v; want once, pinned from the start", waited, m3 == m2)
	}
}

// A pinned run that passed its wall limit inside one step, as a regular
// expression regexp2 cut short does, fails as a timeout, and is not run
// again.
func TestAPinnedRunPastItsWallLimitInOneStepFailsAtOnce(t *testing.T) {
	s, err := Compile("step.js", `addHandler('transform', (request, context) => {
  step();
  return request;
});`, nil, Limits{Timeout: 5 * time.Millisecond, Pool: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.get()
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	if err := m.rt.Set("step", func() {
		steps++
		time.Sleep(2 * wallFactor * s.limits.Timeout)
	}); err != nil {
		t.Fatal(err)
	}
	s.put(m)
	// A run whose console is shown is pinned from the start.
	_, err = s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{}`)}, Context{Console: io.Discard})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout {
		t.Fatalf("Run = %v; want a timeout", err)
	}
	if steps != 1 {
		t.Errorf("the step ran %d times, want once", steps)
	}
}

func TestAGoPanicInsideTheEngineFailsTheRunAndItsMachineGoes(t *testing.T) {
	t.Parallel()
	s, err := Compile("engine.js", `addHandler('transform', (request, context) => {
  if (request.body.boom) boom();
  return request;
});`, nil, Limits{Pool: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := <-s.pool
	// What a bug in goja does: a Go panic on the run's goroutine.
	if err := m.rt.Set("boom", func() { panic("index out of range") }); err != nil {
		t.Fatal(err)
	}
	s.put(m)
	_, err = s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{"boom":true}`)}, Context{})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindEngine || e.Msg != "the JavaScript engine failed: index out of range" {
		t.Fatalf("run: %v, want the engine's failure", err)
	}
	if len(s.pool) != 0 {
		t.Error("the machine the engine failed in went back to the pool")
	}
	if out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{"boom":false}`)}, Context{}); err != nil || out == nil {
		t.Fatalf("the next run: %v, %v", out, err)
	}
}

// TestARegularExpressionCutShortStopsTheRun runs, under a time limit a
// match never reaches, regular expressions that regexp2 backtracks on
// for years: each built-in that matches must end the run as a timeout
// once regexp2 cuts its match short, not go on as if nothing matched.
func TestARegularExpressionCutShortStopsTheRun(t *testing.T) {
	const re, s = `/^(a|aa)+\1$/`, `('a'.repeat(50) + 'b')`
	cases := []struct{ name, body string }{
		{"test", re + ".test(" + s + ");"},
		{"match", s + ".match(" + re + ");"},
		{"search", s + ".search(" + re + ");"},
		{"split", s + ".split(" + re + ");"},
		{"replace by a string", s + ".replace(" + re + ", 'x');"},
		{"replace by a function", s + ".replace(" + re + ", () => 'x');"},
		{"replaceAll", s + ".replaceAll(" + re + "g, 'x');"},
		{"matchAll, spread", "[..." + s + ".matchAll(" + re + "g)];"},
		{"matchAll, for of", "for (const m of " + s + ".matchAll(" + re + "g)) request.headers['x-match'] = m[0];"},
		{"Symbol.matchAll's iterator, by hand", re + "g[Symbol.matchAll](" + s + ").next();"},
		// Not timed by jethook (regexp.go): with the default timeout,
		// regexp2 gives up at the run's wall limit.
		{"exec, under the default limits", re + ".exec(" + s + ");"},
		{"exec of a global expression in a loop, under the default limits", "const r = " + re + "g; while (r.exec(" + s + ")) {}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := Limits{Timeout: time.Minute}
			if strings.HasPrefix(c.name, "exec") {
				l = Limits{}
			}
			e, took := hostile(t, c.body, l)
			t.Logf("%v in %v", e, took.Round(time.Millisecond))
			if e.Kind != KindTimeout || l.Timeout != 0 && !strings.Contains(e.Msg, "regular expression") {
				t.Errorf("%v; want a timeout of the regular expression", e)
			}
		})
	}
}

// TestMatchAllMatchesAsTheLanguageSays checks that the timed matchAll
// gives what goja's own does.
func TestMatchAllMatchesAsTheLanguageSays(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, want string }{
		{"[...'a1b22c333'.matchAll(/\\d+/g)].map(m => m[0] + '@' + m.index).join()", "1@1,22@3,333@6"},
		{"[...'xay'.matchAll(/(?<=x)a(?=y)/g)].map(m => m.index).join()", "1"},
		{"[...'aa'.matchAll(/(a)\\1|a/g)].length", "1"},
		{"(() => { const it = 'ab'.matchAll(/./g); return it[Symbol.iterator]() === it && it.next().value[0] + it.next().value[0] + it.next().done; })()", "abtrue"},
		{"(() => { try { 'a'.matchAll(/a/); return 'no'; } catch (e) { return e.name; } })()", "TypeError"},
	}
	for _, c := range cases {
		s, err := Compile("matchall.js", "addHandler('transform', (request, context) => { request.body = String("+c.expr+"); return request; });", nil, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{}`)}, Context{})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := string(out.Body); got != c.want {
			t.Errorf("%s = %s, want %q", c.expr, got, c.want)
		}
	}
}

func TestReplaceWritesWhatTheLanguageSays(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, want string }{
		{"'abc'.replace('b', \"[$&|$`|$'|$$|$1]\")", "a[b|a|c|$|$1]c"},
		{"'abcb'.replaceAll('b', '<$&>')", "a<b>c<b>"},
		{"'ab'.replaceAll('', '-')", "-a-b-"},
		{"'a-b-c'.replace(/-(.)/g, '[$1$2$01$10]')", "a[b$2bb0][c$2cc0]"},
		{"'abc'.replace(/c/, \"[$']\")", "ab[]"},
		{"'é😀é'.replace(/😀/u, \"[$`$']\")", "é[éé]é"},
		{"'abc'.replace(/b/, (m, p, s) => m.toUpperCase() + p + s)", "aB1abcc"},
		{"'abc'.replace({toString: () => 'c'}, '$$')", "ab$"},
		{"'a.b.c'.split(/\\./).join('')", "abc"},
		{"'a1b22'.match(/\\d+/g).join()", "1,22"},
		{"String(/b/.test('abc')) + 'abc'.search(/c/)", "true2"},
		{"[3, 1, undefined, 10, 2].sort().join()", "1,10,2,3,"},
		{"[3, 1, 10, 2].sort((a, b) => a - b).join()", "1,2,3,10"},
		{"[3, 1, 2].toSorted().join()", "1,2,3"},
		{"[1, 2.5, true, null].join('|') + ''.concat(1, false)", "1|2.5|true|1false"},
		{"String.raw({raw: ['a', 'b']}, 1) + [1, [2]].toLocaleString()", "a1b1,2"},
	}
	for _, c := range cases {
		s, err := Compile("replace.js", "addHandler('transform', (request, context) => { request.body = "+c.expr+"; return request; });", nil, Limits{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(&Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(`{}`)}, Context{})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if string(out.Body) != c.want {
			t.Errorf("%s = %s, want %s", c.expr, out.Body, c.want)
		}
	}
}
