package policy

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// env is a lookup over a fixed map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestParseFullExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("policies.yaml", data, env(map[string]string{
		"GITHUB_WEBHOOK_SECRET": "gh-secret",
		"STRIPE_SECRET":         "whsec_new",
	}))
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultRetry()
	if !reflect.DeepEqual(cfg.Defaults, Defaults{Retry: def, Timeout: 10 * time.Second}) {
		t.Errorf("Defaults = %+v", cfg.Defaults)
	}

	github, ok := cfg.Route("github")
	if !ok {
		t.Fatal(`Route("github") not found`)
	}
	want := Route{
		Name: "github", Path: "/hooks/github", Methods: []string{"POST"}, MaxBody: 5 << 20,
		Provider: "github", Secrets: []string{"gh-secret"}, Tolerance: 5 * time.Minute,
		Retry: def, Timeout: 10 * time.Second, Line: 7,
		Destinations: []Destination{{
			Name: "app", URL: "http://127.0.0.1:3000/webhooks/github", Timeout: 10 * time.Second,
			Concurrency: 8, Rate: Rate{PerSecond: 50, Burst: 2},
			Breaker: Breaker{Failures: 5, Cooldown: 5 * time.Second}, SlowStart: 30 * time.Second,
		}},
	}
	if !reflect.DeepEqual(*github, want) {
		t.Errorf("route github =\n%+v\nwant\n%+v", *github, want)
	}

	stripe, _ := cfg.Route("stripe")
	wantRetry := Retry{
		Kind: BackoffLinear, Interval: 30 * time.Second, Base: 10 * time.Second, Step: time.Minute,
		Multiplier: 2, MaxDelay: time.Hour, Jitter: JitterEqual, MaxAttempts: 20, MaxAge: 72 * time.Hour,
		RetryAfterMax: 10 * time.Minute, RetryOn: []StatusMatch{{Code: 429}, {Class: 5}},
	}
	want = Route{
		Name: "stripe", Path: "/hooks/stripe", Methods: []string{"POST", "PUT"}, MaxBody: 512 << 10,
		Provider: "stripe", Secrets: []string{"whsec_new", "whsec_old"}, Tolerance: 10 * time.Minute,
		Retry: wantRetry, Timeout: 5 * time.Second, Line: 14,
		Destinations: []Destination{{
			Name: "billing", URL: "https://billing.internal:8443/stripe", Timeout: 30 * time.Second,
			Concurrency: 2, Rate: Rate{PerSecond: 2, Burst: 5},
			Resign:  &Resign{Scheme: "standard-webhooks", Secrets: []Secret{"whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1hcHA="}},
			Breaker: Breaker{Failures: 3, Cooldown: time.Minute},
		}, {
			Name: "audit", URL: "http://audit:9000/in", Timeout: 5 * time.Second, Concurrency: 8,
			Breaker: Breaker{Failures: 5, Cooldown: 5 * time.Second}, SlowStart: 30 * time.Second,
			Filter: `body.type.startsWith("invoice.")`,
		}},
	}
	if !reflect.DeepEqual(*stripe, want) {
		t.Errorf("route stripe =\n%+v\nwant\n%+v", *stripe, want)
	}

	partner, _ := cfg.Route("partner")
	if partner.Secrets[0] != "${not-a-var}" {
		t.Errorf("escaped secret = %q, want the literal ${not-a-var}", partner.Secrets[0])
	}
	wantHMAC := HMAC{Header: "X-Signature", Algorithm: "sha512", Encoding: "base64", Prefix: "sha512=", IDHeader: "X-Event-Id"}
	if partner.HMAC != wantHMAC {
		t.Errorf("partner HMAC = %+v, want %+v", partner.HMAC, wantHMAC)
	}
	if r := partner.Retry; r.Kind != BackoffFixed || r.Interval != 5*time.Minute || r.Jitter != JitterDecorrelated || r.Base != time.Second || r.Step != time.Second {
		t.Errorf("partner retry = %+v", r)
	}

	internal, _ := cfg.Route("internal")
	if internal.Provider != "none" || len(internal.Secrets) != 0 {
		t.Errorf("internal provider = %q, secrets = %d", internal.Provider, len(internal.Secrets))
	}
	if _, ok := cfg.Route("nope"); ok {
		t.Error(`Route("nope") found`)
	}
	if got := cfg.MaxAge(); got != 72*time.Hour {
		t.Errorf("MaxAge() = %v, want 72h", got)
	}
	wantWarnings := []string{
		`policies.yaml:14: route "stripe": destination "audit": provider stripe signatures expire after 10m0s but retries run for up to 72h0m0s; set resign if the backend verifies them`,
		`policies.yaml:55: route "internal": provider none: requests are not verified; unsafe on a public URL`,
	}
	if got := cfg.Warnings(); !reflect.DeepEqual(got, wantWarnings) {
		t.Errorf("Warnings() =\n%q\nwant\n%q", got, wantWarnings)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	t.Run("it reads a file and names it in errors", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "policies.yaml")
		if err := os.WriteFile(path, []byte("routes: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if want := path + ":1: routes: at least one route is required"; err == nil || err.Error() != want {
			t.Errorf("Load() error = %v, want %q", err, want)
		}
	})
	t.Run("a missing file is an error", func(t *testing.T) {
		t.Parallel()
		if _, err := Load(filepath.Join(t.TempDir(), "absent.yaml")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Load() error = %v, want not exist", err)
		}
	})
}

