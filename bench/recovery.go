package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/policy"
)

// RecoveryOptions configure the outage-recovery scenario; a zero field
// takes its default unless it says otherwise.
type RecoveryOptions struct {
	// Arrival is A, the webhooks per second posted to jethook's ingress,
	// from the start until the backlog has drained (default 100).
	Arrival int
	// Warmup is how long the backend is up before the outage (default 3s).
	Warmup time.Duration
	// Outage is T, how long the backend answers 503 to everything
	// (default 20s).
	Outage time.Duration
	// Capacity is K: once up, the backend answers 200 to the first K
	// requests of each clock second and 503 to the rest (default 200).
	Capacity int
	// Rate is R, the destination's `rate` per second (default 180).
	Rate int
	// Concurrency is the destination's `concurrency` (default 32).
	Concurrency int
	// BreakerFailures is the destination's `breaker.failures`; 0 turns the
	// breaker off, as in policies.yaml.
	BreakerFailures int
	// BreakerCooldown is the destination's `breaker.cooldown` (default 2s).
	BreakerCooldown time.Duration
	// SlowStart is the destination's `slow_start`; 0 turns it off, as in
	// policies.yaml.
	SlowStart time.Duration
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// DrainTimeout bounds the wait for the backlog to drain (default 5m).
	DrainTimeout time.Duration
	// Dir holds the store's temporary data directory (default the system's
	// temporary directory).
	Dir string
}

func (o *RecoveryOptions) applyDefaults() {
	if o.Arrival <= 0 {
		o.Arrival = 100
	}
	if o.Warmup <= 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Outage <= 0 {
		o.Outage = 20 * time.Second
	}
	if o.Capacity <= 0 {
		o.Capacity = 200
	}
	if o.Rate <= 0 {
		o.Rate = 180
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 32
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = 2 * time.Second
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 5 * time.Minute
	}
}

// RecoveryResult is what the backend saw around one outage.
type RecoveryResult struct {
	Options RecoveryOptions // with defaults applied
	// Config is the policies.yaml the run used.
	Config string
	// Posted counts the webhooks posted to ingress, Accepted those it
	// answered 200 (acked by the store).
	Posted, Accepted int
	// Backlog counts the webhooks posted before the recovery that the
	// backend had not answered 200 at the recovery.
	Backlog int
	// Noticed runs from the recovery to the backend's first 200.
	Noticed time.Duration
	// Drain runs from the recovery to the first moment the backend had
	// answered 200 to every webhook posted so far.
	Drain time.Duration
	// Peak is the most requests the backend received in any 1-second
	// window (sliding, not clock-aligned) after the recovery.
	Peak int
	// PerSecond counts the backend's requests in each second after the
	// recovery.
	PerSecond []int
	// OutageRequests counts the attempts the backend refused while down.
	OutageRequests int
	// OverCapacity counts the 503s the backend gave after the recovery
	// because a second already had Capacity requests.
	OverCapacity int
	// Lost counts webhooks ingress acked that never reached the backend;
	// DeadLettered, those stored as dead letters; Repeats, deliveries
	// beyond the first (delivery is at least once).
	Lost, DeadLettered, Repeats int
}

// Limit is the rate the backlog can drain at: the lower of R and K.
func (r RecoveryResult) Limit() int { return min(r.Options.Rate, r.Options.Capacity) }

// MinDrain is the shortest possible drain: the backlog at recovery, drained
// at Limit while new webhooks keep arriving at A, takes
// Backlog ÷ (Limit − A).
func (r RecoveryResult) MinDrain() time.Duration {
	spare := r.Limit() - r.Options.Arrival
	if spare <= 0 {
		return 0
	}
	return time.Duration(float64(r.Backlog) / float64(spare) * float64(time.Second))
}

// PeakRatio is Peak ÷ R; the target is at most 1.05.
func (r RecoveryResult) PeakRatio() float64 { return float64(r.Peak) / float64(r.Options.Rate) }

