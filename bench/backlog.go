package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/procs"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// BacklogOptions configure the backlog scenario; a zero field takes its
// default.
type BacklogOptions struct {
	// Messages is N, the webhooks parked in backoff on destination a
	// (default 100,000).
	Messages int
	// Delay is a's fixed retry delay: how long each message stays parked
	// after its failed first attempt (default 2m). It must outlast the
	// fill, or parked messages come due (and fail again) before the
	// measurements.
	Delay time.Duration
	// MaxAckPending is the store's bound on each consumer's delivered and
	// unsettled messages (default: the store's own). Parked messages do
	// not count against it; only attempts in flight and short waits do.
	MaxAckPending int
	// ParkAfter is the forwarder's ParkAfter (default
	// forward.DefaultParkAfter): Delay below it leaves failed messages
	// nak-delayed in a's consumer instead of parked.
	ParkAfter time.Duration
	// Probes is how many new webhooks time the healthy destination b while
	// a's backlog is parked (default 20).
	Probes int
	// BodySize is the size of every JSON body in bytes (default 256).
	BodySize int
	// Publishers is how many goroutines publish the backlog (default 64).
	Publishers int
	// Concurrency is both destinations' `concurrency` (default 64).
	Concurrency int
	// Timeout bounds each wait: the fill, each probe's delivery, and the
	// drain once the last message came due (default 10m).
	Timeout time.Duration
	// Dir holds the store's temporary data directory (default the system's
	// temporary directory).
	Dir string
	// Idle is how long each Sample watches the process's CPU (default 5s).
	Idle time.Duration
	// Progress, if set, gets a line every few seconds of a long wait.
	Progress io.Writer
}

