package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A route is found by its exact, decoded path, and the subject it is
// stored under is built from the route's configured name, never from the
// request: a path holding subject characters ('.', '*', '>', spaces),
// plain or percent-encoded, finds no route and stores nothing.
func TestAPathWithSubjectCharactersReachesNoOtherRouteAndStoresNothing(t *testing.T) {
	t.Parallel()
	in := newIngress(t)
	for _, path := range []string{
		"/hooks/plain.", "/hooks/plain%2E", "/hooks/plain%2e", "/hooks/plain.github",
		"/hooks/*", "/hooks/%2A", "/hooks/plain.*", "/hooks/plain%2E%2A",
		"/hooks/>", "/hooks/%3E", "/hooks/plain.%3E", "/hooks/plain%3E",
		"/hooks/plain%20", "/hooks/plain%20github", "/hooks/plain%09", "/hooks/plain%00", "/hooks/plain%0D%0A",
		"/hooks/plain/", "//hooks/plain", "/HOOKS/PLAIN", "/hooks/github/../plain", "/hooks/github/..%2Fplain",
		"/webhooks.plain", "/webhooks.plain.%3E",
	} {
		t.Run(path, func(t *testing.T) {
			a := in.do(http.MethodPost, path, nil, strings.NewReader(`{"to":"nowhere"}`))
			if a.status != http.StatusNotFound || a.json["error"] != "no_route" {
				t.Fatalf("got %d %s, want 404 no_route", a.status, a.body)
			}
		})
	}
	if n := in.stored(); n != 0 {
		t.Fatalf("%d webhooks stored from paths that match no route, want 0", n)
	}

	// Percent-encoding a letter or the slash still names the same route,
	// and the webhook is stored under that route's name.
	for i, path := range []string{"/hooks/pl%61in", "/hooks%2Fplain"} {
		a := in.do(http.MethodPost, path, nil, strings.NewReader(fmt.Sprintf(`{"to":"plain","n":%d}`, i)))
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		e, _, err := in.store.Event(context.Background(), a.json["id"].(string), "")
		if err != nil || e.Route != "plain" {
			t.Fatalf("%s: stored as %+v, %v; want route plain", path, e, err)
		}
	}
}