// DrainRatio is Drain ÷ MinDrain; the target is at most 1.2.
func (r RecoveryResult) DrainRatio() float64 {
	if r.MinDrain() <= 0 {
		return 0
	}
	return r.Drain.Seconds() / r.MinDrain().Seconds()
}

// recoveryPath is the recovery route's path on jethook's ingress.
const recoveryPath = "/hooks/recovery"

// recoveryConfig is the policy of the scenario: short retries with full
// jitter, so every parked webhook is due again within 2s, and the
// destination's limits from o.
func recoveryConfig(o RecoveryOptions) string {
	return fmt.Sprintf(`routes:
  - name: recovery
    path: %s
    retry: {backoff: exponential, base: 100ms, max_delay: 2s, jitter: full, max_attempts: 10000}
    destinations:
      - name: backend
        url: "${BACKEND}"
        concurrency: %d
        rate: %d/s
        breaker: {failures: %d, cooldown: %s}
        slow_start: %s
`, recoveryPath, o.Concurrency, o.Rate, o.BreakerFailures, o.BreakerCooldown, o.SlowStart)
}

// Recovery runs jethook (embedded store, ingress and forwarder) in front of
// a loopback backend with capacity K that goes down for T while webhooks
// keep arriving at A per second, and measures what the backend sees once
// it is back: the peak rate against the destination's rate, the drain time
// against its minimum, and whether any acked webhook went missing.
func Recovery(ctx context.Context, o RecoveryOptions) (RecoveryResult, error) {
	o.applyDefaults()
	r := RecoveryResult{Options: o, Config: recoveryConfig(o)}
	if r.Limit() <= o.Arrival {
		return r, fmt.Errorf("arrival %d/s must be below the drain rate min(rate, capacity) = %d/s, or the backlog never drains",
			o.Arrival, r.Limit())
	}

	f := &feed{done: make(chan struct{})}
	be := &outageBackend{capacity: o.Capacity, feed: f, delivered: map[int64]bool{}, drained: make(chan struct{})}
	srv, err := listen(be)
	if err != nil {
		return r, err
	}
	defer srv.close()
	cfg, err := policy.Parse("recovery.yaml", []byte(r.Config), func(k string) (string, bool) {
		return srv.URL + recoveryPath, k == "BACKEND"
	})
	if err != nil {
		return r, err
	}
	st, err := startStack(ctx, Options{Dir: o.Dir}, cfg, false, true)
	if err != nil {
		return r, fmt.Errorf("start jethook: %w", err)
	}
	defer st.close()

	stop := make(chan struct{})
	go f.run(ctx, stop, st.ingress.URL+recoveryPath, o.Arrival, o.BodySize)
	stopFeed := sync.OnceFunc(func() { close(stop); <-f.done; f.wg.Wait() })
	defer stopFeed()

	if !sleep(ctx, o.Warmup) {
		return r, ctx.Err()
	}
	be.setDown()
	if !sleep(ctx, o.Outage) {
		return r, ctx.Err()
	}
	r.Backlog = be.recover()

	timeout := time.NewTimer(o.DrainTimeout)
	defer timeout.Stop()
	select {
	case <-be.drained:
	case <-ctx.Done():
		return r, ctx.Err()
	case <-timeout.C:
		stats, err := st.app.Store.Stats(ctx)
		if err != nil {
			return r, err
		}
		be.mu.Lock()
		delivered := len(be.delivered)
		be.mu.Unlock()
		return r, fmt.Errorf("backlog not drained within %s of the recovery: the backend has %d of %d webhooks posted, %d refused by ingress; %d dead-lettered; %s",
			o.DrainTimeout, delivered, f.posted.Load(), f.failed.Load(), stats.DeadLetters, gateStatus(st))
	}
	stopFeed()
	r.Lost = be.settle(ctx, 30*time.Second)
	stats, err := st.app.Store.Stats(ctx)
	if err != nil {
		return r, err
	}
	r.DeadLettered = int(stats.DeadLetters)
	be.result(&r)
	return r, nil
}

