package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/provider"
)

func TestCheckListsTheShippedRoutesAndWarnsAboutUnverifiedOnes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", "../policies.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example", "/hooks/example", "http://127.0.0.1:3000/webhooks/example",
		"warning:", "provider none", "ok, 1 routes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The example of a config error in docs/configuration.md, reproduced.
func TestCheckReportsAConfigMistakeWithFileLineAndKey(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/broken.yaml"
	yaml := "defaults:\n  timeout: 10s\nroutes:\n  - name: example\n    path: /hooks/example\n" +
		"    destinations: [{name: app, url: \"http://127.0.0.1:3000/\"}]\n    retires: 3\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runCheck(context.Background(), []string{"-config", file}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `broken.yaml:7: routes[0].retires: unknown key "retires"`) {
		t.Fatalf("err = %v", err)
	}
}

// A file with a dozen different mistakes: check reports every one with the
// file, its line and its key, and exits 1. A broken YAML layout stops the
// parse, so the syntax errors have files of their own; yaml.v3 gives the
// line of the block that holds the mistake (the route with the tab, the
// line before the unclosed flow sequence), and check keeps it.
func TestCheckReportsEveryMistakeOfAFileWithItsLineAndKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string
	}{
		{"testdata/mistakes.yaml", []string{
			`testdata/mistakes.yaml:5: defaults.retry.base: invalid duration "2x"`,
			`testdata/mistakes.yaml:6: defaults.retry.retry_on[0]: status 200 is not an error status (want 400-599)`,
			`testdata/mistakes.yaml:11: routes[0].retires: unknown key "retires"`,
			`testdata/mistakes.yaml:14: routes[1].name: duplicate route name "orders" (first at line 9)`,
			`testdata/mistakes.yaml:19: routes[2].path: duplicate path "/hooks/orders" (first used by route "orders" at line 10)`,
			`testdata/mistakes.yaml:22: routes[3].name: invalid name "billing.v2": use only letters, digits, "_" and "-" (it becomes a NATS subject token)`,
			`testdata/mistakes.yaml:28: routes[4].provider: unknown provider "gogs" (want one of "bitbucket", "calendly", "docusign", "dropbox", "forgejo", "gitea", "github", "gitlab", "hmac", "hubspot", "intercom", "lemonsqueezy", "linear", "mailgun", "meta", "mux", "none", "okta", "paddle", "pagerduty", "postmark", "razorpay", "sendgrid", "sentry", "shopify", "signature", "slack", "square", "standard-webhooks", "stripe", "svix", "twilio", "twitch", "typeform", "vercel", "woocommerce", "zoom")`,
			`testdata/mistakes.yaml:31: routes[5].secret: provider github requires a secret`,
			`testdata/mistakes.yaml:39: routes[6].destinations[0].url: URL "ftp://127.0.0.1/hooks" must be absolute http or https`,
			`testdata/mistakes.yaml:43: routes[7].destinations[0].concurrency: must be at least 1, got -4`,
			`testdata/mistakes.yaml:46: routes[8].timeout: invalid duration "soon"`,
			`testdata/mistakes.yaml:48: routes[8].destinations[0].rate: invalid rate "fast": want N/s, N/m or N/h, e.g. "50/s"`,
			`testdata/mistakes.yaml:54: routes[9].destinations[0].filter: filter does not compile: line 1 column 32: Syntax error: missing ')' at '<EOF>'`,
			`testdata/mistakes.yaml:57: routes[9].destinations[1].filter: filter must be a boolean expression, but gives string (compare it: e.g. body.active == true)`,
		}},
		{"testdata/tabs.yaml", []string{`testdata/tabs.yaml:3: yaml: found a tab character that violates indentation`}},
		{"testdata/unclosed.yaml", []string{`testdata/unclosed.yaml:4: yaml: did not find expected ',' or ']'`}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := Main([]string{"check", "-config", tt.file}, &stdout, &stderr); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout.Len() != 0 {
				t.Errorf("a broken file printed a route table:\n%s", stdout.String())
			}
			want := "jethook check: " + strings.Join(tt.want, "\n") + "\n"
			if stderr.String() != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
			}
		})
	}
}

