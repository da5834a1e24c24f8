package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

const leakConfig = `
defaults:
  retry: {backoff: fixed, delay: 100ms, jitter: none, max_attempts: 2, max_age: 1h}
  timeout: 2s
routes:
  - name: plain
    path: /hooks/plain
    provider: none
    destinations:
      - {name: app, url: "http://alice:S3cretPass@%s/x?token=T0kenValue", slow_start: 0s}
      - {name: down, url: "http://bob:S3cretPass@%s/y?token=T0kenValue", slow_start: 0s}
`

// A sender chooses the query string jethook appends to each destination
// URL. One that would break the joined URL (Go's server keeps a "#" in the
// query) must neither stop the delivery nor make jethook show the
// destination's credentials: not in its log, not in /v1/status, not on any
// dashboard page. The unreachable destination shows the same for an
// attempt that fails and a dead letter.
func TestASenderCannotMakeJethookShowADestinationsCredentials(t *testing.T) {
	t.Parallel()
	type got struct{ query, user, pass string }
	var mu sync.Mutex
	var received []got
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		received = append(received, got{r.URL.RawQuery, user, pass})
		mu.Unlock()
	}))
	t.Cleanup(backend.Close)
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, leakConfig, backend.Listener.Addr(), testkit.FreeAddr(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testkit.LogBuffer
	adminAddr := testkit.FreeAddr(t)
	addr, stop := startServeLogging(t, func(s *Settings) {
		s.Config, s.AdminListen, s.AdminToken = config, adminAddr, adminToken
	}, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(stop)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /hooks/plain?a#%%zz HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /hooks/plain?a#%%zz: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	admin := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	var list struct {
		DeadLetters []struct {
			Seq         uint64
			Destination string
		} `json:"dead_letters"`
	}
	testkit.Eventually(t, 15*time.Second, "the app was sent the webhook (or dead-lettered it) and down dead-lettered it", func() bool {
		list.DeadLetters = nil
		if err := json.Unmarshal([]byte(admin("/v1/deadletters?route=plain")), &list); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return len(received) > 0 && len(list.DeadLetters) == 1 || len(list.DeadLetters) == 2
	})

	mu.Lock()
	if len(received) != 1 || received[0] != (got{"token=T0kenValue&a%23%zz", "alice", "S3cretPass"}) {
		t.Errorf("the backend received %+v; want the destination's query, then the sender's with its # escaped, and the URL's credentials as Basic auth", received)
	}
	mu.Unlock()
	shown := map[string]string{
		"the log":          logs.String(),
		"/v1/status":       admin("/v1/status"),
		"the overview":     admin("/"),
		"the event's page": admin("/events/" + ack.ID + "?route=plain"),
		"the dead letters": admin("/deadletters"),
		"/v1/deadletters":  admin("/v1/deadletters"),
		"/v1/events/{id}":  admin("/v1/events/" + ack.ID),
	}
	for _, d := range list.DeadLetters {
		shown["dead letter "+d.Destination] = admin(fmt.Sprintf("/deadletters/%d", d.Seq))
		shown["/v1/deadletters/{seq} "+d.Destination] = admin(fmt.Sprintf("/v1/deadletters/%d", d.Seq))
	}
	for where, text := range shown {
		for _, secret := range []string{"S3cretPass", "T0kenValue"} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s shows %s: …%s…", where, secret, text[max(0, i-200):min(len(text), i+50)])
			}
		}
	}
}
