package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkFile runs jethook check on yaml and returns its output and error.
func checkFile(t *testing.T, yaml string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "check.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runCheck(context.Background(), []string{"-config", file}, &out)
	return out.String(), err
}

// The environment is the process's: these tests set it and do not run in
// parallel.
func TestCheckRefusesADestinationTheEgressRulesRefuse(t *testing.T) {
	t.Setenv("JETHOOK_DATA_DIR", t.TempDir())
	for _, tc := range []struct {
		name, deny, allow, url, want string
	}{
		{"the metadata address by default", "", "", "http://169.254.169.254/latest/meta-data/iam",
			`check.yaml:2: route "a" destination "d": url: egress refused: 169.254.169.254 is in 169.254.0.0/16`},
		{"a name that resolves to a denied range", "127.0.0.0/8,::1", "", "http://localhost:3000/hook",
			`check.yaml:2: route "a" destination "d": url: localhost resolves to `},
		{"an OAuth2 token endpoint on a denied address", "", "", "http://127.0.0.1:3000/hook\n        auth: {oauth2: {token_url: 'http://[fd00:ec2::254]/token', client_id: c, client_secret: s}}",
			`check.yaml:2: route "a" destination "d": auth.oauth2.token_url: egress refused: fd00:ec2::254 is in fd00:ec2::254/128`},
		{"nothing once allowed", "", "169.254.169.254", "http://169.254.169.254/latest/meta-data/iam", ""},
		{"nothing on loopback by default", "", "", "http://localhost:3000/hook", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("JETHOOK_EGRESS_DENY", tc.deny)
			t.Setenv("JETHOOK_EGRESS_ALLOW", tc.allow)
			out, err := checkFile(t, "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: d\n        url: "+tc.url+"\n")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("check: %v", err)
			case tc.want == "" && !strings.Contains(out, "ok, 1 routes"):
				t.Fatalf("check output:\n%s", out)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("check: %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestCheckRefusesABadEgressSetting(t *testing.T) {
	t.Setenv("JETHOOK_EGRESS_DENY", "10.0.0.0/8,metadata")
	_, err := checkFile(t, "routes:\n  - name: a\n    path: /a\n    destinations: [{name: d, url: 'http://127.0.0.1/'}]\n")
	if err == nil || !strings.Contains(err.Error(), `JETHOOK_EGRESS_DENY: "metadata" is neither a CIDR`) {
		t.Fatalf("check: %v", err)
	}
}

func TestCheckLoadsTheClientCertificateAndNamesTheFileItCannotRead(t *testing.T) {
	t.Setenv("JETHOOK_DATA_DIR", t.TempDir())
	missing := filepath.Join(t.TempDir(), "client.pem")
	_, err := checkFile(t, "routes:\n  - name: a\n    path: /a\n    destinations:\n      - name: d\n        url: https://127.0.0.1/\n        auth: {tls: {cert: "+missing+", key: "+missing+"}}\n")
	if err == nil || !strings.Contains(err.Error(), `check.yaml:2: route "a" destination "d": auth.tls: `) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("check: %v", err)
	}
}

// What check prints for a valid file with every credential, and what it
// says of an invalid one, shows none of them.
func TestCheckShowsNoCredential(t *testing.T) {
	secrets := map[string]string{"J_KEY": "key-51c0aa", "J_PASS": "pass-8d2e41", "J_TOKEN": "tok-09b7ce",
		"J_CLIENT": "client-3f7d12", "J_SIGN": "whsec_Y2hlY2stc2lnbmluZy1rZXk="}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("JETHOOK_DATA_DIR", t.TempDir())
	valid := `routes:
  - name: a
    path: /a
    destinations:
      - {name: h, url: "http://user:${J_PASS}@127.0.0.1/h?token=${J_TOKEN}", resign: {secret: "${J_SIGN}"}}
      - {name: k, url: "http://127.0.0.1/k", auth: {headers: {X-Api-Key: "${J_KEY}"}}}
      - {name: b, url: "http://127.0.0.1/b", auth: {basic: {username: u, password: "${J_PASS}"}}}
      - {name: t, url: "http://127.0.0.1/t", auth: {bearer: "${J_TOKEN}"}}
      - {name: o, url: "http://127.0.0.1/o", auth: {oauth2: {token_url: "https://id.example/token", client_id: c, client_secret: "${J_CLIENT}"}}}
`
	out, err := checkFile(t, valid)
	if err != nil {
		t.Fatal(err)
	}
	invalid := strings.ReplaceAll(valid, `{name: t, url: "http://127.0.0.1/t", auth: {bearer: "${J_TOKEN}"}}`,
		`{name: t, url: "http://127.0.0.1/t", auth: {bearer: "${J_TOKEN}", basic: {username: "${J_KEY}", password: "${J_PASS}"}, headers: {"${J_CLIENT}": x}}}`)
	_, err = checkFile(t, invalid)
	if err == nil {
		t.Fatal("the invalid file passed")
	}
	for name, v := range secrets {
		if strings.Contains(out, v) || strings.Contains(err.Error(), v) {
			t.Errorf("%s shows in check's output or error:\n%s\n%v", name, out, err)
		}
	}
}
