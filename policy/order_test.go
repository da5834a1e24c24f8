package policy_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/policy"
)

func TestOrderIsDecodedWithItsDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		key        string
		maxBlocked time.Duration
	}{
		{"a key and max_blocked as written", "provider: none\n    destinations:\n      - {name: a, url: 'http://a', order: {key: 'body.key', max_blocked: 10m}}\n",
			"body.key", 10 * time.Minute},
		{"max_blocked defaults to an hour", "provider: none\n    destinations:\n      - {name: a, url: 'http://a', order: {key: 'headers[\"x-id\"]'}}\n",
			`headers["x-id"]`, time.Hour},
		{"key: default is Stripe's object id", "provider: stripe\n    secret: whsec_c2VjcmV0\n    destinations:\n      - {name: a, url: 'http://a', order: {key: default}}\n",
			policy.DefaultKeys["stripe"], time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := policy.Parse("p.yaml", []byte("routes:\n  - name: a\n    path: /a\n    "+tc.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			o := cfg.Routes[0].Destinations[0].Order
			if o == nil || o.Key != tc.key || o.MaxBlocked != tc.maxBlocked {
				t.Fatalf("order %+v, want key %q and max_blocked %v", o, tc.key, tc.maxBlocked)
			}
		})
	}
}

func TestABadOrderNamesFileLineAndKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"a key that does not compile", "      - {name: a, url: 'http://a', order: {key: 'body.'}}\n",
			"p.yaml:5: routes[0].destinations[0].order.key: key does not compile"},
		{"a key that is a boolean", "      - {name: a, url: 'http://a', order: {key: 'body.a == 1'}}\n",
			"p.yaml:5: routes[0].destinations[0].order.key: key must be a string or a number, but gives bool"},
		{"a missing key", "      - {name: a, url: 'http://a', order: {max_blocked: 1h}}\n",
			"p.yaml:5: routes[0].destinations[0].order.key: missing"},
		{"key: default without a provider that has one", "      - {name: a, url: 'http://a', order: {key: default}}\n",
			"p.yaml:5: routes[0].destinations[0].order.key: provider none has no default key (github, shopify, stripe have one)"},
		{"a max_blocked of 0", "      - {name: a, url: 'http://a', order: {key: body.a, max_blocked: 0s}}\n",
			"p.yaml:5: routes[0].destinations[0].order.max_blocked: must be greater than 0"},
		{"an unknown field", "      - {name: a, url: 'http://a', order: {key: body.a, max_block: 1h}}\n",
			"p.yaml:5: routes[0].destinations[0].order.max_block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := policy.Parse("p.yaml", []byte("routes:\n  - name: a\n    path: /a\n    destinations:\n"+tc.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// The providers' default keys give the key of a real-shaped event.
func TestTheDefaultKeysFindTheObjectOfAnEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		header   map[string][]string
		body     string
		want     string
	}{
		{"stripe", nil, `{"id":"evt_1","type":"customer.subscription.updated","data":{"object":{"id":"sub_9","object":"subscription"}}}`, "sub_9"},
		{"shopify", map[string][]string{"X-Shopify-Topic": {"orders/updated"}}, `{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508"}`, "gid://shopify/Order/820982911946154508"},
		{"shopify", map[string][]string{"X-Shopify-Topic": {"products/update"}}, `{"id":632910392,"title":"IPod Nano"}`, "products/632910392"},
		{"github", nil, `{"action":"opened","number":7,"pull_request":{"number":7},"repository":{"full_name":"acme/app"}}`, "acme/app#7"},
		{"github", nil, `{"action":"labeled","issue":{"number":12},"repository":{"full_name":"acme/app"}}`, "acme/app#12"},
		{"github", nil, `{"ref":"refs/heads/main","repository":{"full_name":"acme/app"}}`, "acme/app"},
	} {
		k, err := filter.CompileKey(policy.DefaultKeys[tc.provider])
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Eval(&filter.Event{Header: tc.header, Body: []byte(tc.body)})
		if err != nil || got != tc.want {
			t.Errorf("%s %s: key %q (%v), want %q", tc.provider, tc.body, got, err, tc.want)
		}
	}
}

// Every key docs/ordering.md shows compiles.
func TestTheDocumentedKeysCompile(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../docs/ordering.md")
	if err != nil {
		t.Fatal(err)
	}
	found := regexp.MustCompile(`key: '(.*)'`).FindAllStringSubmatch(string(text), -1)
	if len(found) < 5 {
		t.Fatalf("only %d keys found in docs/ordering.md", len(found))
	}
	for _, m := range found {
		if _, err := filter.CompileKey(m[1]); err != nil {
			t.Errorf("%s: %v", m[1], err)
		}
	}
}
