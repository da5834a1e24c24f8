package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/telemetry/otlptest"
)

// credentials are the destination credentials of the test, each a value
// no output of jethook may hold.
var credentials = map[string]string{
	"APP_API_KEY":         "e2e-key-6a1f03c9",
	"APP_PASSWORD":        "e2e-pass-92d4b7e0",
	"APP_TOKEN":           "e2e-bearer-1c5e8fa2",
	"APP_CLIENT_SECRET":   "e2e-client-47b09d3e",
	"APP_SIGNING_SECRET":  "whsec_ZTJlLXNpZ25pbmcta2V5LW5ldw==",
	"APP_SIGNING_OLD":     "whsec_ZTJlLXNpZ25pbmcta2V5LW9sZA==",
	"APP_URL_CREDENTIALS": "e2e-url-pass-5d8e2b71",
}

// Every credential goes through a delivery, a backend that refuses it, a
// token endpoint that refuses and echoes what it got, dead letters and a
// reload; then every output jethook gave (its log, the admin API, the
// metrics, the dashboard, and the CLI's check, status, events and dlq) is
// searched for each of them.
func TestNoCredentialShowsInAnyOutputOfJethook(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "refused: %s %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(backend.Close)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client",
			"error_description": "got " + r.Header.Get("Authorization") + " and " + string(body)})
	}))
	t.Cleanup(tokens.Close)
	policies := fmt.Sprintf(`
defaults:
  retry: {backoff: fixed, delay: 50ms, jitter: none, max_attempts: 2, max_age: 1h}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: keyed, url: "%[1]s/k", auth: {headers: {X-Api-Key: "${APP_API_KEY}"}}, resign: {secrets: ["${APP_SIGNING_SECRET}", "${APP_SIGNING_OLD}"]}}
      - {name: basic, url: "%[1]s/b", auth: {basic: {username: jethook, password: "${APP_PASSWORD}"}}}
      - {name: bearer, url: "%[1]s/t", auth: {bearer: "${APP_TOKEN}"}}
      - {name: oauth, url: "%[1]s/o", auth: {oauth2: {token_url: "%[2]s/token", client_id: jethook, client_secret: "${APP_CLIENT_SECRET}"}}}
      - {name: inurl, url: "http://jethook:${APP_URL_CREDENTIALS}@%[3]s/u?token=${APP_URL_CREDENTIALS}"}
`, backend.URL, tokens.URL, strings.TrimPrefix(backend.URL, "http://"))
	// Tracing on: the spans are outputs too.
	recv := otlptest.Start(t)
	env := map[string]string{"JETHOOK_LOG_LEVEL": "debug", "OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL, "OTEL_BSP_SCHEDULE_DELAY": "50"}
	for k, v := range credentials {
		env[k] = v
	}
	p := newProcess(t, policies, env)
	p.start()

	resp, err := http.Post(p.url("/hooks/shop"), "application/json", strings.NewReader(`{"order":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var ack struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ack)
	resp.Body.Close()
	if ack.ID == "" {
		t.Fatalf("ingress %d", resp.StatusCode)
	}
	testkit.Eventually(t, 30*time.Second, "five dead letters", func() bool {
		var c struct{ Count int }
		p.adminJSON(t, http.MethodGet, "/v1/deadletters/count", &c)
		return c.Count == 5
	})
	var reload map[string]any
	if code := p.adminJSONBody(t, http.MethodPost, "/v1/reload", "", &reload); code != http.StatusOK {
		t.Fatalf("reload: %d %v", code, reload)
	}

	var out bytes.Buffer
	for _, path := range []string{"/v1/status", "/v1/events/" + ack.ID, "/v1/deadletters", "/metrics", "/", "/events/" + ack.ID, "/deadletters"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.admin+path, nil)
		req.Header.Set("Authorization", "Bearer e2e-admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		out.Write(body)
	}
	cliEnv := append(append([]string(nil), p.Env...), "JETHOOK_ADMIN_URL=http://"+p.admin)
	for _, args := range [][]string{{"check"}, {"status"}, {"events", "show", ack.ID}, {"events", "show", ack.ID, "-json"}, {"dlq", "ls"}, {"dlq", "ls", "-json"}} {
		cmd := exec.Command(p.Bin, args...)
		cmd.Env = cliEnv
		got, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("jethook %s: %v\n%s", strings.Join(args, " "), err, got)
		}
		out.Write(got)
	}
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(log)

	// Every attempt's span (one for each destination refused with 401,
	// two for the token that fails), with their attributes, the ingress
	// span and the dead letters'.
	spans := recv.Await(t, 30*time.Second, "the attempts' spans", func(s []otlptest.Span) bool { return len(clientSpans(s)) >= 6 })
	for _, sp := range spans {
		fmt.Fprintf(&out, "%s %s %v\n", sp.Name, sp.Service, sp.Attributes)
	}

	all := out.String()
	for name, v := range credentials {
		if strings.Contains(all, v) || strings.Contains(all, strings.TrimPrefix(v, "whsec_")) {
			t.Errorf("%s shows in jethook's outputs", name)
		}
	}
	// The outputs are the real ones: they hold what went wrong.
	for _, want := range []string{`oauth2 token endpoint: status 400, error \"invalid_client\"`, "dead-lettered", "keyed", "ROUTE"} {
		if !strings.Contains(all, want) {
			t.Errorf("no output holds %q", want)
		}
	}
}