// A file that leaves every retry setting at its default passes check and
// starts serve; one whose max_age reaches JETHOOK_RETENTION fails both,
// with the same error.
func TestCheckAppliesEveryRuleServeApplies(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/policies.yaml"
	yaml := "routes:\n  - name: example\n    path: /hooks/example\n    provider: none\n" +
		"    destinations: [{name: app, url: \"http://127.0.0.1:3000/\"}]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JETHOOK_RETENTION", "")
	if err := runCheck(context.Background(), []string{"-config", file}, &bytes.Buffer{}); err != nil {
		t.Fatalf("check of a file with the default max_age: %v", err)
	}
	serveForTest(t, func(s *Settings) { s.Config = file })

	t.Setenv("JETHOOK_RETENTION", "24h")
	checkErr := runCheck(context.Background(), []string{"-config", file}, &bytes.Buffer{})
	if checkErr == nil || !strings.Contains(checkErr.Error(), "JETHOOK_RETENTION (24h0m0s)") {
		t.Fatalf("check with JETHOOK_RETENTION=24h: err = %v, want the max_age rule", checkErr)
	}
	s, err := loadSettings(map[string]string{"JETHOOK_CONFIG": file, "JETHOOK_RETENTION": "24h",
		"JETHOOK_DATA_DIR": dir + "/data", "JETHOOK_LISTEN": "127.0.0.1:0", "JETHOOK_ADMIN_LISTEN": "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // ends a serve that wrongly started
	defer cancel()
	if err := Serve(ctx, s, slog.New(slog.DiscardHandler), nil); err == nil || err.Error() != checkErr.Error() {
		t.Fatalf("serve: err = %v, want check's %v", err, checkErr)
	}
}

// In a container 127.0.0.1 is the container: EXAMPLE_APP_URL points the
// shipped route at the app (the Dockerfile says how).
func TestTheShippedRouteDeliversToEXAMPLE_APP_URLWhenSet(t *testing.T) {
	t.Setenv("EXAMPLE_APP_URL", "http://host.docker.internal:3000")
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", "../policies.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "http://host.docker.internal:3000/webhooks/example") {
		t.Errorf("check with EXAMPLE_APP_URL set:\n%s", &out)
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "-e EXAMPLE_APP_URL=http://host.docker.internal:3000") {
		t.Error("the Dockerfile does not say how to point the shipped route at the app")
	}
}

func TestCheckProvidersListsEveryPreset(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-providers", "-config", "/nonexistent.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PROVIDER", "svix", "svix-id header", "meta", "secret, verify_token", "twilio", "secret, public_url",
		"twitch", "10m0s", "okta", "X-Okta-Verification-Challenge", fmt.Sprintf("%d providers", len(provider.Presets()))} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
}

func TestCheckListsADestinationWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/policies.yaml"
	yaml := "routes:\n  - name: example\n    path: /hooks/example\n    provider: none\n" +
		"    destinations: [{name: app, url: \"http://alice:S3cretPass@127.0.0.1:3000/in?token=T0kenValue\"}]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", file}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "http://127.0.0.1:3000/in") || strings.Contains(out.String(), "S3cretPass") ||
		strings.Contains(out.String(), "T0kenValue") {
		t.Errorf("check lists the destination as:\n%s", out.String())
	}
}