// gateStatus says what holds the scenario's destination back: its breaker
// and its learned limit, if any.
func gateStatus(st *stack) string {
	var out []string
	for _, d := range st.app.Forwarder.Status() {
		g := d.Gate
		limit := "no learned limit"
		if g.Limit > 0 {
			limit = fmt.Sprintf("learned limit %.1f/s", g.Limit)
		}
		out = append(out, fmt.Sprintf("%s: breaker %s, %s, %d in flight", d.Destination, g.Breaker, limit, d.InFlight))
	}
	return strings.Join(out, "; ")
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// feed posts webhooks at a steady rate, each in its own goroutine so a slow
// answer never holds the next post back, and remembers which ones ingress
// acked.
type feed struct {
	posted atomic.Int64   // sequence numbers handed out
	failed atomic.Int64   // posts not answered 200
	wg     sync.WaitGroup // posts waiting for their answer
	done   chan struct{}  // closed when run returns

	mu       sync.Mutex
	accepted []int64
}

// maxInFlight bounds the feed's posts waiting for an answer.
const maxInFlight = 256

// run posts perSecond webhooks a second to url until stop closes.
func (f *feed) run(ctx context.Context, stop <-chan struct{}, url string, perSecond, bodySize int) {
	defer close(f.done)
	client := &http.Client{Transport: transport(maxInFlight), Timeout: 30 * time.Second}
	slots := make(chan struct{}, maxInFlight)
	interval := time.Second / time.Duration(perSecond)
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		select {
		case slots <- struct{}{}:
		case <-stop:
			return
		}
		seq := f.posted.Add(1) - 1
		f.wg.Go(func() {
			defer func() { <-slots }()
			if !post(ctx, client, url, seq, bodySize) {
				f.failed.Add(1)
				return
			}
			f.mu.Lock()
			f.accepted = append(f.accepted, seq)
			f.mu.Unlock()
		})
		next = next.Add(interval)
		t.Reset(time.Until(next))
	}
}

// outageBackend is a backend with a fixed capacity per clock second that
// can be switched down (503 to everything). It records what it answered
// around the recovery.
type outageBackend struct {
	capacity int
	feed     *feed
	drained  chan struct{} // closed at drainedAt

	mu             sync.Mutex
	down           bool
	recovered      time.Time
	firstOK        time.Time // first 200 after the recovery
	drainedAt      time.Time
	second         int64 // the clock second inSecond counts
	inSecond       int
	since          []time.Duration // each request after the recovery, from it
	delivered      map[int64]bool
	repeats        int
	outageRequests int
	overCapacity   int
}

func (b *outageBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	seq, err := strconv.ParseInt(r.Header.Get(seqHeader), 10, 64)
	b.mu.Lock()
	status := b.answer(time.Now(), seq, err == nil)
	b.mu.Unlock()
	w.WriteHeader(status)
}

// answer decides one request's status and records it; b.mu is held.
func (b *outageBackend) answer(now time.Time, seq int64, ok bool) int {
	if b.down {
		b.outageRequests++
		return http.StatusServiceUnavailable
	}
	up := !b.recovered.IsZero()
	if up {
		b.since = append(b.since, now.Sub(b.recovered))
	}
	if s := now.Unix(); s != b.second {
		b.second, b.inSecond = s, 0
	}
	if b.inSecond++; b.inSecond > b.capacity {
		if up {
			b.overCapacity++
		}
		return http.StatusServiceUnavailable
	}
	if !ok {
		return http.StatusBadRequest
	}
	if up && b.firstOK.IsZero() {
		b.firstOK = now
	}
	if b.delivered[seq] {
		b.repeats++
		return http.StatusOK
	}
	b.delivered[seq] = true
	if up && b.drainedAt.IsZero() && int64(len(b.delivered)) >= b.feed.posted.Load()-b.feed.failed.Load() {
		b.drainedAt = now
		close(b.drained)
	}
	return http.StatusOK
}

func (b *outageBackend) setDown() {
	b.mu.Lock()
	b.down = true
	b.mu.Unlock()
}