func (o *BacklogOptions) applyDefaults() {
	if o.Messages <= 0 {
		o.Messages = 100_000
	}
	if o.Delay <= 0 {
		o.Delay = 2 * time.Minute
	}
	if o.Probes <= 0 {
		o.Probes = 20
	}
	if o.BodySize <= 0 {
		o.BodySize = 256
	}
	if o.Publishers <= 0 {
		o.Publishers = 64
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Idle <= 0 {
		o.Idle = 5 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Sample is the process at one moment: the embedded server, the forwarder
// and the bench all run in it.
type Sample struct {
	// RSS is the resident set size (VmRSS); 0 where /proc is missing.
	RSS uint64
	// Heap is the Go heap in use right after a collection.
	Heap uint64
	// IdleCPU is the process's CPU time over BacklogOptions.Idle with
	// nothing to deliver, as a share of one core.
	IdleCPU float64
	// Pending and AckPending are destination a's consumer counts: not yet
	// delivered, and delivered but not settled (in flight or nak-delayed);
	// Parked are a's messages parked outside the consumer.
	Pending, AckPending, Parked uint64
}

// BacklogResult is what N parked messages cost and whether they stall
// anything.
type BacklogResult struct {
	Options BacklogOptions // with defaults applied
	Config  string         // the policies.yaml the run used
	// Publish is how long publishing the N messages took.
	Publish time.Duration
	// Fill runs from the first publish until a has attempted every message
	// it can hold and b has delivered all N.
	Fill time.Duration
	// FailedAttempts counts a's 503s during the fill.
	FailedAttempts int
	// Empty is the process before the publish, Parked with the backlog in
	// backoff, Drained after a took it all.
	Empty, Parked, Drained Sample
	// Probes are the times from publishing a new webhook to b receiving it,
	// sorted; ProbesLost counts those not received within Timeout.
	Probes     []time.Duration
	ProbesLost int
	// Due is how long after the switch to 200 the last parked message
	// came due (its first failed attempt plus Delay); zero if it already
	// had.
	Due time.Duration
	// Drain runs from a's backend switching to 200 until it has answered
	// 200 to every message, probes included; Spread runs from a's first
	// 200 to its last.
	Drain, Spread time.Duration
	// Late is, for every message a refused, sorted, how long after it came
	// due (its latest 503 plus Delay) a answered it 200: how closely the
	// server keeps the schedule of a large pending map.
	Late []time.Duration
	// DeadLettered counts dead letters (must be 0).
	DeadLettered int
}

// DrainRate is a's deliveries per second from its first 200 to its last.
func (r BacklogResult) DrainRate() float64 {
	if r.Spread <= 0 {
		return 0
	}
	return float64(r.Options.Messages+r.Options.Probes) / r.Spread.Seconds()
}

// backlogRoute is the scenario's route: a fan-out to a (failing) and b.
const backlogRoute = "backlog"

func backlogConfig(o BacklogOptions) string {
	return fmt.Sprintf(`routes:
  - name: %s
    path: /hooks/backlog
    retry: {backoff: fixed, delay: %s, jitter: none, max_attempts: 10000}
    destinations:
      - {name: a, url: "${A}", concurrency: %d, breaker: {failures: 0}}
      - {name: b, url: "${B}", concurrency: %d}
`, backlogRoute, o.Delay, o.Concurrency, o.Concurrency)
}

// Backlog parks N messages in backoff on destination a of a fan-out route
// (a answers 503, its breaker off so that every message gets its first
// attempt and is parked) while destination b of the same route
// delivers them. It then samples the process, times new webhooks to b,
// switches a's backend to 200 and times the drain.
func Backlog(ctx context.Context, o BacklogOptions) (BacklogResult, error) {
	o.applyDefaults()
	r := BacklogResult{Options: o, Config: backlogConfig(o)}
	total := o.Messages + o.Probes
	a, b := newCountingBackend(total, o.Messages, false), newCountingBackend(total, o.Messages, true)
	as, err := listen(a)
	if err != nil {
		return r, err
	}
	defer as.close()
	bs, err := listen(b)
	if err != nil {
		return r, err
	}
	defer bs.close()
	cfg, err := policy.Parse("backlog.yaml", []byte(r.Config), func(k string) (string, bool) {
		switch k {
		case "A":
			return as.URL, true
		case "B":
			return bs.URL, true
		}
		return "", false
	})
	if err != nil {
		return r, err
	}

	dir, err := os.MkdirTemp(o.Dir, "jethook-bench-*")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	jethook, err := app.New(ctx, cfg, app.Options{
		StoreOptions: store.Options{DataDir: dir, MaxAckPending: o.MaxAckPending},
		ParkAfter:    o.ParkAfter,
	})
	if err != nil {
		return r, err
	}
	defer jethook.Close(5 * time.Second)
	st := jethook.Store

	if r.Empty, err = sample(ctx, st, o.Idle); err != nil {
		return r, err
	}
	start := time.Now()
	if err := publishBacklog(ctx, st, o); err != nil {
		return r, err
	}
	r.Publish = time.Since(start)
	fmt.Fprintf(o.Progress, "published %d in %s\n", o.Messages, seconds(r.Publish))

	// Every message waits for its retry: parked, or nak-delayed in the
	// consumer as far as MaxAckPending lets it.
	n := uint64(o.Messages)
	if o.Delay < cmp.Or(o.ParkAfter, forward.DefaultParkAfter) && o.MaxAckPending > 0 {
		n = min(n, uint64(o.MaxAckPending))
	}
	// The counts move for a moment after each parking: a webhook just
	// parked counts as parked and, until its message is acked, as
	// ack-pending too; one parked during a look of the mover counts twice
	// until the next look (store.ParkedCount). The fill ends when the
	// counts have held still for a few of the mover's looks.
	var seen store.Backlog
	var still time.Time
	err = waitFor(ctx, o.Timeout, o.Progress, func() (bool, string, error) {
		bl, err := backlogOf(ctx, st, "a")
		if err != nil {
			return false, "", err
		}
		if bl != seen || still.IsZero() {
			seen, still = bl, time.Now()
		}
		done := b.delivered.Load() >= int64(o.Messages) && uint64(a.failed.Load()) >= n && bl.AckPending+bl.Parked >= n &&
			time.Since(still) >= countsStill
		return done, fmt.Sprintf("fill: a failed %d, parked %d, ack-pending %d, pending %d; b delivered %d",
			a.failed.Load(), bl.Parked, bl.AckPending, bl.Pending, b.delivered.Load()), nil
	})
	if err != nil {
		return r, fmt.Errorf("fill: %w", err)
	}
	r.Fill, r.FailedAttempts = time.Since(start), int(a.failed.Load())
	if r.Parked, err = sample(ctx, st, o.Idle); err != nil {
		return r, err
	}

	for i := range o.Probes {
		seq := int64(o.Messages + i)
		t0 := time.Now()
		if err := publishOne(ctx, st, seq, o.BodySize); err != nil {
			return r, err
		}
		select {
		case at := <-b.probes:
			r.Probes = append(r.Probes, at.Sub(t0))
		case <-time.After(o.Timeout):
			r.ProbesLost++
		case <-ctx.Done():
			return r, ctx.Err()
		}
		sleep(ctx, 50*time.Millisecond)
	}
	slices.Sort(r.Probes)

	switched := time.Now()
	a.ok.Store(true)
	err = waitFor(ctx, o.Delay+o.Timeout, o.Progress, func() (bool, string, error) {
		bl, err := backlogOf(ctx, st, "a")
		if err != nil {
			return false, "", err
		}
		return a.delivered.Load() >= int64(total), fmt.Sprintf("drain: a delivered %d of %d; parked %d, ack-pending %d, pending %d",
			a.delivered.Load(), total, bl.Parked, bl.AckPending, bl.Pending), nil
	})
	if err != nil {
		return r, fmt.Errorf("drain: %w", err)
	}
	lastDue, first, last, late := a.drain(o.Delay)
	r.Due, r.Drain, r.Spread, r.Late = max(lastDue.Sub(switched), 0), last.Sub(switched), last.Sub(first), late
	if r.Drained, err = sample(ctx, st, o.Idle); err != nil {
		return r, err
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return r, err
	}
	r.DeadLettered = int(stats.DeadLetters)
	return r, nil
}

// countsStill is how long the fill's counts must hold still: several of
// the mover's looks (every 100ms) at its parked records.
const countsStill = 500 * time.Millisecond

// publishBacklog publishes o.Messages webhooks to the backlog route from
// o.Publishers goroutines, each waiting for its own acks.
func publishBacklog(ctx context.Context, st *store.Store, o BacklogOptions) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	step := int64(max(o.Messages/10, 1))
	for range o.Publishers {
		wg.Go(func() {
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if seq >= int64(o.Messages) {
					return
				}
				if err := publishOne(ctx, st, seq, o.BodySize); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				if (seq+1)%step == 0 {
					fmt.Fprintf(o.Progress, "published %d\n", seq+1)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// publishOne stores webhook seq on the backlog route, as ingress would.
func publishOne(ctx context.Context, st *store.Store, seq int64, bodySize int) error {
	_, err := st.Publish(ctx, &store.Envelope{
		Route:      backlogRoute,
		EventID:    "evt_" + strconv.FormatInt(seq, 10),
		Method:     http.MethodPost,
		Host:       "bench",
		Proto:      "http",
		RemoteAddr: "127.0.0.1:1",
		ReceivedAt: time.Now(),
		Header:     map[string][]string{"Content-Type": {"application/json"}, seqHeader: {strconv.FormatInt(seq, 10)}},
		Body:       body(seq, bodySize),
	})
	return err
}

// backlogOf reads destination dest's consumer counts.
func backlogOf(ctx context.Context, st *store.Store, dest string) (store.Backlog, error) {
	all, err := st.Backlogs(ctx)
	if err != nil {
		return store.Backlog{}, err
	}
	for _, b := range all {
		if b.Route == backlogRoute && b.Destination == dest {
			return b, nil
		}
	}
	return store.Backlog{}, fmt.Errorf("no consumer for %s → %s", backlogRoute, dest)
}

// waitFor polls cond every 50ms until it holds, printing its note to
// progress every 5s, or fails after timeout.
func waitFor(ctx context.Context, timeout time.Duration, progress io.Writer, cond func() (bool, string, error)) error {
	deadline, report := time.Now().Add(timeout), time.Now().Add(5*time.Second)
	for {
		ok, note, err := cond()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("not done within %s: %s", timeout, note)
		case time.Now().After(report):
			fmt.Fprintln(progress, note)
			report = time.Now().Add(5 * time.Second)
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sample reads the process's memory and destination a's counts, and
// watches CPU over idle.
func sample(ctx context.Context, st *store.Store, idle time.Duration) (Sample, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := Sample{RSS: rss(), Heap: ms.HeapInuse}
	cpu0, t0 := procs.CPUTime(), time.Now()
	if !sleep(ctx, idle) {
		return s, ctx.Err()
	}
	s.IdleCPU = (procs.CPUTime() - cpu0).Seconds() / time.Since(t0).Seconds()
	bl, err := backlogOf(ctx, st, "a")
	s.Pending, s.AckPending, s.Parked = bl.Pending, bl.AckPending, bl.Parked
	return s, err
}

// rss is this process's resident set size in bytes; 0 where there is no
// /proc.
func rss() uint64 {
	r, _ := procMemory("self")
	return r
}

// countingBackend answers 503 until ok is set (always 200 if it starts
// so), recording per sequence number its latest 503 and its first 200, and
// reporting the arrival of probes (sequence numbers from probeFrom on).
type countingBackend struct {
	ok        atomic.Bool
	seen      []atomic.Bool
	failAt    []atomic.Int64 // unix nanoseconds of each message's latest 503
	okAt      []atomic.Int64 // unix nanoseconds of each message's first 200
	probeFrom int64
	probes    chan time.Time // arrival of each probe's first delivery

	delivered, failed atomic.Int64
}

func newCountingBackend(want, probeFrom int, ok bool) *countingBackend {
	b := &countingBackend{seen: make([]atomic.Bool, want), probeFrom: int64(probeFrom),
		failAt: make([]atomic.Int64, want), okAt: make([]atomic.Int64, want),
		probes: make(chan time.Time, want-probeFrom)}
	b.ok.Store(ok)
	return b
}

func (b *countingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	now := time.Now()
	seq, err := strconv.ParseInt(r.Header.Get(seqHeader), 10, 64)
	if err != nil || seq < 0 || seq >= int64(len(b.seen)) {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if !b.ok.Load() {
		b.failed.Add(1)
		b.failAt[seq].Store(now.UnixNano())
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if !b.seen[seq].Swap(true) {
		b.okAt[seq].Store(now.UnixNano())
		b.delivered.Add(1)
		if seq >= b.probeFrom {
			b.probes <- now
		}
	}
	w.WriteHeader(http.StatusOK)
}

// drain reads, once every message has had its 200, when the last one came
// due (its latest 503 plus delay; zero if none failed), the first and last
// 200, and each parked message's lateness: its 200 less its due time.
func (b *countingBackend) drain(delay time.Duration) (lastDue, first, last time.Time, late []time.Duration) {
	for i := range b.okAt {
		ok := time.Unix(0, b.okAt[i].Load())
		if first.IsZero() || ok.Before(first) {
			first = ok
		}
		last = later(last, ok)
		if f := b.failAt[i].Load(); f != 0 {
			due := time.Unix(0, f).Add(delay)
			lastDue = later(lastDue, due)
			late = append(late, ok.Sub(due))
		}
	}
	slices.Sort(late)
	return lastDue, first, last, late
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Report prints the run: its settings and config, then each figure.
func (r BacklogResult) Report(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\nBacklog: %d webhooks of %d bytes parked in backoff on destination a (503, retry in %s) of a fan-out route;\n",
		o.Messages, o.BodySize, o.Delay)
	fmt.Fprintf(w, "destination b of the same route answers 200; consumers' MaxAckPending %d (0: the store's default)\n", o.MaxAckPending)
	fmt.Fprintf(w, "policies.yaml:\n%s", indent(r.Config, "  "))
	fmt.Fprintf(w, "%-22s %s (%.0f/s, %d publishers)\n", "publish", seconds(r.Publish),
		float64(o.Messages)/r.Publish.Seconds(), o.Publishers)
	fmt.Fprintf(w, "%-22s %s (a: %d failed attempts; b: all %d delivered)\n", "fill", seconds(r.Fill), r.FailedAttempts, o.Messages)
	fmt.Fprintf(w, "%-22s %9s %9s %12s %12s %12s %12s   (idle CPU over %s, share of one core)\n",
		"PROCESS", "RSS", "GO HEAP", "IDLE CPU", "A PENDING", "A ACK-PEND", "A PARKED", o.Idle)
	for _, row := range []struct {
		name string
		s    Sample
	}{{"empty", r.Empty}, {"backlog parked", r.Parked}, {"drained", r.Drained}} {
		fmt.Fprintf(w, "%-22s %9s %9s %11.1f%% %12d %12d %12d\n", row.name, mib(row.s.RSS), mib(row.s.Heap),
			100*row.s.IdleCPU, row.s.Pending, row.s.AckPending, row.s.Parked)
	}
	fmt.Fprintf(w, "%-22s %.0f bytes per parked message (RSS parked − empty)\n", "", perMessage(r.Parked.RSS, r.Empty.RSS, o.Messages))
	fmt.Fprintf(w, "%-22s p50 %s, max %s over %d probes; %d not delivered within %s\n", "new webhook → b",
		millis(percentile(r.Probes, 50)), millis(percentile(r.Probes, 100)), len(r.Probes), r.ProbesLost, o.Timeout)
	fmt.Fprintf(w, "%-22s %s after a's backend switched to 200; the last parked message came due %s after it\n",
		"a drained", seconds(r.Drain), seconds(r.Due))
	fmt.Fprintf(w, "%-22s first to last 200 %s, %.0f deliveries/s; dead-lettered %d (must be 0)\n", "",
		seconds(r.Spread), r.DrainRate(), r.DeadLettered)
	fmt.Fprintf(w, "%-22s 200 after due (latest 503 + %s): p50 %s, p99 %s, max %s over %d parked messages\n", "a's retries on time",
		o.Delay, millis(percentile(r.Late, 50)), millis(percentile(r.Late, 99)), millis(percentile(r.Late, 100)), len(r.Late))
}

func perMessage(after, before uint64, n int) float64 {
	if after < before || n == 0 {
		return 0
	}
	return float64(after-before) / float64(n)
}

func mib(n uint64) string { return fmt.Sprintf("%.0fMiB", float64(n)/(1<<20)) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
