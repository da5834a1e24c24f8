package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// readyz asks jethook's /readyz, giving up after within. It returns the
// status and, for a 503, the reason.
func (p *process) readyz(within time.Duration) (int, string, error) {
	client := &http.Client{Timeout: within}
	resp, err := client.Get("http://" + p.admin + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var e struct{ Reason, Message string }
	if resp.StatusCode != http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&e)
	}
	return resp.StatusCode, e.Reason, nil
}

// readyzPatience is how long a test waits for one answer of /readyz: its
// own bound is 2s, the rest is for a machine busy with the test's load
// (before jethook bounded it, a stalled store kept it past 10s).
const readyzPatience = 5 * time.Second

// awaitReadyz polls /readyz until it answers want, each call within
// readyzPatience, and fails the test after within. It returns the last
// reason and how long the slowest answer took.
func (p *process) awaitReadyz(t *testing.T, want int, within time.Duration) (string, time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var slowest time.Duration
	for {
		start := time.Now()
		code, reason, err := p.readyz(readyzPatience)
		took := time.Since(start)
		slowest = max(slowest, took)
		if err != nil {
			t.Fatalf("/readyz did not answer within %s (its bound is 2s): %v", readyzPatience, err)
		}
		if code == want {
			return reason, slowest
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d (%s), not %d, after %s", code, reason, want, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAFullDiskAnswers503AndRecoversWithoutARestart runs jethook on a
// tmpfs data dir and fills it: webhooks must get 503 and /readyz must say
// why. Webhooks that reach nats-server on a full disk leave its stream
// refusing every later write, which used to take a restart to clear: once
// the disk has room again, jethook must take webhooks and be ready within
// seconds, in the same process. Every webhook acknowledged, before, while
// and after, is delivered.
func TestAFullDiskAnswers503AndRecoversWithoutARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("full disk: skipped with -short")
	}
	dir := testkit.Tmpfs(t, "128m")
	be := newBackend(t, healthy)
	jh := newProcess(t, policies(be.URL, fastRetry), map[string]string{"JETHOOK_DATA_DIR": dir})
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var acked []int
	for n := 1; n <= 20; n++ {
		if a, err := po.once(ctx, n); err != nil || a.status != http.StatusOK {
			t.Fatalf("webhook %d with room on the disk: status %d, err %v", n, a.status, err)
		}
		acked = append(acked, n)
	}
	eventually(t, 15*time.Second, "webhooks posted before the disk filled delivered", func() []int { return be.missing(acked) })

	filler := testkit.FillDisk(t, dir, 0)
	jh.Mark("disk filled")
	// At once, before jethook's monitor (once a second) sees the disk:
	// some of these reach nats-server and fail there.
	const during = 16
	var (
		wg      sync.WaitGroup
		answers = make([]answer, during)
		errs    = make([]error, during)
	)
	for i := range during {
		wg.Go(func() { answers[i], errs[i] = po.once(ctx, 21+i) })
	}
	wg.Wait()
	refused := 0
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Errorf("webhook %d on a full disk: no answer: %v", 21+i, errs[i])
		case a.status == http.StatusOK:
			acked = append(acked, 21+i) // stored in the last free bytes: must be delivered
		case a.status == http.StatusServiceUnavailable && a.retryAfter != "":
			refused++
		default:
			t.Errorf("webhook %d on a full disk: status %d (Retry-After %q), want 503 with Retry-After", 21+i, a.status, a.retryAfter)
		}
	}
	if refused == 0 {
		t.Errorf("none of %d webhooks posted to a full disk got 503", during)
	}
	reason, slowest := jh.awaitReadyz(t, http.StatusServiceUnavailable, 10*time.Second)
	if reason != "disk_full" && reason != "write_error" {
		t.Errorf("/readyz with the disk full: reason %q, want disk_full or write_error", reason)
	}
	if v, err := jh.counter(`jethook_store_refusing{reason="` + reason + `"}`); err != nil || v != 1 {
		t.Errorf("jethook_store_refusing{reason=%q} = %v (%v), want 1", reason, v, err)
	}
	if a, err := po.once(ctx, 100); err != nil || a.status != http.StatusServiceUnavailable {
		t.Errorf("webhook while /readyz says %s: status %d, err %v; want 503", reason, a.status, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	jh.Mark("disk freed")
	// The provider retries until jethook takes it; before, this never
	// ended without a restart.
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	err := po.post(pctx, 101)
	pcancel()
	if err != nil {
		t.Fatalf("jethook did not take webhooks again after the disk had room: %v", err)
	}
	acked = append(acked, 101)
	took := time.Since(freed)
	jh.awaitReadyz(t, http.StatusOK, 30*time.Second)
	ready := time.Since(freed)
	for n := 102; n <= 121; n++ {
		if a, err := po.once(ctx, n); err != nil || a.status != http.StatusOK {
			t.Fatalf("webhook %d after the disk had room: status %d, err %v", n, a.status, err)
		}
		acked = append(acked, n)
	}
	eventually(t, 30*time.Second, "acknowledged webhooks delivered after the disk had room", func() []int { return be.missing(acked) })
	jh.checkAlive()
	if jh.Starts() != 1 {
		t.Errorf("jethook was started %d times", jh.Starts())
	}
	log, _ := os.ReadFile(jh.LogPath)
	t.Logf("full disk: %d of %d webhooks refused with 503, /readyz said %q (slowest answer %s); JetStream restarted to clear a write error: %v",
		refused, during, reason, slowest.Round(time.Millisecond), strings.Contains(string(log), "restarting the embedded JetStream"))
	t.Logf("disk freed: first webhook taken after %s, /readyz 200 after %s; all %d acknowledged delivered",
		took.Round(time.Millisecond), ready.Round(time.Millisecond), len(acked))
}

// quotaPolicies has two routes to the backend: busy, and kept, whose
// destination the test pauses.
func quotaPolicies(backendURL string) string {
	return fmt.Sprintf(`
defaults:
  retry: %s
  timeout: 500ms
routes:
  - name: busy
    path: /hooks/busy
    provider: none
    destinations:
      - {name: app, url: "%s/hook", concurrency: 16, breaker: {failures: 0}, slow_start: 0s}
  - name: kept
    path: /hooks/kept
    provider: none
    destinations:
      - {name: app, url: "%s/hook", concurrency: 16, breaker: {failures: 0}, slow_start: 0s}
`, fastRetry, backendURL, backendURL)
}

// TestTheStoreLimitPurgesDeliveredWebhooksAndKeepsUndeliveredOnes gives
// jethook a small JETHOOK_STORE_MAX_BYTES and posts three times as many
// delivered webhooks as it holds: every one must be accepted, the oldest
// delivered ones making room, while the webhooks of a paused destination
// are all kept and delivered once it resumes.
func TestTheStoreLimitPurgesDeliveredWebhooksAndKeepsUndeliveredOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("store limit: skipped with -short")
	}
	const (
		limit = 4 << 20
		pad   = 4 << 10
		kept  = 50
		busy  = 3 * limit / pad
	)
	be := newBackend(t, healthy)
	jh := newProcess(t, quotaPolicies(be.URL), map[string]string{"JETHOOK_STORE_MAX_BYTES": "4MiB"})
	jh.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := func(action string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+jh.admin+"/v1/destinations/kept/app/"+action, nil)
		req.Header.Set("Authorization", "Bearer e2e-admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s kept/app: %s", action, resp.Status)
		}
	}
	admin("pause")

	// Webhooks 1..kept go to the paused destination, kept+1.. to busy.
	poKept, poBusy := newPoster(jh.url("/hooks/kept"), t.Name()), newPoster(jh.url("/hooks/busy"), t.Name())
	poKept.pad, poBusy.pad = pad, pad
	var keptNs, busyNs []int
	for n := 1; n <= kept; n++ {
		if err := poKept.post(ctx, n); err != nil {
			t.Fatal(err)
		}
		keptNs = append(keptNs, n)
	}
	next := make(chan int)
	go func() {
		defer close(next)
		for n := kept + 1; n <= kept+busy; n++ {
			next <- n
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for n := range next {
				if err := poBusy.post(ctx, n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a delivered webhook past the store's limit was never taken: %v", err)
	}
	for n := kept + 1; n <= kept+busy; n++ {
		busyNs = append(busyNs, n)
	}
	eventually(t, 60*time.Second, "webhooks to busy delivered", func() []int { return be.missing(busyNs) })

	purged, err := jh.counter("jethook_store_purged_total")
	if err != nil {
		t.Fatal(err)
	}
	used, _ := jh.counter("jethook_store_used_bytes")
	limitSeen, _ := jh.counter("jethook_store_limit_bytes")
	if purged == 0 || limitSeen != limit || used > limit {
		t.Errorf("after %d webhooks of %d bytes: purged %v, used %v of %v; want some purged and the store within its %d-byte limit",
			busy, pad, purged, used, limitSeen, limit)
	}
	if got := be.unattempted(keptNs); len(got) != kept {
		t.Errorf("the paused destination was sent %d webhooks", kept-len(got))
	}
	_, failures := poBusy.stats()
	admin("resume")
	eventually(t, 30*time.Second, "webhooks kept for the paused destination delivered once it resumed", func() []int { return be.missing(keptNs) })
	be.checkIDs(t, poKept.ackedIDs())
	be.checkIDs(t, poBusy.ackedIDs())
	t.Logf("limit 4 MiB: %d webhooks of %d bytes to busy all taken (refused tries %v), %v purged, store at %v bytes; all %d kept for a paused destination delivered after it resumed",
		busy, pad, failures, purged, used, kept)
}
