package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
)

const adminToken = "cli-test-token"

// opsConfig is the policies file of the operations tests, apptest's
// FanOut with its destinations on the rig's one backend: BACKEND becomes
// the backend's URL when the file is written.
var opsConfig = strings.NewReplacer("${APP}/hook", "BACKEND/app", "${AUDIT}/hook", "BACKEND/audit").Replace(apptest.FanOut)

// opsRig is jethook assembled as Serve assembles it (apptest.Start),
// with its public listener (the ingress and pull destinations) and admin
// API on test servers, reloading from a policies file, and a backend that
// answers each path with the status in the X-Status-<path> header.
type opsRig struct {
	t       *testing.T
	config  string // path of the policies file
	backend *httptest.Server
	ingress *httptest.Server
	admin   *httptest.Server
	client  *adminClient
	jethook *apptest.Rig
	mu      sync.Mutex
	hits    map[string]int // per path and event id: "/app sha256:…"
}

func newOpsRig(t *testing.T) *opsRig {
	t.Helper()
	r := &opsRig{t: t, hits: map[string]int{}}
	r.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.hits[req.URL.Path+" "+req.Header.Get("X-Webhook-Id")]++
		r.mu.Unlock()
		code := 200
		if v := req.Header.Get("X-Status-" + strings.TrimPrefix(req.URL.Path, "/")); v != "" {
			code, _ = strconv.Atoi(v)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.backend.Close)
	r.config = filepath.Join(t.TempDir(), "policies.yaml")
	r.write(opsConfig)
	s := Settings{Config: r.config, Retention: 72 * time.Hour}
	cfg, err := loadConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	r.jethook = apptest.Start(t, cfg, app.Options{
		Load:       func() (*policy.Config, error) { return loadConfig(s) },
		AdminToken: adminToken,
		PublicHost: "hooks.example.com",
	})
	r.ingress, r.admin = r.jethook.Public, r.jethook.Admin
	r.client = adminFromEnv(func(k string) string {
		return map[string]string{"JETHOOK_ADMIN_URL": r.admin.URL, "JETHOOK_ADMIN_TOKEN": adminToken}[k]
	})
	return r
}

// write replaces the policies file; BACKEND becomes the backend's URL.
func (r *opsRig) write(yaml string) {
	r.t.Helper()
	if err := os.WriteFile(r.config, []byte(strings.ReplaceAll(yaml, "BACKEND", r.backend.URL)), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// post sends a webhook to path with the given X-Status-* headers and
// returns the ingress status and the event id.
func (r *opsRig) post(path, body string, statuses map[string]string) (int, string) {
	r.t.Helper()
	header := map[string]string{}
	for k, v := range statuses {
		header["X-Status-"+k] = v
	}
	return r.jethook.Post(r.t, path, body, header)
}

// pull leases up to max webhooks of route shop's pull destination dest,
// whose token is laptopToken, waiting up to a second for the first.
func (r *opsRig) pull(dest string, max int) []pulled {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/pull/shop/%s?max=%d&wait=1s", r.ingress.URL, dest, max), nil)
	req.Header.Set("Authorization", "Bearer "+laptopToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Webhooks []pulled }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("pull %s: %d %v", dest, resp.StatusCode, err)
	}
	return out.Webhooks
}

func (r *opsRig) count(path, eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path+" "+eventID]
}

// run runs a command function against the rig's admin API.
func (r *opsRig) run(cmd func(context.Context, *adminClient, []string, io.Writer) error, args ...string) (string, error) {
	r.t.Helper()
	var out strings.Builder
	err := cmd(context.Background(), r.client, args, &out)
	return out.String(), err
}

func (r *opsRig) deadLetterCount() int {
	var c struct{ Count int }
	if err := r.client.call(context.Background(), http.MethodGet, "/v1/deadletters/count", nil, nil, &c); err != nil {
		r.t.Fatal(err)
	}
	return c.Count
}

func eventually(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, msg, cond)
}
