package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// ackWait is how long the server waits before it redelivers a message
// jethook fetched and never settled, as when it was killed mid-attempt:
// the destination's timeout (500ms below) plus ackMargin (5s) in
// forward/forward.go. Duplicates caused by a kill have all arrived by then.
const ackWait = 500*time.Millisecond + 5*time.Second

// fastRetry is a fast schedule: a webhook cycles through many
// attempts in a few seconds.
const fastRetry = "{backoff: exponential, base: 50ms, multiplier: 2, max_delay: 500ms, jitter: full, max_attempts: 1000, max_age: 1h}"

// policies is one route, /hooks/crash, with the given retry schedule and
// a 500ms timeout to the backend. The breaker and slow start are off: this
// suite is about kills and outages, and a breaker opened by the flaky
// backend would only add 30 s pauses.
func policies(backendURL, retry string) string {
	return fmt.Sprintf(`
defaults:
  retry: %s
  timeout: 500ms
routes:
  - name: crash
    path: /hooks/crash
    provider: none
    destinations:
      - name: app
        url: %s/hook
        concurrency: 16
        breaker: {failures: 0}
        slow_start: 0s
`, retry, backendURL)
}

// TestKillNineLosesNothing is the kill -9 loop: webhooks are
// posted at concurrency against a flaky backend while jethook is killed
// with SIGKILL at random moments and restarted on the same data directory
// and port. Every webhook jethook acknowledged must reach the backend. Run
// it at scale with
//
//	JETHOOK_CRASH_N=2000 JETHOOK_CRASH_KILLS=5 go test ./e2e/ -run KillNineLoses -v
func TestKillNineLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop: skipped with -short")
	}
	n := envInt(t, "JETHOOK_CRASH_N", 400)
	kills := envInt(t, "JETHOOK_CRASH_KILLS", 3)
	const workers = 16

	be := newBackend(t, flaky)
	jh := newProcess(t, policies(be.URL, fastRetry), nil)
	began := time.Now()
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())

	// Pace the posts so that posting spans every kill, whatever the
	// machine's speed: about 1.5 s of posting per kill.
	pace := time.Duration(kills) * 1500 * time.Millisecond / time.Duration(n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(n)*pace)
	defer cancel()
	posting := po.postInBackground(ctx, n, workers, pace)

	// Kill when the acknowledged count reaches random points spread over
	// the run, plus up to 50 ms, so kills land at any stage of a request.
	points := killPoints(kills, n/20, n*9/10)
	type kill struct {
		acked int
		snap  snapshot
		down  time.Duration
	}
	var done []kill
	var lastKill time.Time
	for _, at := range points {
		posting.reached(at)
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		k := kill{acked: po.ackedCount(), snap: be.snapshot(200 * time.Millisecond)}
		jh.kill()
		lastKill = time.Now()
		jh.start()
		k.down = time.Since(lastKill)
		done = append(done, k)
	}
	acked := posting.wait(t, "jethook")
	postedIn := time.Since(began)

	allIn := be.awaitAll(t, jh, n, lastKill, "the last kill")

	rep := be.report(n)
	if len(rep.bad) > 0 {
		t.Errorf("backend got %d requests it could not attribute, first: %s", len(rep.bad), rep.bad[0])
	}
	be.checkIDs(t, acked)
	dupAcks, failures := po.stats()
	var plausible int
	var kl []string
	for _, k := range done {
		plausible += k.snap.inflight + k.snap.recentOK
		kl = append(kl, fmt.Sprintf("at %d acked: %d in flight, %d delivered in the last 200ms, back in %s",
			k.acked, k.snap.inflight, k.snap.recentOK, k.down.Round(time.Millisecond)))
	}
	t.Logf("%d webhooks, %d kills, %d workers: posted in %s, all delivered %s after the last kill, run took %s",
		n, kills, workers, postedIn.Round(time.Millisecond), allIn.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("kills:\n  %s", strings.Join(kl, "\n  "))
	t.Logf("posts: %d acked (%d of them as duplicates of a post whose answer was lost), failed tries %v",
		len(acked), dupAcks, failures)
	t.Logf("backend: %d attempts, %d webhooks delivered more than once (%d extra deliveries, at most %d for one); "+
		"in flight or delivered in the 200ms before a kill: %d",
		rep.attempts, rep.duplicates, rep.extra, rep.most, plausible)
}

