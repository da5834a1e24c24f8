package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts is
// safe to use as NATS subject tokens and has the invariants callers rely on.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("routes:\n" + route))
	f.Add([]byte("routes:\n  - name: ${N}\n    path: /a\n    destinations: [{name: a, url: 'http://a', rate: 1/s, burst: 2}]\n"))
	f.Add([]byte("defaults:\n  retry: {backoff: fixed, delay: 1d, jitter: decorrelated, retry_on: [5xx, 429]}\nroutes: [{name: a, path: /a, destinations: [{name: b, url: 'https://b'}]}]\n"))
	f.Add([]byte("routes: &r [{name: a, path: /a, destinations: *r}]\n"))
	f.Add([]byte("routes:\n  - &x {name: a, path: /a, destinations: [{name: b, url: 'http://b'}]}\n  - *x\n"))
	f.Add([]byte("routes: [{name: 'a.*>', path: '/a b', destinations: []}]\n---\n"))
	lookup := env(map[string]string{"N": "a.b", "S": "s"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.yaml", data, lookup)
		if err != nil {
			return
		}
		if len(cfg.Routes) == 0 {
			t.Fatal("accepted a config without routes")
		}
		for _, r := range cfg.Routes {
			if !validName(r.Name) {
				t.Fatalf("accepted route name %q", r.Name)
			}
			if len(r.Destinations) == 0 {
				t.Fatalf("route %q accepted without destinations", r.Name)
			}
			for _, d := range r.Destinations {
				if !validName(d.Name) {
					t.Fatalf("route %q: accepted destination name %q", r.Name, d.Name)
				}
				if d.Concurrency < 1 {
					t.Fatalf("route %q: destination %q concurrency %d", r.Name, d.Name, d.Concurrency)
				}
			}
			if r.Retry.MaxAttempts < 1 || len(r.Retry.Schedule()) >= r.Retry.MaxAttempts {
				t.Fatalf("route %q: max_attempts %d with %d schedule steps", r.Name, r.Retry.MaxAttempts, len(r.Retry.Schedule()))
			}
		}
	})
}
