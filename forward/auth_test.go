package forward_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/egress"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// withDestination is fastRetry with the app destination's flow mapping
// extended by keys.
func withDestination(t *testing.T, keys string) string {
	return edit(t, fastRetry, `{name: app, url: "${BACKEND}/hook"}`, `{name: app, url: "${BACKEND}/hook", `+keys+`}`)
}

// attemptLog is the attempt log of event id, as `jethook events show`
// reads it.
func (r *rig) attemptLog(id string) []store.Attempt {
	r.t.Helper()
	as, err := r.store.Attempts(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return as
}

func TestStaticHeadersBasicAndBearerReachTheBackendInPlaceOfTheProvidersOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, keys, header, want string
	}{
		{"a static header", `auth: {headers: {X-Api-Key: "${KEY}"}}`, "X-Api-Key", "k-3c1f9a"},
		{"basic", `auth: {basic: {username: jethook, password: "${PASSWORD}"}}`, "Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("jethook:p-77e0b2"))},
		{"bearer", `auth: {bearer: "${TOKEN}"}`, "Authorization", "Bearer t-5a9d41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t, status(http.StatusOK))
			env := map[string]string{"BACKEND": b.URL}
			for k, v := range map[string]string{"KEY": "k-3c1f9a", "PASSWORD": "p-77e0b2", "TOKEN": "t-5a9d41"} {
				env[k] = v
			}
			r := newRig(t, apptest.Config(t, withDestination(t, tc.keys), env), store.Options{})
			// What a sender sent under the same names does not reach the
			// backend: the destination's credentials replace it.
			r.send(http.Header{"X-Api-Key": {"from-the-sender"}, "Authorization": {"Bearer from-the-sender"}}, `{"a":1}`)
			eventually(t, "a delivery", func() bool { return b.count() == 1 })
			h := b.all()[0].header
			if got := h.Values(tc.header); len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s = %q, want %q", tc.header, got, tc.want)
			}
		})
	}
}

func TestADestinationSignedWithTwoSecretsVerifiesWithEitherDuringAKeyChange(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1hcHA="
	b := newBackend(t, status(http.StatusOK))
	yaml := withDestination(t, `resign: {secrets: ["${NEW}", "${OLD}"]}`)
	r := newRig(t, apptest.Config(t, yaml, map[string]string{"BACKEND": b.URL, "NEW": newSecret, "OLD": oldSecret}), store.Options{})
	r.send(nil, `{"order":42}`)
	eventually(t, "a delivery", func() bool { return b.count() == 1 })
	got := b.all()[0]
	// The official library, as a backend on either side of the change
	// would use it; and a third key that signed nothing must fail.
	for _, tc := range []struct {
		secret string
		ok     bool
	}{{oldSecret, true}, {newSecret, true}, {"whsec_YW5vdGhlciBrZXkgZW50aXJlbHk=", false}} {
		wh, err := standardwebhooks.NewWebhook(tc.secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); (err == nil) != tc.ok {
			t.Errorf("verify with %s…: %v, want ok=%v", tc.secret[:10], err, tc.ok)
		}
	}
	if sigs := strings.Fields(got.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Errorf("webhook-signature has %d signatures, want 2", len(sigs))
	}
}

// refuseLoopback has the rig refuse loopback addresses as it refuses the
// cloud metadata ranges, so that "localhost" stands for a name that
// resolves, at connection time, to an address the rules refuse: a literal
// refused address is refused when the configuration is loaded already.
func refuseLoopback(o *app.Options) {
	o.Egress = egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, nil)
}

// refusedLoopback reports whether err's text is the rules' refusal of a
// loopback address, whichever of localhost's addresses was dialled.
func refusedLoopback(text string) bool {
	return strings.Contains(text, "egress refused: ") &&
		(strings.Contains(text, " is in 127.0.0.0/8") || strings.Contains(text, " is in ::1/128"))
}