// route is a minimal valid route, indented as an item of `routes`.
const route = `  - name: app
    path: /hooks/app
    destinations:
      - {name: app, url: "http://app/hook"}
`

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want string // the exact first error
	}{
		{"an unknown key names its line", "defaults:\n  timeout: 5s\nroutes:\n  - name: app\n    path: /a\n    retires: 3\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:6: routes[0].retires: unknown key "retires"`},
		{"an unknown key deep in a block names its line", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: http://a\n        timeuot: 1s\n",
			nil, `p.yaml:7: routes[0].destinations[0].timeuot: unknown key "timeuot"`},
		{"an unknown top-level key is an error", "notify: {}\nroutes:\n" + route,
			nil, `p.yaml:1: notify: unknown key "notify"`},
		{"a bad duration names its line", "defaults:\n  retry:\n    base: 2x\nroutes:\n" + route,
			nil, `p.yaml:3: defaults.retry.base: invalid duration "2x"`},
		{"a bad duration in a route", "routes:\n  - name: a\n    path: /a\n    retry:\n      base: 2x\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:5: routes[0].retry.base: invalid duration "2x"`},
		{"a negative duration is an error", "defaults:\n  timeout: -5s\nroutes:\n" + route,
			nil, `p.yaml:2: defaults.timeout: invalid duration "-5s": must not be negative`},
		{"a duplicate path names the second route", "routes:\n" + route + "  - name: other\n    path: /hooks/app\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:7: routes[1].path: duplicate path "/hooks/app" (first used by route "app" at line 3)`},
		{"a duplicate route name names the second route", "routes:\n" + route + "  - name: app\n    path: /other\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:6: routes[1].name: duplicate route name "app" (first at line 2)`},
		{"a duplicate key is an error", "routes:\n  - name: a\n    name: b\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:3: routes[0].name: duplicate key "name" (first at line 2)`},
		{"a missing variable names itself", "routes:\n  - name: a\n    path: /a\n    provider: github\n    secret: ${GH_SECRET}\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:5: routes[0].secret: environment variable "GH_SECRET" is not set`},
		{"a variable cannot inject a subject token", "routes:\n  - name: ${NAME}\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n",
			map[string]string{"NAME": "a.>"}, `p.yaml:2: routes[0].name: invalid name "a.>": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`},
		{"a variable cannot inject YAML structure", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: '${URL}'}]\n",
			map[string]string{"URL": "http://a'}, {name: b, url: 'http://b"}, `p.yaml:4: routes[0].destinations[0].url: invalid URL "http://a'}, {name: b, url: 'http://b"`},
		{"a dot in a route name is rejected", "routes:\n  - name: a.b\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:2: routes[0].name: invalid name "a.b": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`},
		{"a wildcard in a route name is rejected", "routes:\n  - name: '*'\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:2: routes[0].name: invalid name "*": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`},
		{"a space in a destination name is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: 'my app', url: 'http://a'}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].name: invalid name "my app": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`},
		{"a full wildcard in a destination name is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: '>', url: 'http://a'}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].name: invalid name ">": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`},
		{"a relative URL is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: /hook}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].url: URL "/hook" must be absolute http or https`},
		{"a URL without host is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http:///hook'}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].url: URL "http:///hook" has no host`},
		{"an unknown provider is rejected", "routes:\n  - name: a\n    path: /a\n    provider: gogs\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:4: routes[0].provider: unknown provider "gogs" (want one of "bitbucket", "calendly", "docusign", "dropbox", "forgejo", "gitea", "github", "gitlab", "hmac", "hubspot", "intercom", "lemonsqueezy", "linear", "mailgun", "meta", "mux", "none", "okta", "paddle", "pagerduty", "postmark", "razorpay", "sendgrid", "sentry", "shopify", "signature", "slack", "square", "standard-webhooks", "stripe", "svix", "twilio", "twitch", "typeform", "vercel", "woocommerce", "zoom")`},
		{"a provider without a secret is rejected", "routes:\n  - name: a\n    path: /a\n    provider: stripe\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:2: routes[0].secret: provider stripe requires a secret`},
		{"an empty secret is rejected", "routes:\n  - name: a\n    path: /a\n    provider: stripe\n    secrets: [x, '']\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:5: routes[0].secrets[1]: secret is empty`},
		{"provider hmac needs a header", "routes:\n  - name: a\n    path: /a\n    provider: hmac\n    secret: s\n    hmac: {algorithm: sha1}\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:6: routes[0].hmac.header: provider hmac requires hmac.header`},
		{"a bad backoff is rejected", "defaults:\n  retry: {backoff: quadratic}\nroutes:\n" + route,
			nil, `p.yaml:2: defaults.retry.backoff: unknown backoff "quadratic" (want one of "fixed", "linear", "exponential")`},
		{"a bad jitter is rejected", "defaults:\n  retry: {jitter: some}\nroutes:\n" + route,
			nil, `p.yaml:2: defaults.retry.jitter: unknown jitter "some" (want one of "none", "full", "equal", "decorrelated")`},
		{"a multiplier of 1 is rejected for exponential", "defaults:\n  retry:\n    multiplier: 1\nroutes:\n" + route,
			nil, `p.yaml:3: defaults.retry.multiplier: multiplier must be greater than 1 for exponential backoff, got 1`},
		{"max_attempts below 1 is rejected", "defaults:\n  retry:\n    max_attempts: 0\nroutes:\n" + route,
			nil, `p.yaml:3: defaults.retry.max_attempts: must be between 1 and 10000, got 0`},
		{"concurrency below 1 is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a', concurrency: 0}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].concurrency: must be at least 1, got 0`},
		{"a bad rate is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a', rate: 50/d}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].rate: invalid rate "50/d": want N/s, N/m or N/h, e.g. "50/s"`},
		{"an empty routes list is rejected", "routes: []\n",
			nil, `p.yaml:1: routes: at least one route is required`},
		{"an empty file is rejected", "",
			nil, `p.yaml:1: routes: at least one route is required (the file is empty)`},
		{"a route without destinations is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: []\n",
			nil, `p.yaml:4: routes[0].destinations: at least one destination is required`},
		{"an unknown method is rejected", "routes:\n  - name: a\n    path: /a\n    methods: [POST, FETCH]\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:4: routes[0].methods[1]: unknown HTTP method "FETCH" (want one of "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")`},
		{"a duplicate destination name is rejected", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - {name: a, url: 'http://a'}\n      - {name: a, url: 'http://b'}\n",
			nil, `p.yaml:6: routes[0].destinations[1].name: duplicate destination name "a" (first at line 5)`},
		{"a breaker with a zero cooldown is rejected", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: 'http://a'\n        breaker: {failures: 3, cooldown: 0s}\n",
			nil, `p.yaml:7: routes[0].destinations[0].breaker.cooldown: must be greater than 0`},
		{"an unknown breaker key is rejected", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: 'http://a'\n        breaker: {failure: 3}\n",
			nil, `p.yaml:7: routes[0].destinations[0].breaker.failure: unknown key "failure"`},
		{"a standard-webhooks secret must be whsec_<base64> or base64, and the error points at it", "routes:\n  - name: a\n    path: /a\n    provider: standard-webhooks\n    secrets:\n      - whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n      - hunter2!\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:7: routes[0].secrets[1]: provider standard-webhooks: the secret is neither whsec_<base64> nor base64`},
		{"a path with a query is rejected", "routes:\n  - name: a\n    path: /a?x=1\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:3: routes[0].path: path "/a?x=1" must not contain "?" or "#"`},
		{"a relative path is rejected", "routes:\n  - name: a\n    path: a\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:3: routes[0].path: path "a" must start with "/"`},
		{"a YAML syntax error keeps its line", "routes:\n  - name: a\n    path: /a\n  bad\n",
			nil, `p.yaml:4: yaml: could not find expected ':'`},
		{"a tab in the indentation is reported on its line", "routes:\n  - name: a\n\t\n    path: /a\n\tprovider: none\n",
			nil, `p.yaml:5: yaml: found a tab character that violates indentation`},
		{"an unclosed flow mapping is reported where it opens", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a'\n",
			nil, `p.yaml:4: yaml: did not find expected ',' or '}'`},
		{"a misindented key is reported in its block", "routes:\n  - name: a\n   path: /a\n",
			nil, `p.yaml:2: yaml: did not find expected '-' indicator`},
		{"a secret without a verifying provider is rejected", "routes:\n  - name: a\n    path: /a\n    secret: s\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:2: routes[0].provider: a secret is set but provider is none, so requests would not be verified; set provider`},
		{"a resign secret must be whsec", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a', resign: {secret: hunter2}}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].resign.secret: secret must have the form whsec_<base64>`},
		{"a base above max_delay is rejected", "defaults:\n  retry: {base: 2h}\nroutes:\n" + route,
			nil, `p.yaml:2: defaults.retry.base: base 2h0m0s exceeds max_delay 1h0m0s`},
		{"burst needs a rate", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a', burst: 3}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].burst: burst requires rate`},
		{"a retry_on code must be an error status", "defaults:\n  retry: {retry_on: [200]}\nroutes:\n" + route,
			nil, `p.yaml:2: defaults.retry.retry_on[0]: status 200 is not an error status (want 400-599)`},
		{"merge keys are not supported", "routes:\n  - <<: {name: a}\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n",
			nil, `p.yaml:2: routes[0].<<: YAML merge keys are not supported`},
		{"a filter that does not parse names its line and column", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: 'http://a'\n        filter: 'body.type =='\n",
			nil, `p.yaml:7: routes[0].destinations[0].filter: filter does not compile: line 1 column 13: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
		{"a filter over an unknown variable is rejected", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - {name: a, url: 'http://a'}\n      - {name: b, url: 'http://b', filter: 'event.type == \"push\"'}\n",
			nil, `p.yaml:6: routes[0].destinations[1].filter: filter does not compile: line 1 column 1: undeclared reference to 'event'`},
		{"a filter that is not boolean is rejected", "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: 'http://a'\n        filter: |\n          body.data.object\n",
			nil, `p.yaml:7: routes[0].destinations[0].filter: filter must be a boolean expression, but gives dyn (compare it: e.g. body.active == true)`},
		{"an empty filter is rejected", "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: 'http://a', filter: ''}]\n",
			nil, `p.yaml:4: routes[0].destinations[0].filter: filter is empty`},
		{"a second document is rejected", "routes:\n" + route + "---\nroutes: []\n",
			nil, `p.yaml:6: document: only one YAML document is allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("p.yaml", []byte(tt.yaml), env(tt.env))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", cfg, tt.want)
			}
			var first *Error
			if !errors.As(err, &first) {
				t.Fatalf("Parse() error %v is not an *Error", err)
			}
			if first.Error() != tt.want {
				t.Errorf("first error:\n got %s\nwant %s\n(all: %v)", first, tt.want, err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	t.Parallel()
	yaml := "defaults:\n  retry:\n    base: 2x\nroutes:\n  - name: a\n    path: /a\n    retires: 3\n    destinations: [{name: a, url: 'http://a'}]\n  - name: b\n    path: /a\n    destinations: [{name: a, url: 'http://a'}]\n"
	_, err := Parse("p.yaml", []byte(yaml), nil)
	want := strings.Join([]string{
		`p.yaml:3: defaults.retry.base: invalid duration "2x"`,
		`p.yaml:7: routes[0].retires: unknown key "retires"`,
		`p.yaml:10: routes[1].path: duplicate path "/a" (first used by route "a" at line 6)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Parse() error =\n%v\nwant\n%s", err, want)
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, routeYAML string) Route {
		t.Helper()
		cfg, err := Parse("p.yaml", []byte("routes:\n  - name: a\n    path: /a\n"+routeYAML), env(map[string]string{"T": "3d"}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Routes[0]
	}
	tests := []struct {
		name  string
		yaml  string
		check func(Route) bool
	}{
		{"a day duration from a variable", "    retry: {max_age: '${T}'}\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.Retry.MaxAge == 72*time.Hour }},
		{"a plain integer body size", "    max_body: 1024\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.MaxBody == 1024 }},
		{"an SI body size", "    max_body: 1MB\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.MaxBody == 1_000_000 }},
		{"a GiB body size", "    max_body: 2GiB\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.MaxBody == 2<<30 }},
		{"a per-hour rate gets a burst of one", "    destinations: [{name: a, url: 'http://a', rate: 36/h}]\n",
			func(r Route) bool { return r.Destinations[0].Rate == Rate{PerSecond: 0.01, Burst: 1} }},
		{"a slow rate gets a burst of one", "    destinations: [{name: a, url: 'http://a', rate: 2.5/s}]\n",
			func(r Route) bool { return r.Destinations[0].Rate == Rate{PerSecond: 2.5, Burst: 1} }},
		{"a fast rate gets a burst of a twentieth of it", "    destinations: [{name: a, url: 'http://a', rate: 1000/s}]\n",
			func(r Route) bool { return r.Destinations[0].Rate == Rate{PerSecond: 1000, Burst: 50} }},
		{"the route timeout flows to destinations", "    timeout: 3s\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.Timeout == 3*time.Second && r.Destinations[0].Timeout == 3*time.Second }},
		{"step defaults to the route's own base", "    retry: {backoff: linear, base: 7s}\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.Retry.Step == 7*time.Second }},
		{"retry_after_max defaults to the route's max_delay", "    retry: {max_delay: 10m}\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.Retry.RetryAfterMax == 10*time.Minute }},
		{"methods are upper-cased", "    methods: [get, Post]\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return reflect.DeepEqual(r.Methods, []string{"GET", "POST"}) }},
		{"hmac defaults to sha256 hex", "    provider: hmac\n    secret: s\n    hmac: {header: X-Sig}\n    destinations: [{name: a, url: 'http://a'}]\n",
			func(r Route) bool { return r.HMAC == HMAC{Header: "X-Sig", Algorithm: "sha256", Encoding: "hex"} }},
		{"a filter is kept as written", "    destinations:\n      - name: a\n        url: 'http://a'\n        filter: >-\n          headers[\"x-github-event\"] == \"push\" &&\n          body.ref == \"refs/heads/main\"\n",
			func(r Route) bool {
				return r.Destinations[0].Filter == `headers["x-github-event"] == "push" && body.ref == "refs/heads/main"`
			}},
		{"an alias reuses a destination", "    destinations: [&d {name: a, url: 'http://a'}]\n  - name: b\n    path: /b\n    destinations: [*d]\n",
			func(r Route) bool { return r.Destinations[0].URL == "http://a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if r := parse(t, tt.yaml); !tt.check(r) {
				t.Errorf("unexpected route %+v", r)
			}
		})
	}
}

func TestRouteRetryMergesOverDefaults(t *testing.T) {
	t.Parallel()
	yaml := `defaults:
  retry: {base: 5s, max_attempts: 3, jitter: none}
  timeout: 4s
routes:
  - name: a
    path: /a
    retry: {max_attempts: 7}
    destinations: [{name: a, url: 'http://a'}]
`
	cfg, err := Parse("p.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Routes[0]
	want := DefaultRetry()
	want.Base, want.Step, want.MaxAttempts, want.Jitter = 5*time.Second, 5*time.Second, 7, JitterNone
	if !reflect.DeepEqual(r.Retry, want) {
		t.Errorf("route retry = %+v\nwant %+v", r.Retry, want)
	}
	if cfg.Defaults.Retry.MaxAttempts != 3 || r.Timeout != 4*time.Second {
		t.Errorf("defaults max_attempts = %d, route timeout = %v", cfg.Defaults.Retry.MaxAttempts, r.Timeout)
	}
}

// A retry setting a route's backoff does not use is most likely a
// mistake (fixed waits delay, not base): a warning names it, its file and
// line. Settings of the defaults block, which a route may use by changing
// its backoff, are not warned of.
func TestARetrySettingTheBackoffDoesNotUseIsWarnedOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		defaults, retry string
		want            []string // warnings about retry settings
	}{
		{"", "{backoff: fixed, base: 300ms}", []string{`p.yaml:7: route "shop": retry.base has no effect with backoff fixed, which waits delay (30s) before each retry`}},
		{"", "{backoff: fixed, delay: 5s, step: 1s, multiplier: 3}", []string{
			`p.yaml:7: route "shop": retry.step has no effect with backoff fixed, which waits delay (5s) before each retry`,
			`p.yaml:7: route "shop": retry.multiplier has no effect with backoff fixed, which waits delay (5s) before each retry`}},
		{"", "{backoff: fixed, base: 1s, jitter: decorrelated}", nil}, // decorrelated jitter grows from base
		{"", "{backoff: exponential, delay: 5s}", []string{`p.yaml:7: route "shop": retry.delay has no effect with backoff exponential, which waits base·multiplier^(n−1), at most max_delay`}},
		{"", "{backoff: linear, base: 1s, step: 2s, multiplier: 2}", []string{`p.yaml:7: route "shop": retry.multiplier has no effect with backoff linear, which waits base + (n−1)·step`}},
		{"{backoff: fixed}", "{base: 300ms}", []string{`p.yaml:7: route "shop": retry.base has no effect with backoff fixed, which waits delay (30s) before each retry`}},
		{"{base: 1s, multiplier: 3}", "{backoff: fixed, delay: 2s}", nil},
		{"", "{base: 1s, multiplier: 3, max_delay: 1m}", nil},
	} {
		doc := "defaults:\n  retry: " + cmp.Or(tc.defaults, "{}") + `
routes:
  - name: shop
    path: /hooks/shop
    provider: none
    retry: ` + tc.retry + `
    destinations:
      - {name: app, url: "http://127.0.0.1:1/shop"}
`
		cfg, err := Parse("p.yaml", []byte(doc), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.retry, err)
		}
		var got []string
		for _, w := range cfg.Warnings() {
			if strings.Contains(w, "retry.") {
				got = append(got, w)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("defaults %s, route %s: warnings\n%q\nwant\n%q", tc.defaults, tc.retry, got, tc.want)
		}
	}
}