// Two configurations that verify less than they seem to get a warning
// from check: a signature whose signed string leaves the body out, and
// re-signing on a route that verifies nothing.
func TestCheckWarnsAboutSignaturesThatProtectLessThanTheySeem(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/footguns.yaml"
	yaml := `routes:
  - name: headeronly
    path: /hooks/headeronly
    provider: signature
    secret: s3cret
    signature: {header: X-Sig, timestamp_header: X-Ts, signed: "{timestamp}"}
    destinations: [{name: app, url: "http://127.0.0.1:3000/"}]
  - name: bodysigned
    path: /hooks/bodysigned
    provider: signature
    secret: s3cret
    signature: {header: X-Sig, timestamp_header: X-Ts, signed: "{timestamp}.{body}"}
    destinations: [{name: app, url: "http://127.0.0.1:3000/"}]
  - name: open
    path: /hooks/open
    provider: none
    destinations:
      - name: signedforbackend
        url: "http://127.0.0.1:3000/"
        resign: {secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
      - name: plain
        url: "http://127.0.0.1:3001/"
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", file}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`route "headeronly": signature.signed has no {body}`,
		`route "open": destination "signedforbackend": resign on provider none`,
	} {
		if !strings.Contains(got, "warning: "+file+":") || !strings.Contains(got, want) {
			t.Errorf("check output lacks a warning %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{`route "bodysigned": signature`, `destination "plain": resign`} {
		if strings.Contains(got, unwanted) {
			t.Errorf("check warned about %q, which is fine:\n%s", unwanted, got)
		}
	}
}

// TestCheckServeAndReloadRefuseABadConfigAlike gives each rule a file
// that breaks it: `jethook check`, serve's start and a reload of a
// running serve refuse it with the same error, which names the file.
func TestCheckServeAndReloadRefuseABadConfigAlike(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	route := func(extra, url string) string {
		return "routes:\n  - name: example\n    path: /hooks/example\n" + extra +
			"    destinations: [{name: app, url: \"" + url + "\"}]\n"
	}
	good := route("", "http://127.0.0.1:3000/")
	cases := []struct{ name, yaml, want string }{
		{"a secret the preset cannot use", route("    provider: svix\n    secret: not-base64!\n", "http://127.0.0.1:3000/"), "secret"},
		{"a retry that outlives the store's retention", "defaults:\n  retry: {max_age: 100h}\n" + good, "JETHOOK_RETENTION"},
		{"a destination at a cloud metadata address", route("", "http://169.254.169.254/"), "169.254.169.254"},
		{"a body the NATS server would not take", route("    max_body: 8MiB\n", "http://127.0.0.1:3000/"), "max_payload"},
		{"a client certificate that does not load", strings.Replace(route("", "https://127.0.0.1:3000/"), "}]",
			", auth: {tls: {cert: \""+junk+"\", key: \""+junk+"\"}}}]", 1), "auth.tls"},
	}
	const token = "check-serve-reload-alike-token"
	settings := func(t *testing.T, file string) Settings {
		s, err := loadSettings(map[string]string{"JETHOOK_CONFIG": file, "JETHOOK_DATA_DIR": t.TempDir(),
			"JETHOOK_LISTEN": "127.0.0.1:0", "JETHOOK_ADMIN_LISTEN": testkit.FreeAddr(t), "JETHOOK_ADMIN_TOKEN": token,
			"JETHOOK_SHUTDOWN_GRACE": "2s"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	write := func(file, yaml string) {
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	running := filepath.Join(dir, "running.yaml")
	write(running, good)
	s := settings(t, running)
	serveForTest(t, func(r *Settings) { *r = s })
	client := adminFromEnv(func(k string) string {
		return map[string]string{"JETHOOK_ADMIN_URL": "http://" + s.AdminListen, "JETHOOK_ADMIN_TOKEN": token}[k]
	})

	for i, tc := range cases {
		file := filepath.Join(dir, fmt.Sprintf("bad%d.yaml", i))
		write(file, tc.yaml)
		checkErr := runCheck(t.Context(), []string{"-config", file}, io.Discard)
		if checkErr == nil || !strings.Contains(checkErr.Error(), tc.want) || !strings.Contains(checkErr.Error(), file) {
			t.Errorf("%s: check: %v, want an error naming %s and %q", tc.name, checkErr, file, tc.want)
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // ends a serve that wrongly started
		serveErr := Serve(ctx, settings(t, file), slog.New(slog.DiscardHandler), nil)
		cancel()
		if serveErr == nil || serveErr.Error() != checkErr.Error() {
			t.Errorf("%s: serve: %v,\nwant check's %v", tc.name, serveErr, checkErr)
		}
		write(running, strings.ReplaceAll(tc.yaml, file, running))
		reloadErr := client.call(t.Context(), http.MethodPost, "/v1/reload", nil, nil, nil)
		if want := strings.ReplaceAll(checkErr.Error(), file, running); reloadErr == nil || !strings.Contains(reloadErr.Error(), want) {
			t.Errorf("%s: reload: %v,\nwant check's %v", tc.name, reloadErr, want)
		}
	}
}
