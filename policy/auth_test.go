package policy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

// authRoute is a route whose one destination has the given keys.
func authRoute(url, keys string) string {
	return "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: a\n        url: '" + url + "'\n" + keys
}

func TestAnAuthBlockDecodesEveryModeWithItsSecretsFromTheEnvironment(t *testing.T) {
	t.Parallel()
	yaml := authRoute("https://app/hook", `        auth:
          headers: {x-api-key: "${KEY}"}
          oauth2:
            token_url: https://id.example/oauth/token
            client_id: jethook
            client_secret: ${CLIENT_SECRET}
            scopes: [hooks.write]
            params: {audience: "https://app"}
          tls: {cert: /etc/jethook/client.pem, key: /etc/jethook/client-key.pem, ca: /etc/jethook/ca.pem}
        resign: {secrets: ["${NEW}", "${OLD}"]}
`)
	cfg, err := Parse("p.yaml", []byte(yaml), env(map[string]string{"KEY": "k1", "CLIENT_SECRET": "cs1",
		"NEW": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "OLD": "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1hcHA="}))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Routes[0].Destinations[0]
	want := &Auth{
		Headers: map[string]Secret{"X-Api-Key": "k1"},
		OAuth2: &OAuth2{TokenURL: "https://id.example/oauth/token", ClientID: "jethook", ClientSecret: "cs1",
			Scopes: []string{"hooks.write"}, Params: map[string]string{"audience": "https://app"}},
		TLS: &TLS{Cert: "/etc/jethook/client.pem", Key: "/etc/jethook/client-key.pem", CA: "/etc/jethook/ca.pem"},
	}
	if !reflect.DeepEqual(d.Auth, want) {
		t.Errorf("auth = %#v\nwant %#v", *d.Auth, *want)
	}
	if got := d.Resign.Secrets; len(got) != 2 || string(got[0]) != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Errorf("resign secrets: %d, first wrong", len(got))
	}
}

func TestAnAuthBlockThatCannotWorkIsRefusedAtItsKey(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	vars := map[string]string{"S": secret, "NL": secret + "\n"}
	for _, tc := range []struct{ name, url, keys, want string }{
		{"two ways to set Authorization", "http://a", "        auth: {bearer: '${S}', basic: {username: u, password: '${S}'}}\n",
			`p.yaml:7: routes[0].destinations[0].auth: basic and bearer each set Authorization; keep one`},
		{"an Authorization header beside bearer", "http://a", "        auth: {bearer: '${S}', headers: {Authorization: '${S}'}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.headers: Authorization is set by headers and by bearer; keep one`},
		{"a header jethook sets itself", "http://a", "        auth: {headers: {X-Webhook-Id: '${S}'}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.headers.X-Webhook-Id: jethook sets X-Webhook-Id itself; it cannot be an auth header`},
		{"a secret with a newline", "http://a", "        auth: {bearer: '${NL}'}\n",
			`p.yaml:7: routes[0].destinations[0].auth.bearer: has a control character (a newline at the end of a secret file?)`},
		{"an empty password", "http://a", "        auth: {basic: {username: u, password: ''}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.basic.password: is empty`},
		{"credentials in the URL and in auth", "http://u:p@a", "        auth: {bearer: '${S}'}\n",
			`p.yaml:7: routes[0].destinations[0].auth: the destination url carries credentials, which jethook would send as Basic auth, and auth sets Authorization too; keep one`},
		{"oauth2 without its secret", "http://a", "        auth: {oauth2: {token_url: 'https://id/token', client_id: c}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.oauth2.client_secret: missing`},
		{"an oauth2 param jethook sets", "http://a", "        auth: {oauth2: {token_url: 'https://id/token', client_id: c, client_secret: '${S}', params: {scope: x}}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.oauth2.params.scope: jethook sets scope itself`},
		{"a relative token URL", "http://a", "        auth: {oauth2: {token_url: /token, client_id: c, client_secret: '${S}'}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.oauth2.token_url: URL "/token" must be absolute http or https`},
		{"a certificate without its key", "https://a", "        auth: {tls: {cert: /c.pem}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.tls.key: missing; a client certificate needs its key`},
		{"tls on plain http", "http://a", "        auth: {tls: {ca: /ca.pem}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.tls: tls needs an https destination url`},
		{"an unknown mode", "http://a", "        auth: {digest: {username: u}}\n",
			`p.yaml:7: routes[0].destinations[0].auth.digest: unknown key "digest"`},
		{"three signing secrets", "http://a", "        resign: {secrets: [whsec_YQ==, whsec_Yg==, whsec_Yw==]}\n",
			`p.yaml:7: routes[0].destinations[0].resign.secrets[2]: at most two secrets: the new one and the one it replaces`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("p.yaml", []byte(authRoute(tc.url, tc.keys)), env(vars))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the secret")
			}
		})
	}
}

func TestASecretShowsRedactedHoweverItIsPrinted(t *testing.T) {
	t.Parallel()
	const v = "do-not-show-0f3a"
	a := Auth{Bearer: v, Basic: &Basic{Username: "u", Password: v}, Headers: map[string]Secret{"X-Key": v}}
	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %#v %s %q %x", a, a, a, a.Bearer, a.Bearer, a.Bearer)
	fmt.Fprintf(&b, "%v %+v", *a.Basic, a.Headers)
	j, _ := json.Marshal(a)
	b.Write(j)
	h := slog.NewJSONHandler(&b, nil)
	slog.New(h).Info("x", "auth", a, "bearer", a.Bearer)
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "auth", a, "bearer", a.Bearer)
	if strings.Contains(b.String(), v) {
		t.Errorf("a secret shows: %s", b.String())
	}
	if !strings.Contains(b.String(), "[redacted]") {
		t.Errorf("no redaction marker: %s", b.String())
	}
}

func TestAllowSourcesTakesCIDRsAndAddresses(t *testing.T) {
	t.Parallel()
	ok := "routes:\n  - name: a\n    path: /a\n    allow_sources: [192.30.252.0/22, 3.18.12.63, '2a0a:a440::/29']\n    destinations: [{name: a, url: 'http://a'}]\n"
	cfg, err := Parse("p.yaml", []byte(ok), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(cfg.Routes[0].AllowSources); got != "[192.30.252.0/22 3.18.12.63/32 2a0a:a440::/29]" {
		t.Errorf("allow_sources = %s", got)
	}
	bad := strings.Replace(ok, "3.18.12.63", "stripe", 1)
	if _, err := Parse("p.yaml", []byte(bad), nil); err == nil || err.Error() != `p.yaml:4: routes[0].allow_sources[1]: "stripe" is neither a CIDR (192.30.252.0/22) nor an address` {
		t.Errorf("err = %v", err)
	}
}
