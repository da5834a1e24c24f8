package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// dest is a destination line for the provider tests.
const dest = "    destinations: [{name: a, url: 'http://a'}]\n"

func TestProviderKeysAreCheckedWithTheirLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"meta needs verify_token", "routes:\n  - name: a\n    path: /a\n    provider: meta\n    secret: s\n" + dest,
			`p.yaml:2: routes[0].verify_token: provider meta requires verify_token, the token its subscription handshake presents`},
		{"an empty verify_token is refused", "routes:\n  - name: a\n    path: /a\n    provider: meta\n    secret: s\n    verify_token: ''\n" + dest,
			`p.yaml:6: routes[0].verify_token: verify_token is empty`},
		{"verify_token on a provider without a handshake is refused", "routes:\n  - name: a\n    path: /a\n    provider: github\n    secret: s\n    verify_token: t\n" + dest,
			`p.yaml:6: routes[0].verify_token: provider github has no subscription handshake; remove verify_token`},
		{"twilio needs public_url", "routes:\n  - name: a\n    path: /a\n    provider: twilio\n    secret: s\n" + dest,
			`p.yaml:2: routes[0].public_url: provider twilio signs the URL it calls; set public_url to that URL (scheme, host and path)`},
		{"a public_url with a query is refused at its line", "routes:\n  - name: a\n    path: /a\n    provider: square\n    secret: s\n    public_url: 'https://h.example/a?x=1'\n" + dest,
			`p.yaml:6: routes[0].public_url: provider square: public_url "https://h.example/a?x=1" must not hold a query or fragment (the request's query is appended)`},
		{"public_url on a provider that does not sign the URL is refused", "routes:\n  - name: a\n    path: /a\n    provider: github\n    secret: s\n    public_url: https://h.example/a\n" + dest,
			`p.yaml:6: routes[0].public_url: provider github does not sign the URL; remove public_url`},
		{"a signature block needs provider signature", "routes:\n  - name: a\n    path: /a\n    provider: github\n    secret: s\n    signature: {header: X-Sig}\n" + dest,
			`p.yaml:6: routes[0].signature: signature block requires provider signature`},
		{"provider signature needs a block", "routes:\n  - name: a\n    path: /a\n    provider: signature\n    secret: s\n" + dest,
			`p.yaml:2: routes[0].signature.header: provider signature requires a signature block with at least header`},
		{"an unknown signature key is refused at its line", "routes:\n  - name: a\n    path: /a\n    provider: signature\n    secret: s\n    signature:\n      header: X-Sig\n      hedaer: X\n" + dest,
			`p.yaml:8: routes[0].signature.hedaer: unknown key "hedaer"`},
		{"an unknown placeholder is refused at the block", "routes:\n  - name: a\n    path: /a\n    provider: signature\n    secret: s\n    signature:\n      header: X-Sig\n      signed: '{nonce}.{body}'\n" + dest,
			`p.yaml:7: routes[0].signature: provider signature: signed: unknown placeholder {nonce} (want body, timestamp, id, method, url, decoded_url, header:Name or json:/pointer)`},
		{"{timestamp} without a timestamp is refused", "routes:\n  - name: a\n    path: /a\n    provider: signature\n    secret: s\n    signature: {header: X-Sig, signed: '{timestamp}.{body}'}\n" + dest,
			`p.yaml:6: routes[0].signature: provider signature: {timestamp} in signed needs a timestamp key, header or JSON pointer`},
		{"an unknown algorithm is refused", "routes:\n  - name: a\n    path: /a\n    provider: signature\n    secret: s\n    signature: {header: X-Sig, algorithm: md5}\n" + dest,
			`p.yaml:6: routes[0].signature.algorithm: unknown algorithm "md5" (want one of "sha1", "sha256", "sha512", "token")`},
		{"signing_secret on a provider that signs with its secret is refused", "routes:\n  - name: a\n    path: /a\n    provider: github\n    secret: s\n    signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n" + dest,
			`p.yaml:6: routes[0].signing_secret: provider github signs with its secret and takes no signing_secret; remove it`},
		{"a gitlab signing_secret that is not base64 is refused at its line", "routes:\n  - name: a\n    path: /a\n    provider: gitlab\n    secret: s\n    signing_secret: 'whsec_not base64'\n" + dest,
			`p.yaml:6: routes[0].signing_secret: provider gitlab: the secret is neither whsec_<base64> nor base64`},
		{"a sendgrid secret that is not a key is refused at its line", "routes:\n  - name: a\n    path: /a\n    provider: sendgrid\n    secrets:\n      - bm90IGEga2V5\n" + dest,
			`p.yaml:6: routes[0].secrets[0]: provider sendgrid: the verification key is not a public key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("p.yaml", []byte(tc.yaml), nil)
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", cfg, tc.want)
			}
			var first *Error
			if !errors.As(err, &first) || first.Error() != tc.want {
				t.Fatalf("first error:\n got %v\nwant %s\n(all: %v)", first, tc.want, err)
			}
		})
	}
}

func TestProviderDefaults(t *testing.T) {
	t.Parallel()
	yaml := "routes:\n" +
		"  - {name: meta, path: /meta, provider: meta, secret: s, verify_token: t, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: okta, path: /okta, provider: okta, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: metapost, path: /metapost, provider: meta, secret: s, verify_token: t, methods: [POST], destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: twitch, path: /twitch, provider: twitch, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: linear, path: /linear, provider: linear, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: linear10, path: /linear10, provider: linear, secret: s, tolerance: 10m, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: github, path: /github, provider: github, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: svix, path: /svix, provider: svix, secret: MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: sw, path: /sw, provider: standard-webhooks, secret: MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, destinations: [{name: a, url: 'http://a'}]}\n"
	cfg, err := Parse("p.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		route     string
		methods   []string
		tolerance time.Duration
	}{
		{"meta", []string{"GET", "POST"}, 5 * time.Minute},
		{"okta", []string{"GET", "POST"}, 5 * time.Minute},
		{"metapost", []string{"POST"}, 5 * time.Minute},
		{"twitch", []string{"POST"}, 10 * time.Minute},
		{"linear", []string{"POST"}, time.Minute},
		{"linear10", []string{"POST"}, 10 * time.Minute},
		{"github", []string{"POST"}, 5 * time.Minute},
		{"svix", []string{"POST"}, 5 * time.Minute},
		{"sw", []string{"POST"}, 5 * time.Minute},
	} {
		r, _ := cfg.Route(tc.route)
		if !slices.Equal(r.Methods, tc.methods) || r.Tolerance != tc.tolerance {
			t.Errorf("route %s: methods %v tolerance %v, want %v %v", tc.route, r.Methods, r.Tolerance, tc.methods, tc.tolerance)
		}
	}
}

func TestTimestampedPresetsWarnWhenRetriesOutliveTheirSignature(t *testing.T) {
	t.Parallel()
	yaml := "routes:\n" +
		"  - {name: zoom, path: /zoom, provider: zoom, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: gitea, path: /gitea, provider: gitea, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: gitlab, path: /gitlab, provider: gitlab, secret: s, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - {name: gitlabsigned, path: /gitlabsigned, provider: gitlab, secret: s, signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, destinations: [{name: a, url: 'http://a'}]}\n" +
		"  - name: acme\n    path: /acme\n    provider: signature\n    secret: s\n    signature: {header: X-Sig, timestamp_header: X-Ts, signed: '{timestamp}.{body}'}\n" + dest
	cfg, err := Parse("p.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings(), "\n")
	for _, want := range []string{`route "zoom": destination "a": provider zoom signatures expire`, `route "acme": destination "a": provider signature signatures expire`,
		`route "gitlabsigned": destination "a": provider gitlab signatures expire`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	for _, route := range []string{`"gitea"`, `"gitlab"`} {
		if strings.Contains(w, route) {
			t.Errorf("%s signs no timestamp but was warned about:\n%s", route, w)
		}
	}
	r, _ := cfg.Route("gitlabsigned")
	if got := r.ProviderConfig().SigningSecret; got != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Errorf("route gitlabsigned: the verifier's signing secret is %q", got)
	}
}
