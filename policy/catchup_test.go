package policy

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// catchUpRoute is a route with provider and a catch_up block.
func catchUpRoute(provider, block string) string {
	return "routes:\n  - name: a\n    path: /a\n    provider: " + provider + "\n    secret: s\n" +
		"    destinations: [{name: a, url: 'http://a'}]\n    catch_up:\n" + block
}

func TestParseCatchUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       CatchUp
	}{
		{"a GitHub repository hook gets the defaults",
			catchUpRoute("github", "      github: {token: '${GH}', hook: repos/acme/shop/hooks/42}\n"),
			CatchUp{GitHub: &GitHubCatchUp{Token: "ghp_x", Owner: "acme", Repo: "shop", HookID: 42, APIURL: "https://api.github.com/"},
				Interval: 5 * time.Minute, Window: 72 * time.Hour}},
		{"a GitHub organization hook on Enterprise",
			catchUpRoute("github", "      github: {token: t, hook: orgs/acme/hooks/7, api_url: 'https://ghe.example/api/v3'}\n      interval: 1m\n      window: 1d\n"),
			CatchUp{GitHub: &GitHubCatchUp{Token: "t", Owner: "acme", HookID: 7, APIURL: "https://ghe.example/api/v3/"},
				Interval: time.Minute, Window: 24 * time.Hour}},
		{"Stripe looks back 30 days by default",
			catchUpRoute("stripe", "      stripe: {api_key: '${SK}'}\n"),
			CatchUp{Stripe: &StripeCatchUp{APIKey: "sk_test_x", APIURL: "https://api.stripe.com"},
				Interval: 5 * time.Minute, Window: 30 * 24 * time.Hour}},
		{"Stripe events select types",
			catchUpRoute("stripe", "      stripe: {api_key: k, events: [invoice.paid, 'customer.subscription.*']}\n"),
			CatchUp{Stripe: &StripeCatchUp{APIKey: "k", APIURL: "https://api.stripe.com", Events: []string{"invoice.paid", "customer.subscription.*"}},
				Interval: 5 * time.Minute, Window: 30 * 24 * time.Hour}},
		{"a Stripe api_url loses its trailing slash",
			catchUpRoute("stripe", "      stripe: {api_key: k, api_url: 'http://127.0.0.1:9/'}\n      window: 30d\n"),
			CatchUp{Stripe: &StripeCatchUp{APIKey: "k", APIURL: "http://127.0.0.1:9"},
				Interval: 5 * time.Minute, Window: 30 * 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("p.yaml", []byte(tt.yaml), env(map[string]string{"GH": "ghp_x", "SK": "sk_test_x"}))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Routes[0].CatchUp; !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("CatchUp = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseCatchUpErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"both providers are rejected",
			catchUpRoute("github", "      github: {token: t, hook: orgs/a/hooks/1}\n      stripe: {api_key: k}\n"),
			`p.yaml:9: routes[0].catch_up.stripe: set one of github and stripe, not both`},
		{"no provider is rejected",
			catchUpRoute("github", "      interval: 1m\n"),
			`p.yaml:8: routes[0].catch_up: set github or stripe`},
		{"GitHub catch-up needs a github route",
			catchUpRoute("stripe", "      github: {token: t, hook: orgs/a/hooks/1}\n"),
			`p.yaml:8: routes[0].catch_up.github: catch_up.github requires provider github (its event ids are GitHub's delivery ids)`},
		{"Stripe catch-up needs a stripe route",
			catchUpRoute("github", "      stripe: {api_key: k}\n"),
			`p.yaml:8: routes[0].catch_up.stripe: catch_up.stripe requires provider stripe (its event ids are Stripe's event ids)`},
		{"a malformed hook is rejected",
			catchUpRoute("github", "      github: {token: t, hook: acme/shop/42}\n"),
			`p.yaml:8: routes[0].catch_up.github.hook: hook "acme/shop/42": want repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID`},
		{"a hook id must be a number",
			catchUpRoute("github", "      github: {token: t, hook: repos/a/b/hooks/x}\n"),
			`p.yaml:8: routes[0].catch_up.github.hook: hook "repos/a/b/hooks/x": the hook id must be a positive integer`},
		{"a missing hook is rejected",
			catchUpRoute("github", "      github: {token: t}\n"),
			`p.yaml:8: routes[0].catch_up.github.hook: missing; want repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID`},
		{"a missing token is rejected",
			catchUpRoute("github", "      github: {hook: orgs/a/hooks/1}\n"),
			`p.yaml:8: routes[0].catch_up.github.token: missing`},
		{"an empty api_key is rejected without quoting it",
			catchUpRoute("stripe", "      stripe: {api_key: '${SK}'}\n"),
			`p.yaml:8: routes[0].catch_up.stripe.api_key: is empty`},
		{"a window longer than GitHub keeps deliveries is rejected",
			catchUpRoute("github", "      github: {token: t, hook: orgs/a/hooks/1}\n      window: 4d\n"),
			`p.yaml:9: routes[0].catch_up.window: window 96h0m0s is longer than GitHub keeps deliveries (72h0m0s)`},
		{"a window longer than Stripe lists events is rejected",
			catchUpRoute("stripe", "      stripe: {api_key: k}\n      window: 31d\n"),
			`p.yaml:9: routes[0].catch_up.window: window 744h0m0s is longer than Stripe lists events (720h0m0s)`},
		{"a zero interval is rejected",
			catchUpRoute("stripe", "      stripe: {api_key: k}\n      interval: 0s\n"),
			`p.yaml:9: routes[0].catch_up.interval: must be greater than 0`},
		{"a relative api_url is rejected",
			catchUpRoute("stripe", "      stripe: {api_key: k, api_url: /v1}\n"),
			`p.yaml:8: routes[0].catch_up.stripe.api_url: URL "/v1" must be absolute http or https`},
		{"a malformed event type is rejected",
			catchUpRoute("stripe", "      stripe: {api_key: k, events: [invoice.paid, 'invoice*']}\n"),
			`p.yaml:8: routes[0].catch_up.stripe.events[1]: invalid event type "invoice*": want a name such as invoice.paid, a group such as invoice.*, or *`},
		{"an unknown key is rejected",
			catchUpRoute("stripe", "      stripe: {api_key: k, secret: x}\n"),
			`p.yaml:8: routes[0].catch_up.stripe.secret: unknown key "secret"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("p.yaml", []byte(tt.yaml), env(map[string]string{"SK": ""}))
			var first *Error
			if !errors.As(err, &first) {
				t.Fatalf("Parse() error = %v, want %s", err, tt.want)
			}
			if first.Error() != tt.want {
				t.Errorf("first error:\n got %s\nwant %s\n(all: %v)", first, tt.want, err)
			}
			if strings.Contains(err.Error(), "sk_") {
				t.Errorf("error quotes a key: %v", err)
			}
		})
	}
}

// The example in docs/catch-up.md is a valid policies file.
func TestTheCatchUpDocExampleParses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/catch-up.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/catch-up.md has no yaml block")
	}
	cfg, err := Parse("docs/catch-up.md", []byte(block), env(map[string]string{
		"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_TOKEN": "t", "STRIPE_WEBHOOK_SECRET": "whsec_x", "STRIPE_API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := cfg.Route("github")
	st, _ := cfg.Route("stripe")
	if gh.CatchUp == nil || gh.CatchUp.GitHub.HookID != 123456789 || st.CatchUp == nil || len(st.CatchUp.Stripe.Events) != 2 {
		t.Errorf("catch-up blocks: %+v, %+v", gh.CatchUp, st.CatchUp)
	}
}

func TestStripeCatchUpWithoutEventsWarns(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		events string
		warns  bool
	}{{"", true}, {", events: ['*']", false}, {", events: [invoice.paid]", false}} {
		cfg, err := Parse("p.yaml", []byte(catchUpRoute("stripe", "      stripe: {api_key: k"+tt.events+"}\n")), nil)
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, w := range cfg.Warnings() {
			warned = warned || strings.Contains(w, "catch_up.stripe has no events list")
		}
		if warned != tt.warns {
			t.Errorf("events %q: warned = %v, want %v (%q)", tt.events, warned, tt.warns, cfg.Warnings())
		}
	}
}