func TestADestinationWhoseNameResolvesToARefusedAddressIsRefusedAtEveryAttempt(t *testing.T) {
	t.Parallel()
	cfg := apptest.Config(t, fastRetry, map[string]string{"BACKEND": "http://localhost:9/latest/meta-data"})
	r := newRig(t, cfg, store.Options{}, refuseLoopback)
	start := time.Now()
	id := r.send(nil, `{"a":1}`)
	eventually(t, "a dead letter", func() bool { return len(r.deadLetters()) == 1 })
	dl := r.deadLetters()[0]
	if dl.Reason != "permanent" || dl.Attempts != 1 || !refusedLoopback(dl.LastError) {
		t.Errorf("dead letter: reason %q, %d attempts, error %q", dl.Reason, dl.Attempts, dl.LastError)
	}
	// Refused before connecting, not after a connect timeout.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	eventually(t, "the attempt logged", func() bool { return len(r.attemptLog(id)) == 1 })
	if a := r.attemptLog(id)[0]; !refusedLoopback(a.Error) || a.Outcome != "permanent" {
		t.Errorf("attempt log: outcome %q, error %q", a.Outcome, a.Error)
	}
	// A second event is refused too: the rules hold at every attempt.
	r.send(nil, `{"a":2}`)
	eventually(t, "a second dead letter", func() bool { return len(r.deadLetters()) == 2 })
}

// adminGet reads path from the rig's admin listener (API or dashboard).
func (r *rig) adminGet(path, token string) string {
	r.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	r.app.Admin.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		r.t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	body, _ := io.ReadAll(w.Body)
	return string(body)
}

// Every credential of every mode goes through failures that end up in
// logs, the attempt log, dead letters, /v1/status, events and the
// dashboard; none of them may show one.
func TestNoCredentialShowsInLogsStatusEventsMetricsOrTheDashboard(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"KEY": "key-9f3b61d2", "PASSWORD": "pw-04c8e7aa", "TOKEN": "bearer-6d21f0c3",
		"CLIENT_SECRET": "cs-b8e2a917", "SIGNING": "whsec_c2lnbmluZy1rZXktZm9yLWxlYWstdGVzdA==",
	}
	// The backend refuses everything (a dead letter with the last error);
	// the token endpoint refuses the client and echoes what it was sent.
	b := newBackend(t, status(http.StatusUnauthorized))
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"got %s %s"}`, r.Header.Get("Authorization"), body)
	}))
	t.Cleanup(tokenSrv.Close)
	yaml := `
defaults:
  retry: {backoff: fixed, delay: 20ms, jitter: none, max_attempts: 2, max_age: 1h}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: headers, url: "${BACKEND}/h", auth: {headers: {X-Api-Key: "${KEY}"}}, resign: {secret: "${SIGNING}"}}
      - {name: basic, url: "${BACKEND}/b", auth: {basic: {username: jethook, password: "${PASSWORD}"}}}
      - {name: bearer, url: "${BACKEND}/t", auth: {bearer: "${TOKEN}"}}
      - {name: oauth, url: "${BACKEND}/o", auth: {oauth2: {token_url: "${TOKEN_URL}/token", client_id: jethook, client_secret: "${CLIENT_SECRET}"}}}
`
	env := map[string]string{"BACKEND": b.URL, "TOKEN_URL": tokenSrv.URL}
	for k, v := range secrets {
		env[k] = v
	}
	logs := &testkit.LogBuffer{}
	const adminToken = "admin-token-for-the-leak-test-0123456789"
	r := newRig(t, apptest.Config(t, yaml, env), store.Options{}, func(o *app.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.AdminToken = adminToken
	})
	id := r.send(nil, `{"a":1}`)
	eventually(t, "every destination given up", func() bool { return len(r.deadLetters()) == 4 })

	var outputs strings.Builder
	outputs.WriteString(logs.String())
	for _, a := range r.attemptLog(id) {
		fmt.Fprintf(&outputs, "%+v\n", a)
	}
	for _, dl := range r.deadLetters() {
		j, _ := json.Marshal(dl)
		outputs.Write(j)
	}
	fmt.Fprintf(&outputs, "%+v %#v\n", r.cfg, r.cfg) // a config printed by mistake
	j, _ := json.Marshal(r.cfg)
	outputs.Write(j)
	for _, path := range []string{"/v1/status", "/v1/events/" + id, "/v1/deadletters", "/metrics", "/", "/events/" + id, "/deadletters"} {
		outputs.WriteString(r.adminGet(path, adminToken))
	}
	out := outputs.String()
	for name, secret := range secrets {
		if strings.Contains(out, secret) || strings.Contains(out, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("the secret in %s shows in an output", name)
		}
	}
	// The outputs are the real ones: they name what failed.
	for _, want := range []string{`oauth2 token endpoint: status 401, error \"invalid_client\"`, "status 401", "dead-lettered"} {
		if !strings.Contains(out, want) {
			t.Errorf("no output says %q", want)
		}
	}
}
