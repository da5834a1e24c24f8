package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"

	"github.com/nats-io/nats-server/v2/server"
)

// startNATS runs a JetStream nats-server in the test process on a fixed
// loopback port and store directory, so a second one can take its place.
// Its max_payload is 8 MiB, as jethook's embedded server has: with the
// stock 1 MiB, serve refuses a route with the default 5 MiB max_body.
func startNATS(t *testing.T, port int, storeDir string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		ServerName: "e2e",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		MaxPayload: 8 << 20,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatalf("nats-server on port %d did not start", port)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// TestStoreOutageAnswers503AndRecovers stops the external nats-server
// under a running jethook: ingress must answer 503, never 2xx, within its
// publish timeout; when a server is back on the same port and files,
// jethook reconnects by itself and every webhook it acknowledged, before
// and after, is delivered.
func TestStoreOutageAnswers503AndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("store outage: skipped with -short")
	}
	const (
		publishTimeout = 5 * time.Second // store.Options.PublishTimeout's default
		answerWithin   = 10 * time.Second
		before, during = 10, 8
	)
	port, storeDir := testkit.FreePort(t), t.TempDir()
	ns := startNATS(t, port, storeDir)
	be := newBackend(t, healthy)
	jh := newProcess(t, policies(be.URL, fastRetry), map[string]string{"JETHOOK_NATS_URL": fmt.Sprintf("nats://127.0.0.1:%d", port)})
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var acked []int
	for i := 1; i <= before; i++ {
		a, err := po.once(ctx, i)
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("webhook %d with the store up: status %d, err %v", i, a.status, err)
		}
		acked = append(acked, i)
	}
	eventually(t, 15*time.Second, "webhooks posted before the outage delivered", func() []int { return be.missing(acked) })

	ns.Shutdown()
	ns.WaitForShutdown()
	jh.Mark("nats-server stopped")
	outage := time.Now()
	var (
		wg      sync.WaitGroup
		answers = make([]answer, during)
		errs    = make([]error, during)
	)
	for i := range during {
		wg.Go(func() { answers[i], errs[i] = po.once(ctx, before+1+i) })
	}
	wg.Wait()
	var slowest time.Duration
	for i, a := range answers {
		n := before + 1 + i
		switch {
		case errs[i] != nil:
			t.Errorf("webhook %d during the outage: no answer after %s: %v", n, a.took, errs[i])
		case a.status/100 == 2:
			t.Errorf("webhook %d during the outage: acknowledged (%d) with the store down", n, a.status)
		case a.status != http.StatusServiceUnavailable:
			t.Errorf("webhook %d during the outage: status %d, want 503", n, a.status)
		case a.retryAfter == "":
			t.Errorf("webhook %d during the outage: 503 without Retry-After", n)
		}
		if a.took > answerWithin {
			t.Errorf("webhook %d during the outage: answered after %s, want under %s (publish timeout %s)", n, a.took, answerWithin, publishTimeout)
		}
		slowest = max(slowest, a.took)
	}
	jh.checkAlive()

	startNATS(t, port, storeDir)
	jh.Mark("nats-server restarted")
	back := time.Now()
	// The first webhook after the restart is posted until it is acknowledged:
	// jethook has to notice the server is back (nats.go reconnects every 2 s).
	probe := before + during + 1
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	err := po.post(pctx, probe)
	pcancel()
	if err != nil {
		t.Fatalf("jethook did not recover after the store came back: %v", err)
	}
	recovered := time.Since(back)
	acked = append(acked, probe)
	for i := probe + 1; i <= probe+before; i++ {
		a, err := po.once(ctx, i)
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("webhook %d after the store came back: status %d, err %v", i, a.status, err)
		}
		acked = append(acked, i)
	}
	eventually(t, 30*time.Second, "acknowledged webhooks delivered after the outage", func() []int { return be.missing(acked) })

	// A 503'd publish may still have reached the server from the client's
	// reconnect buffer: delivered though never acknowledged, which is
	// allowed (the provider's retry dedups on the event id).
	var rejected []int
	for i := range during {
		rejected = append(rejected, before+1+i)
	}
	late := during - len(be.missing(rejected))
	_, failures := po.stats()
	rep := be.report(probe + before)
	t.Logf("outage: %d posts answered in at most %s; store back after %s, first ack %s later; failed tries while reconnecting %v",
		during, slowest.Round(time.Millisecond), back.Sub(outage).Round(time.Millisecond), recovered.Round(time.Millisecond), failures)
	t.Logf("delivered: all %d acknowledged; %d of the %d refused during the outage arrived anyway (so far); %d delivered more than once",
		len(acked), late, during, rep.duplicates)
	if len(rep.bad) > 0 {
		t.Errorf("backend got %d requests it could not attribute, first: %s", len(rep.bad), rep.bad[0])
	}
}
