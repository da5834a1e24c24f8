package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/provider"
)

// catchUpConfig is a Stripe route whose catch-up asks API; without
// CATCHUP it has none.
const catchUpConfig = `
defaults:
  retry: {max_age: 1h}
routes:
  - name: billing
    path: /hooks/billing
    provider: stripe
    secret: whsec_cliCatchUpTest
    destinations: [{name: app, url: "http://127.0.0.1:1/"}]
CATCHUP`

// Serve runs each route's catch-up, reports it in `jethook status`, keeps
// taking webhooks while the provider is down, and a reload that drops the
// block stops it.
func TestServeRunsCatchUpAndStatusShowsIt(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	caught := fmt.Appendf(nil, `{"id":"evt_caught","object":"event","created":%d,"type":"invoice.paid","data":{"object":{}}}`, time.Now().Unix())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if down.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"Something went wrong on Stripe's end."}}`))
			return
		}
		if r.URL.Path == "/v1/events/evt_caught" {
			_, _ = w.Write(caught)
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","url":"/v1/events","has_more":false,"data":[` + string(caught) + `]}`))
	}))
	t.Cleanup(api.Close)
	config := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(catchUp string) {
		if err := os.WriteFile(config, []byte(strings.Replace(catchUpConfig, "CATCHUP", catchUp, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("    catch_up:\n      stripe: {api_key: sk_test_cli, api_url: '" + api.URL + "'}\n      interval: 50ms\n")
	adminAddr := testkit.FreeAddr(t)
	addr := serveForTest(t, func(s *Settings) { s.Config, s.AdminListen, s.AdminToken = config, adminAddr, adminToken })
	client := adminFromEnv(func(k string) string {
		return map[string]string{"JETHOOK_ADMIN_URL": "http://" + adminAddr, "JETHOOK_ADMIN_TOKEN": adminToken}[k]
	})
	statusOut := func() string {
		var out strings.Builder
		if err := status(context.Background(), client, nil, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	row := func() []string {
		for line := range strings.SplitSeq(statusOut(), "\n") {
			if strings.HasPrefix(line, "billing ") && strings.Contains(line, "stripe") {
				return strings.Fields(line)
			}
		}
		return nil
	}

	eventually(t, "status shows the failing catch-up", func() bool {
		f := row()
		return f != nil && strings.Contains(strings.Join(f, " "), "500")
	})
	body := []byte(`{"id":"evt_live","object":"event","created":1,"type":"invoice.paid"}`)
	h := http.Header{"Content-Type": {"application/json"}}
	p, _ := provider.New(provider.Config{Name: provider.NameStripe, Secrets: []string{"whsec_cliCatchUpTest"}})
	if err := p.Sign(&provider.Request{Method: http.MethodPost, Header: h, Body: body}, "whsec_cliCatchUpTest", time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/billing", strings.NewReader(string(body)))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ingress answered %d while the provider is down", resp.StatusCode)
	}

	down.Store(false)
	eventually(t, "status shows the catch-up recovered", func() bool {
		f := row()
		return f != nil && f[len(f)-1] == "-" && f[2] == "1"
	})
	var show strings.Builder
	if err := events(context.Background(), client, []string{"show", "evt_caught"}, &show); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(show.String(), "caught up: fetched from the stripe API") {
		t.Errorf("events show of a caught-up event:\n%s", show.String())
	}

	write("")
	if err := client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if out := statusOut(); strings.Contains(out, "CATCH-UP") {
		t.Errorf("status after a reload without catch_up:\n%s", out)
	}
}