// TestKillNineMidBackoffDeliversAfterRestart kills jethook while every
// webhook is waiting out a retry delay, then brings the backend up and
// restarts jethook: the delays, kept in the consumer's state, must bring
// every webhook back without waiting for the ack wait.
func TestKillNineMidBackoffDeliversAfterRestart(t *testing.T) {
	const n = 50
	be := newBackend(t, down)
	// A fixed 2 s delay without jitter: attempts come in bursts with quiet
	// gaps, so the kill can land when no attempt is open.
	jh := newProcess(t, policies(be.URL,
		"{backoff: fixed, delay: 2s, jitter: none, max_attempts: 1000, max_age: 1h}"), nil)
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := po.postAll(ctx, n, 8, time.Millisecond); err != nil {
		t.Fatalf("posting: %v", err)
	}
	ns := make([]int, n)
	for i := range ns {
		ns[i] = i + 1
	}
	eventually(t, 15*time.Second, "every webhook attempted once", func() []int { return be.unattempted(ns) })
	// 300 ms without a request: every attempt was Nak'd with its delay, and
	// the consumer state, flushed about every 100 ms, is on disk.
	quietBy := time.Now().Add(10 * time.Second)
	for !be.quietFor(300 * time.Millisecond) {
		if time.Now().After(quietBy) {
			t.Fatal("the backend never went quiet for 300ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	jh.kill()
	be.setMode(healthy)
	restarted := time.Now()
	jh.start()
	// Well under ackWait: a delay lost in the crash would show up here.
	eventually(t, 15*time.Second, "every webhook delivered after the restart", func() []int { return be.missing(ns) })
	took := time.Since(restarted)

	rep := be.report(n)
	for _, i := range ns {
		for _, d := range be.deliveries(i) {
			if d.attempt == "1" || d.attempt == "" {
				t.Errorf("webhook %d delivered as attempt %q after failing before the kill: the attempt count was lost", i, d.attempt)
			}
		}
	}
	if len(rep.bad) > 0 {
		t.Errorf("backend got %d requests it could not attribute, first: %s", len(rep.bad), rep.bad[0])
	}
	t.Logf("%d webhooks delivered %s after the restart; %d attempts in all, %d delivered more than once",
		n, took.Round(time.Millisecond), rep.attempts, rep.duplicates)
}

// awaitAll waits until every webhook 1..n has been delivered, then until
// the ack wait after the kill at killed has passed, so that every
// redelivery the kill caused is counted as a duplicate. It fails the test
// if any is still missing a minute after that, or if p exited on its own,
// and returns how long after the kill the last first delivery came.
func (b *backend) awaitAll(t *testing.T, p *process, n int, killed time.Time, kill string) time.Duration {
	t.Helper()
	return b.awaitAllWithin(t, p, n, killed, kill, ackWait+time.Minute)
}

// awaitAllWithin is awaitAll with its own bound after killed.
func (b *backend) awaitAllWithin(t *testing.T, p *process, n int, killed time.Time, kill string, within time.Duration) time.Duration {
	t.Helper()
	ns := make([]int, 0, n)
	for i := 1; i <= n; i++ {
		ns = append(ns, i)
	}
	deadline := killed.Add(within)
	var allIn time.Duration
	for {
		p.checkAlive()
		missing := b.missing(ns)
		if len(missing) == 0 && allIn == 0 {
			allIn = time.Since(killed)
		}
		if len(missing) == 0 && time.Since(killed) > ackWait+2*time.Second {
			return allIn
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged webhooks never delivered, %s after %s: %s",
				len(missing), n, time.Since(killed).Round(time.Second), kill, sample(missing, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkIDs fails the test for every delivery whose X-Webhook-Id is not the
// event id jethook acknowledged the webhook with.
func (b *backend) checkIDs(t *testing.T, acked map[int]string) {
	t.Helper()
	for i, id := range acked {
		for _, d := range b.deliveries(i) {
			if d.id != id {
				t.Errorf("webhook %d: acknowledged as %q, delivered as %q", i, id, d.id)
			}
		}
	}
}

// eventually polls until missing() is empty, failing with what is still
// missing after within.
func eventually(t *testing.T, within time.Duration, what string, missing func() []int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m := missing()
		if len(m) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %s, %d still missing: %s", what, within, len(m), sample(m, 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKillNineWithFlakyEventsAndTheDefaultLimitsDeliversSoon is the kill
// -9 loop with the destination's default limits (breaker, learned limit)
// against a backend that answers each webhook 503 on its first 0 to 3
// attempts: the 503s are the events', not a sign of overload or of a
// down backend, so nothing holds the webhooks back. Every webhook must be
// delivered within 30 s of the last restart (about 7 s alone on 2 cores).
// A kill may repeat only the attempts it interrupted: at most the
// destination's concurrency per kill are delivered twice, and each
// webhook's X-Webhook-Attempt grows from one attempt to the next but
// where a kill came between them (docs/durability.md).
func TestKillNineWithFlakyEventsAndTheDefaultLimitsDeliversSoon(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop: skipped with -short")
	}
	const n, kills, workers = 400, 4, 16
	const concurrency = 8 // the destination's default
	be := newBackend(t, flakyEvents)
	// The shipped retry defaults (but a max_age under the test's
	// retention) and destination limits; a 2 s timeout makes the ack wait
	// after a kill 7 s.
	jh := newProcess(t, fmt.Sprintf(`
defaults:
  retry: {max_age: 1h}
  timeout: 2s
routes:
  - name: crash
    path: /hooks/crash
    destinations:
      - {name: app, url: %s/hook}
`, be.URL), nil)
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	posting := po.postInBackground(ctx, n, workers, 15*time.Millisecond)
	var lastStart time.Time
	var killed []time.Time
	var open []int // requests the backend had open at each kill
	for k := range kills {
		posting.reached((k + 1) * n / (kills + 1))
		open = append(open, be.snapshot(0).inflight)
		jh.kill()
		killed = append(killed, time.Now()) // after every attempt it interrupted began
		jh.start()
		lastStart = time.Now()
	}
	posting.wait(t, "jethook")
	ns := make([]int, n)
	for i := range ns {
		ns[i] = i + 1
	}
	eventually(t, 30*time.Second-time.Since(lastStart), "every webhook delivered within 30 s of the last restart",
		func() []int { return be.missing(ns) })
	allIn := time.Since(lastStart)
	// Whatever a kill left to repeat is pending, unacknowledged or parked
	// until it is repeated: count the repeats once nothing is left.
	jh.awaitSettled(t, "crash", "app", time.Minute)

	rep := be.report(n)
	at := be.attemptNumbers(n, killed)
	t.Logf("%d webhooks, %d kills: all delivered %s after the last restart", n, kills, allIn.Round(time.Millisecond))
	t.Logf("requests open at each kill %v; %d attempts in all; %d webhooks delivered twice (%d extra deliveries); "+
		"%d attempt numbers repeated after a kill, %d skipped", open, rep.attempts, rep.duplicates, rep.extra, at.repeated, at.skipped)
	if len(rep.bad) > 0 {
		t.Errorf("backend got %d requests it could not attribute, first: %s", len(rep.bad), rep.bad[0])
	}
	if rep.extra > concurrency*kills {
		t.Errorf("%d extra deliveries after %d kills: more than the %d attempts a kill can interrupt (%d per kill)",
			rep.extra, kills, concurrency*kills, concurrency)
	}
	if at.repeated > concurrency*kills {
		t.Errorf("%d attempt numbers repeated after %d kills: more than the %d attempts a kill can interrupt",
			at.repeated, kills, concurrency*kills)
	}
	for _, e := range at.errs {
		t.Error(e)
	}
}

// attemptNumbers is what the X-Webhook-Attempt headers of every webhook's
// requests, in the order the backend got them, say.
type attemptNumbers struct {
	repeated int      // a number not above the one before: the attempt before was interrupted by a kill
	skipped  int      // a number more than one above the one before (or a first above 1)
	errs     []string // a number missing, or repeated with no kill between
}

// attemptNumbers checks webhooks 1..n's attempt numbers against the kills.
func (b *backend) attemptNumbers(n int, kills []time.Time) attemptNumbers {
	var out attemptNumbers
	for i := 1; i <= n; i++ {
		prev := request{}
		for _, r := range b.requestsOf(i) {
			switch {
			case r.attempt < 1:
				out.errs = append(out.errs, fmt.Sprintf("webhook %d: a request without an attempt number", i))
			case r.attempt <= prev.attempt:
				out.repeated++
				if !slices.ContainsFunc(kills, func(k time.Time) bool { return k.After(prev.start) && k.Before(r.start) }) {
					out.errs = append(out.errs, fmt.Sprintf("webhook %d: attempt %d followed attempt %d with no kill between",
						i, r.attempt, prev.attempt))
				}
			case r.attempt > prev.attempt+1:
				out.skipped++
			}
			prev = r
		}
	}
	return out
}
