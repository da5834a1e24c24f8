package policy

import (
	"strings"
	"testing"
)

func TestPullDestinations(t *testing.T) {
	t.Parallel()
	const long = "0123456789abcdef0123456789abcdef"
	vars := env(map[string]string{"A": long, "B": long + "b", "SHORT": "short"})
	route := func(dests string) string {
		return "routes:\n  - name: shop\n    path: /hooks/shop\n    destinations:\n" + dests
	}
	t.Run("a pull destination takes its token from the environment and needs no url", func(t *testing.T) {
		t.Parallel()
		cfg, err := Parse("p.yaml", []byte(route(`      - {name: laptop, pull: {token: "${A}"}, timeout: 30s}
      - {name: app, url: "http://127.0.0.1:3000/"}
`)), vars)
		if err != nil {
			t.Fatal(err)
		}
		d := cfg.Routes[0].Destinations
		if d[0].Pull == nil || d[0].Pull.Token != long || d[0].URL != "" || d[0].Timeout.String() != "30s" || d[1].Pull != nil {
			t.Fatalf("destinations %+v", d)
		}
	})
	for _, c := range []struct{ name, dests, want string }{
		{"a token is required", "      - {name: laptop, pull: {}}\n", "pull.token: missing"},
		{"a short token is refused", "      - {name: laptop, pull: {token: \"${SHORT}\"}}\n", "needs at least 32"},
		{"a missing variable is an error", "      - {name: laptop, pull: {token: \"${NOPE}\"}}\n", `"NOPE" is not set`},
		{"a url beside pull is refused", "      - {name: laptop, pull: {token: \"${A}\"}, url: \"http://x/\"}\n", "remove url"},
		{"a rate beside pull is refused", "      - {name: laptop, pull: {token: \"${A}\"}, rate: 5/s}\n", "remove rate"},
		{"auth beside pull is refused", "      - {name: laptop, pull: {token: \"${A}\"}, auth: {bearer: x}}\n", "remove auth"},
		{"order beside pull is refused, not ignored", "      - {name: laptop, pull: {token: \"${A}\"}, order: {key: 'body.id'}}\n", "does not support order"},
		{"a transform beside pull is refused, not ignored", "      - {name: laptop, pull: {token: \"${A}\"}, transform: {script: \"addHandler('transform', (r) => r)\"}}\n", "does not support transform"},
		{"two destinations cannot share a token", "      - {name: a, pull: {token: \"${A}\"}}\n      - {name: b, pull: {token: \"${A}\"}}\n", "has the pull token of"},
		{"a push destination still needs a url", "      - {name: app}\n", "url: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("p.yaml", []byte(route(c.dests)), vars)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), long) {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
	t.Run("no route may take a path under /v1/pull/", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("p.yaml", []byte("routes:\n  - name: shop\n    path: /v1/pull/shop/x\n    destinations:\n      - {name: app, url: \"http://x/\"}\n"), vars)
		if err == nil || !strings.Contains(err.Error(), "pull destinations") {
			t.Fatalf("error %v", err)
		}
	})
}