// recover brings the backend back and returns the backlog: webhooks posted
// so far (and not refused by ingress) that it has not answered 200.
func (b *outageBackend) recover() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down, b.recovered = false, time.Now()
	return int(b.feed.posted.Load()-b.feed.failed.Load()) - len(b.delivered)
}

// settle waits up to d for every webhook ingress acked to reach the
// backend, and returns how many did not.
func (b *outageBackend) settle(ctx context.Context, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		b.feed.mu.Lock()
		b.mu.Lock()
		missing := 0
		for _, seq := range b.feed.accepted {
			if !b.delivered[seq] {
				missing++
			}
		}
		b.mu.Unlock()
		b.feed.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) || !sleep(ctx, 10*time.Millisecond) {
			return missing
		}
	}
}

// result fills in what the backend recorded.
func (b *outageBackend) result(r *RecoveryResult) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.Posted = int(b.feed.posted.Load())
	b.feed.mu.Lock()
	r.Accepted = len(b.feed.accepted)
	b.feed.mu.Unlock()
	r.Noticed = b.firstOK.Sub(b.recovered)
	r.Drain = b.drainedAt.Sub(b.recovered)
	r.Repeats, r.OutageRequests, r.OverCapacity = b.repeats, b.outageRequests, b.overCapacity
	since := slices.Clone(b.since)
	slices.Sort(since)
	r.Peak = peak(since, time.Second)
	for _, d := range since {
		i := int(d / time.Second)
		for len(r.PerSecond) <= i {
			r.PerSecond = append(r.PerSecond, 0)
		}
		r.PerSecond[i]++
	}
}

// peak is the most of sorted's instants that fall in any window of length w.
func peak(sorted []time.Duration, w time.Duration) int {
	best, i := 0, 0
	for j, t := range sorted {
		for t-sorted[i] >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// Report prints the run: its settings and config, then each figure with
// its target.
func (r RecoveryResult) Report(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\nOutage recovery: %d webhooks/s posted to jethook throughout; backend up %s, down (503) %s, then up with capacity K=%d/s\n",
		o.Arrival, o.Warmup, o.Outage, o.Capacity)
	fmt.Fprintf(w, "policies.yaml:\n%s", indent(r.Config, "  "))
	fmt.Fprintf(w, "%-26s %d webhooks (posted before the recovery, not yet answered 200 by the backend)\n", "backlog at recovery", r.Backlog)
	fmt.Fprintf(w, "%-26s %s (first 200 after the recovery)\n", "recovery noticed after", seconds(r.Noticed))
	fmt.Fprintf(w, "%-26s %d req in a sliding 1-s window   ÷ R (%d/s) = %.3f   target ≤ 1.05\n",
		"peak after recovery", r.Peak, o.Rate, r.PeakRatio())
	fmt.Fprintf(w, "%-26s %s   ÷ minimum %s = %.2f   target ≤ 1.2\n", "drain", seconds(r.Drain), seconds(r.MinDrain()), r.DrainRatio())
	fmt.Fprintf(w, "%-26s recovery → first moment every webhook posted so far was answered 200;\n", "")
	fmt.Fprintf(w, "%-26s minimum = backlog ÷ (min(R, K) − A) = %d ÷ (%d − %d)/s, as webhooks keep arriving\n",
		"", r.Backlog, r.Limit(), o.Arrival)
	fmt.Fprintf(w, "%-26s %d while down; %d answered 503 over capacity after the recovery\n", "attempts refused", r.OutageRequests, r.OverCapacity)
	fmt.Fprintf(w, "%-26s lost %d, dead-lettered %d (both must be 0); %d repeated deliveries; posted %d, ingress acked %d\n",
		"webhooks", r.Lost, r.DeadLettered, r.Repeats, r.Posted, r.Accepted)
	counts := make([]string, len(r.PerSecond))
	for i, n := range r.PerSecond {
		counts[i] = strconv.Itoa(n)
	}
	fmt.Fprintf(w, "%-26s %s\n", "req/s after recovery", strings.Join(counts, " "))
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
