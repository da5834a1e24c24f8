package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/childproc"
)

// pullToken is the pull destination's token in pullPolicies.
const pullToken = "e2e-pull-token-0123456789abcdef0123456789"

// pullPolicies is one route, /hooks/laptop, whose one destination is
// pulled: a client has 5 s to settle each webhook it leases.
func pullPolicies() string {
	return fmt.Sprintf(`
defaults:
  retry: %s
routes:
  - name: laptop
    path: /hooks/laptop
    provider: none
    destinations:
      - name: dev
        pull: {token: %q}
        timeout: 5s
`, fastRetry, pullToken)
}

// listenProcess is one `jethook listen` from a jethook to a local URL,
// restarted with the same arguments; every run appends to one log file.
type listenProcess struct {
	*childproc.Process
	t *testing.T
}

func newListenProcess(t *testing.T, from, to string, args ...string) *listenProcess {
	t.Helper()
	l := &listenProcess{t: t, Process: &childproc.Process{
		Bin:     binary(t),
		Args:    append([]string{"listen", "laptop", "-destination", "dev", "-from", from, "-to", to}, args...),
		Env:     childproc.Environ(map[string]string{"JETHOOK_PULL_TOKEN": pullToken}),
		LogPath: filepath.Join(t.TempDir(), "listen.log"),
	}}
	t.Cleanup(func() {
		l.kill()
		if t.Failed() {
			t.Logf("listen log, last lines:\n%s", l.LogTail(30))
		}
	})
	return l
}

func (l *listenProcess) start() {
	l.t.Helper()
	if _, err := l.Start(); err != nil {
		l.t.Fatal(err)
	}
}

// kill sends SIGKILL and waits until the process is gone; it fails the
// test if the listener had exited on its own.
func (l *listenProcess) kill() {
	l.t.Helper()
	if gone, how := l.ExitedOnItsOwn(); gone {
		l.t.Errorf("jethook listen exited on its own (%v)", how)
	}
	l.Kill()
}

// TestListenKilledMidStreamLosesNothing runs `jethook serve` with a pull
// destination and `jethook listen` delivering it to a flaky local app, as
// built binaries, and kills the listener with SIGKILL at random moments
// while webhooks stream in, restarting it each time. Every webhook
// jethook acknowledged reaches the local app at least once, and jethook
// records one delivery per webhook: it acks nothing the app did not
// answer 2xx. Run it at scale with
//
//	JETHOOK_LISTEN_N=2000 JETHOOK_LISTEN_KILLS=6 go test ./e2e/ -run ListenKilled -v
func TestListenKilledMidStreamLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop: skipped with -short")
	}
	n := envInt(t, "JETHOOK_LISTEN_N", 300)
	kills := envInt(t, "JETHOOK_LISTEN_KILLS", 3)
	const workers = 8

	app := newBackend(t, flaky) // 30 % 503, 5 % hang past listen's -timeout
	jh := newProcess(t, pullPolicies(), nil)
	jh.start()
	l := newListenProcess(t, jh.url(""), app.URL+"/hook", "-max", "20", "-timeout", "1s")
	l.start()

	po := newPoster(jh.url("/hooks/laptop"), t.Name())
	pace := time.Duration(kills) * time.Second / time.Duration(n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	posting := po.postInBackground(ctx, n, workers, pace)

	// Kill when the app has taken random numbers of webhooks spread over
	// the run, so kills land while batches are being delivered.
	points := killPoints(kills, n/10, n*7/10)
	all := make([]int, n)
	for i := range all {
		all[i] = i + 1
	}
	midBatch := 0
	for _, at := range points {
		deadline := time.Now().Add(time.Minute)
		for n-len(app.missing(all)) < at {
			if time.Now().After(deadline) {
				t.Fatalf("the app has %d of %d webhooks after a minute; waiting for %d", n-len(app.missing(all)), n, at)
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		if app.snapshot(0).inflight > 0 {
			midBatch++
		}
		l.kill()
		l.start()
	}
	posting.wait(t, "jethook")

	// What the killed listeners held comes back when its lease runs out
	// (5 s) and goes to the listener running now.
	deadline := time.Now().Add(90 * time.Second)
	for missing := app.missing(all); len(missing) > 0; missing = app.missing(all) {
		if time.Now().After(deadline) {
			t.Fatalf("%d webhooks never reached the app: %s", len(missing), sample(missing, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	jh.awaitSettled(t, "laptop", "dev", 30*time.Second)

	r := app.report(n)
	if len(r.bad) > 0 {
		t.Fatalf("the app got requests it could not attribute: %v", r.bad[:min(5, len(r.bad))])
	}
	delivered, err := jh.counter("jethook_delivered_total")
	if err != nil {
		t.Fatal(err)
	}
	// One ack per webhook: a 2xx whose ack died with its listener is
	// delivered again, and only that later 2xx is acked.
	if int(delivered) != n {
		t.Errorf("jethook recorded %v deliveries of %d webhooks", delivered, n)
	}
	t.Logf("%d webhooks, %d kills of the listener (%d with requests open at the app): %d requests to the app, %d webhooks taken more than once (%d extra)",
		n, kills, midBatch, r.attempts, r.duplicates, r.extra)
}
