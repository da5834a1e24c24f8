package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jethook/jethook/policy"
)

// ProtectionOptions configure the protection scenario: the cases in which
// jethook's protection (breaker, learned limit, release of parked retries)
// must keep the retry schedule's promise. A zero field takes its default.
type ProtectionOptions struct {
	// Rows names the rows to run, in the table's order (default all; see
	// ProtectionRows).
	Rows []string
	// LongOutage is how long the long-outage row's backend refuses
	// connections while 100 webhooks a minute arrive (default 15m).
	LongOutage time.Duration
	// Size scales every other row's webhook count and durations
	// (default 1, the documented table); 0.1 runs a tenth of each.
	Size float64
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// Dir holds the stores' temporary data directories (default the
	// system's temporary directory).
	Dir string
	// Log, if set, gets jethook's own log of every row (text, info level):
	// each failed attempt, breaker opening and recovery.
	Log io.Writer
	// Progress, if set, gets a line as each row starts and ends.
	Progress io.Writer
}

func (o *ProtectionOptions) applyDefaults() {
	if len(o.Rows) == 0 {
		o.Rows = ProtectionRows()
	}
	if o.LongOutage <= 0 {
		o.LongOutage = 15 * time.Minute
	}
	if o.Size <= 0 {
		o.Size = 1
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// row is one case of the table: what arrives, what the backend does, and
// the target.
type row struct {
	name, title, target string
	events              int
	arrival             float64       // webhooks per second; 0 posts them all at once
	downFrom, downFor   time.Duration // from the first post; downFor 0: never down
	refuse              bool          // while down the listener is closed (connections refused), else every request gets 503
	capacity            int           // 200s per clock second, 503 above; 0 unlimited
	failFirst           int           // every event gets 503 on its first failFirst requests
	poison              float64       // share of events that always get 500
	failShare           float64       // each request gets 503 with this probability
	wait                time.Duration // how long after the last post or the return every healthy event may take
	judge               func(r *RowResult) (bool, string)
}

// ProtectionRows lists the protection scenario's rows, in order.
func ProtectionRows() []string {
	var names []string
	for _, r := range rows(ProtectionOptions{LongOutage: time.Minute, Size: 1}) {
		names = append(names, r.name)
	}
	return names
}

// rows is the table at o's size.
func rows(o ProtectionOptions) []row {
	n := func(v int) int { return max(1, int(math.Round(float64(v)*o.Size))) }
	d := func(v time.Duration) time.Duration { return time.Duration(float64(v) * o.Size) }
	blip := func(name, title string, refuse bool) row {
		return row{name: name, title: title, events: n(600), arrival: 20, downFrom: d(5 * time.Second), downFor: d(10 * time.Second),
			refuse: refuse, wait: 2 * time.Minute,
			target: "every event within 5s of the return; ≤ 1.5 requests per event",
			judge: func(r *RowResult) (bool, string) {
				return r.Drained() && r.Drain <= 5*time.Second && r.PerEvent() <= 1.5,
					fmt.Sprintf("drain %s, %.2f requests per event", seconds(r.Drain), r.PerEvent())
			}}
	}
	long := int(math.Round(100 * o.LongOutage.Minutes()))
	return []row{
		{name: "fail-first", title: "fail-first: each event 503 on its first 3 attempts, all posted at once",
			events: n(50), failFirst: 3, wait: 2 * time.Minute,
			target: "all delivered within 20s of posting",
			judge: func(r *RowResult) (bool, string) {
				return r.Drained() && r.Drain <= 20*time.Second, "last delivery " + seconds(r.Drain) + " after the first post"
			}},
		blip("blip-503", "deploy blip: 20/s, 503 to everything from 5s to 15s", false),
		blip("blip-refused", "deploy blip: 20/s, connections refused from 5s to 15s", true),
		{name: "dead", title: "dead: 503 to everything for 60s while events arrive, then 200",
			events: n(100), arrival: float64(n(100)) / d(60*time.Second).Seconds(), downFor: d(60 * time.Second), wait: 2 * time.Minute,
			target: "≤ 150 attempts while down; first delivery ≤ 3s after the return; all within 10s",
			judge: func(r *RowResult) (bool, string) {
				return r.Drained() && r.DownAttempts <= 150 && r.FirstAfter >= 0 && r.FirstAfter <= 3*time.Second && r.Drain <= 10*time.Second,
					fmt.Sprintf("%d attempts while down, first %s, all %s after the return", r.DownAttempts, seconds(r.FirstAfter), seconds(r.Drain))
			}},
		{name: "long-outage", title: fmt.Sprintf("long outage: 100/min, connections refused for %s, then capacity 50/s", short(o.LongOutage)),
			events: max(1, long), arrival: 100.0 / 60, downFor: o.LongOutage, refuse: true, capacity: 50, wait: 5 * time.Minute,
			// The backend is probed about each second while it refuses
			// connections, so that its return is seen within a second:
			// 60 refused connections a minute, which never reach it,
			// whatever the traffic. Requests are what reached it.
			target: "drain ≤ 1.3 × minimum; ≤ 1.3 requests per event at the backend",
			judge: func(r *RowResult) (bool, string) {
				return r.Drained() && r.DrainRatio() <= 1.3 && r.BackendPerEvent() <= 1.3,
					fmt.Sprintf("drain ÷ minimum %.2f, %.2f requests per event at the backend (%.2f attempts, refused probes included)",
						r.DrainRatio(), r.BackendPerEvent(), r.PerEvent())
			}},
		{name: "overload", title: "overload: capacity 50/s, 503 above, all posted at once",
			events: n(1500), capacity: 50, wait: 5 * time.Minute,
			target: "drain ≤ 1.3 × minimum; ≤ 1.2 requests per event",
			judge: func(r *RowResult) (bool, string) {
				return r.Drained() && r.DrainRatio() <= 1.3 && r.PerEvent() <= 1.2,
					fmt.Sprintf("drain ÷ minimum %.2f, %.2f requests per event", r.DrainRatio(), r.PerEvent())
			}},
		{name: "poison", title: "poison: 20/s, 30 % of events always 500",
			events: n(200), arrival: 20, poison: 0.3, wait: 2 * time.Minute,
			target: "≥ 95 % of healthy events within 10s",
			judge: func(r *RowResult) (bool, string) {
				s := r.ShareWithin(10 * time.Second)
				return s >= 0.95, fmt.Sprintf("%.1f %% within 10s", 100*s)
			}},
		{name: "flaky", title: "flaky: 20/s, each attempt 503 with probability 0.5",
			events: n(100), arrival: 20, failShare: 0.5, wait: 15 * time.Minute,
			target: "p99 delay ≤ the schedule's own p99 + 1s",
			judge: func(r *RowResult) (bool, string) {
				own := percentile(r.Schedule, 99)
				return r.Drained() && r.P99() <= own+time.Second,
					fmt.Sprintf("p99 %s, the schedule's own %s", seconds(r.P99()), seconds(own))
			}},
	}
}

// RowResult is what the backend and jethook saw in one row.
type RowResult struct {
	Name, Title, Target string
	// Events counts the webhooks ingress acked; Healthy those not poison;
	// Delivered the healthy ones the backend answered 200.
	Events, Healthy, Delivered int
	// Requests counts the requests that reached the backend; Attempts
	// counts jethook's attempts, refused connections included.
	Requests, Attempts int
	// DownAttempts counts jethook's attempts while the backend was down.
	DownAttempts int
	// Repeats counts 200s to an event beyond its first; DeadLettered,
	// the dead letters jethook stored.
	Repeats, DeadLettered int
	// Returned is true for rows with an outage; FirstAfter runs from the
	// return to the backend's first 200 after it (-1: none).
	Returned   bool
	FirstAfter time.Duration
	// Backlog counts the healthy events posted before the return and not
	// delivered at it.
	Backlog int
	// Drain runs from the return (or, without an outage, from the first
	// post) until every healthy event posted before it was delivered; -1
	// if one never was. MinDrain is the least it can be at the backend's
	// capacity (0: no capacity, no minimum).
	Drain, MinDrain time.Duration
	// Delays are the healthy delivered events' times from post to 200,
	// sorted. Schedule, for a row whose events fail at random, is each
	// event's delay had every retry come exactly on its schedule.
	Delays, Schedule []time.Duration
	// PerSecond counts the backend's requests, Statuses its 200s, and
	// AttemptsPerSecond jethook's attempts, in each second from the first
	// post.
	PerSecond, OKPerSecond, AttemptsPerSecond []int
	// ReturnSecond is the second of PerSecond in which the backend
	// returned.
	ReturnSecond int
	Pass         bool
	Verdict      string
}

// Drained reports whether every healthy event was delivered.
func (r RowResult) Drained() bool { return r.Drain >= 0 && r.Delivered == r.Healthy }

// PerEvent is jethook's attempts per webhook.
func (r RowResult) PerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.Attempts) / float64(r.Events)
}

// BackendPerEvent is the requests that reached the backend per webhook.
func (r RowResult) BackendPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.Requests) / float64(r.Events)
}

// DrainRatio is Drain ÷ MinDrain; 0 without a minimum.
func (r RowResult) DrainRatio() float64 {
	if r.MinDrain <= 0 || r.Drain < 0 {
		return 0
	}
	return r.Drain.Seconds() / r.MinDrain.Seconds()
}

// P99 is the 99th percentile of the healthy events' delays.
func (r RowResult) P99() time.Duration { return percentile(r.Delays, 99) }

// ShareWithin is the share of healthy events delivered within d of their
// post.
func (r RowResult) ShareWithin(d time.Duration) float64 {
	if r.Healthy == 0 {
		return 0
	}
	n, _ := slices.BinarySearch(r.Delays, d+1)
	return float64(n) / float64(r.Healthy)
}

// ProtectionResult is the whole table.
type ProtectionResult struct {
	Options ProtectionOptions // with defaults applied
	Config  string            // the policies.yaml every row used
	Rows    []RowResult
}

// protectionPath is the protection route's path on jethook's ingress.
const protectionPath = "/hooks/protection"

// protectionConfig is jethook's defaults: a route and a destination with
// nothing but a URL.
const protectionConfig = `routes:
  - name: protection
    path: ` + protectionPath + `
    destinations:
      - {name: backend, url: "${BACKEND}"}
`

// Protection runs each row of the table on a fresh jethook (embedded
// store, ingress and forwarder, as serve assembles them) with the policy
// defaults, in front of a loopback backend that fails as the row says, and
// judges each against its target. Every row ends by itself: a bounded
// number of posts and a bounded wait for the deliveries.
func Protection(ctx context.Context, o ProtectionOptions) (ProtectionResult, error) {
	o.applyDefaults()
	res := ProtectionResult{Options: o, Config: protectionConfig}
	all := rows(o)
	for _, name := range o.Rows {
		i := slices.IndexFunc(all, func(r row) bool { return r.name == name })
		if i < 0 {
			return res, fmt.Errorf("no row %q; the rows are %s", name, strings.Join(ProtectionRows(), ", "))
		}
		fmt.Fprintf(o.Progress, "%s: %s\n", name, all[i].title)
		r, err := runRow(ctx, o, all[i])
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(o.Progress, "%s: %s\n", name, r.Verdict)
		res.Rows = append(res.Rows, r)
	}
	return res, nil
}

func runRow(ctx context.Context, o ProtectionOptions, spec row) (RowResult, error) {
	be := newRowBackend(spec)
	p, err := openPort(be)
	if err != nil {
		return RowResult{}, err
	}
	defer p.shut()
	cfg, err := policy.Parse("protection.yaml", []byte(protectionConfig), func(k string) (string, bool) {
		return p.url + protectionPath, k == "BACKEND"
	})
	if err != nil {
		return RowResult{}, err
	}
	var logger *slog.Logger
	if o.Log != nil {
		logger = slog.New(slog.NewTextHandler(o.Log, nil)).With("row", spec.name)
	}
	st, err := startStack(ctx, Options{Dir: o.Dir, Logger: logger}, cfg, false, true)
	if err != nil {
		return RowResult{}, fmt.Errorf("start jethook: %w", err)
	}
	defer st.close()
	attempts := func() int { return countAttempts(st) }

	if spec.downFor > 0 && spec.downFrom == 0 {
		be.setDown(true) // before the first post, which may otherwise be delivered
		if spec.refuse {
			p.shut()
		}
	}
	start := time.Now()
	ticks := startTicker(start, attempts)
	posted := make(chan []time.Time, 1)
	go func() { posted <- postRow(ctx, st.ingress.URL+protectionPath, spec, o.BodySize, start) }()

	var returned time.Time
	downAttempts := 0
	if spec.downFor > 0 {
		if !sleep(ctx, time.Until(start.Add(spec.downFrom))) {
			return RowResult{}, ctx.Err()
		}
		a0 := attempts()
		be.setDown(true)
		if spec.refuse {
			p.shut()
		}
		if spec.downFrom == 0 {
			a0 = 0
		}
		if !sleep(ctx, time.Until(start.Add(spec.downFrom+spec.downFor))) {
			return RowResult{}, ctx.Err()
		}
		downAttempts = attempts() - a0
		if spec.refuse {
			if err := p.reopen(ctx); err != nil {
				return RowResult{}, err
			}
		}
		returned = be.setDown(false)
	}
	postedAt := <-posted
	if ctx.Err() != nil {
		return RowResult{}, ctx.Err()
	}
	// Every healthy event has until its deadline: the last post or the
	// return, whichever is later, plus the row's wait.
	deadline := later(start.Add(spec.downFrom+spec.downFor), time.Now()).Add(spec.wait)
	for !be.settled(postedAt, st.cfg.Routes[0].Retry.MaxAttempts) && time.Now().Before(deadline) {
		if !sleep(ctx, 50*time.Millisecond) {
			return RowResult{}, ctx.Err()
		}
	}
	// jethook counts an attempt once it has read the answer, a moment
	// after the backend counted it.
	for settle := time.Now().Add(5 * time.Second); attempts() < be.requests() && time.Now().Before(settle); {
		if !sleep(ctx, 10*time.Millisecond) {
			return RowResult{}, ctx.Err()
		}
	}
	ticks.stop()
	r := be.result(spec, start, returned, postedAt, st.cfg.Routes[0].Retry)
	r.DownAttempts, r.AttemptsPerSecond = downAttempts, ticks.perSecond()
	for _, n := range r.AttemptsPerSecond {
		r.Attempts += n
	}
	stats, err := st.app.Store.Stats(ctx)
	if err != nil {
		return r, err
	}
	r.DeadLettered = int(stats.DeadLetters)
	r.Pass, r.Verdict = spec.judge(&r)
	if !r.Drained() {
		r.Verdict = fmt.Sprintf("%d of %d healthy events delivered, %d dead-lettered, %.2f requests per event",
			r.Delivered, r.Healthy, r.DeadLettered, r.PerEvent())
	}
	return r, nil
}

// countAttempts reads jethook's jethook_attempts_total, summed over its
// labels.
func countAttempts(st *stack) int {
	mfs, err := st.app.Registry.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "jethook_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return int(n)
}

// ticker reads a counter each second.
type ticker struct {
	done chan struct{}
	mu   sync.Mutex
	at   []int // the counter at the end of each second
	stop func()
}

func startTicker(start time.Time, read func() int) *ticker {
	t := &ticker{done: make(chan struct{})}
	stopped := make(chan struct{})
	t.stop = sync.OnceFunc(func() {
		close(t.done)
		<-stopped
		v := read() // the last, partial second
		t.mu.Lock()
		t.at = append(t.at, v)
		t.mu.Unlock()
	})
	go func() {
		defer close(stopped)
		for i := 1; ; i++ {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(i) * time.Second))):
			case <-t.done:
				return
			}
			v := read()
			t.mu.Lock()
			t.at = append(t.at, v)
			t.mu.Unlock()
		}
	}()
	return t
}

// perSecond is the counter's increase in each second read, the last
// one partial.
func (t *ticker) perSecond() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, prev := make([]int, len(t.at)), 0
	for i, v := range t.at {
		out[i], prev = v-prev, v
	}
	return out
}

// postRow posts the row's events to url, all at once (64 at a time) or
// at the row's arrival rate from start, and returns when each was acked
// (zero for a post ingress did not answer 200).
func postRow(ctx context.Context, url string, spec row, bodySize int, start time.Time) []time.Time {
	const clients = 64
	client := &http.Client{Transport: transport(clients), Timeout: 30 * time.Second}
	at := make([]time.Time, spec.events)
	slots := make(chan struct{}, clients)
	var wg sync.WaitGroup
	for i := range spec.events {
		if spec.arrival > 0 && !sleep(ctx, time.Until(start.Add(time.Duration(float64(i)/spec.arrival*float64(time.Second))))) {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			t := time.Now()
			if post(ctx, client, url, int64(i), bodySize) {
				at[i] = t
			}
		})
	}
	wg.Wait()
	return at
}

// port is the backend's loopback listener, which a row may close (new
// connections are refused) and open again on the same port.
type port struct {
	url  string
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func openPort(h http.Handler) (*port, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &port{addr: ln.Addr().String(), h: h}
	p.url = "http://" + p.addr
	p.serve(ln)
	return p, nil
}

func (p *port) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv = newServer(p.h)
	go func(s *http.Server) { _ = s.Serve(ln) }(p.srv)
}

// shut closes the listener and every connection: from now on connections
// are refused.
func (p *port) shut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		_ = p.srv.Close()
		p.srv = nil
	}
}

// reopen listens on the same port again, trying for up to 5 s in case the
// port is still being released.
func (p *port) reopen(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reopen %s: %w", p.addr, err)
		}
		if !sleep(ctx, 10*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// rowBackend answers as the row says and records every request.
type rowBackend struct {
	spec row

	mu       sync.Mutex
	down     bool
	second   int64 // the clock second inSecond counts
	inSecond int
	reqs     []time.Time // every request
	oks      []time.Time // every 200
	tries    []int       // requests per event
	failed   []int       // per event, 503s of the fail-share draw before its 200
	okAt     []time.Time // each event's first 200
	ids      []string    // each event's X-Webhook-Id
	repeats  int
}

func newRowBackend(spec row) *rowBackend {
	return &rowBackend{spec: spec, tries: make([]int, spec.events), failed: make([]int, spec.events),
		okAt: make([]time.Time, spec.events), ids: make([]string, spec.events)}
}

// poisoned reports whether event seq always gets 500: the same share of
// every run's events, spread evenly.
func (b *rowBackend) poisoned(seq int) bool {
	return b.spec.poison > 0 && math.Floor(float64(seq+1)*b.spec.poison) > math.Floor(float64(seq)*b.spec.poison)
}

// draw is a fixed pseudo-random number in [0, 1) for request n of event
// seq, so that every run fails the same requests.
func draw(seq, n int) float64 {
	return rand.New(rand.NewPCG(uint64(seq), uint64(n))).Float64()
}

func (b *rowBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	now := time.Now()
	seq, err := strconv.Atoi(r.Header.Get(seqHeader))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, now)
	if err != nil || seq < 0 || seq >= len(b.tries) {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	b.tries[seq]++
	b.ids[seq] = r.Header.Get("X-Webhook-Id")
	if s := now.Unix(); s != b.second {
		b.second, b.inSecond = s, 0
	}
	b.inSecond++
	switch {
	case b.down:
		w.WriteHeader(http.StatusServiceUnavailable)
	case b.spec.capacity > 0 && b.inSecond > b.spec.capacity:
		w.WriteHeader(http.StatusServiceUnavailable)
	case b.poisoned(seq):
		w.WriteHeader(http.StatusInternalServerError)
	case b.tries[seq] <= b.spec.failFirst:
		w.WriteHeader(http.StatusServiceUnavailable)
	case b.okAt[seq].IsZero() && b.spec.failShare > 0 && draw(seq, b.tries[seq]) < b.spec.failShare:
		b.failed[seq]++
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		b.oks = append(b.oks, now)
		if b.okAt[seq].IsZero() {
			b.okAt[seq] = now
		} else {
			b.repeats++
		}
		w.WriteHeader(http.StatusOK)
	}
}

// setDown switches the backend down (503 to everything) or back up, and
// returns when.
func (b *rowBackend) setDown(down bool) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
	return time.Now()
}

// requests counts the requests the backend has answered.
func (b *rowBackend) requests() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs)
}

// settled reports whether every acked healthy event has had its 200, or
// all its attempts (jethook dead-letters it then): nothing is left to
// wait for.
func (b *rowBackend) settled(postedAt []time.Time, attempts int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, at := range postedAt {
		if !at.IsZero() && !b.poisoned(i) && b.okAt[i].IsZero() && b.tries[i] < attempts {
			return false
		}
	}
	return true
}

// result reads the row's figures off the backend's records.
func (b *rowBackend) result(spec row, start, returned time.Time, postedAt []time.Time, retry policy.Retry) RowResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := RowResult{Name: spec.name, Title: spec.title, Target: spec.target, Requests: len(b.reqs), Repeats: b.repeats,
		Returned: !returned.IsZero(), FirstAfter: -1}
	from := start // the drain's start
	if r.Returned {
		from = returned
	}
	var last time.Time
	complete := true
	for i, at := range postedAt {
		if at.IsZero() {
			continue
		}
		r.Events++
		if b.poisoned(i) {
			continue
		}
		r.Healthy++
		ok := b.okAt[i]
		if ok.IsZero() {
			complete = false
			continue
		}
		r.Delivered++
		r.Delays = append(r.Delays, ok.Sub(at))
		if spec.failShare > 0 {
			var own time.Duration
			for n := 1; n <= b.failed[i]; n++ {
				own += retry.Delay(n, b.ids[i]+"/backend")
			}
			r.Schedule = append(r.Schedule, own)
		}
		if at.Before(from) || !r.Returned {
			last = later(last, ok)
			if r.Returned && ok.After(returned) {
				r.Backlog++
			}
		}
	}
	slices.Sort(r.Delays)
	slices.Sort(r.Schedule)
	if !r.Returned {
		r.Backlog = r.Healthy
	}
	r.Drain = max(last.Sub(from), 0)
	if !complete {
		r.Drain = -1
	}
	if spec.capacity > 0 {
		r.MinDrain = time.Duration(float64(r.Backlog) / float64(spec.capacity) * float64(time.Second))
	}
	if r.Returned {
		r.ReturnSecond = int(returned.Sub(start) / time.Second)
		if i := slices.IndexFunc(b.oks, func(t time.Time) bool { return !t.Before(returned) }); i >= 0 {
			r.FirstAfter = b.oks[i].Sub(returned)
		}
	}
	r.PerSecond, r.OKPerSecond = bySecond(b.reqs, start), bySecond(b.oks, start)
	return r
}

// bySecond counts the instants in each second from start.
func bySecond(at []time.Time, start time.Time) []int {
	var out []int
	for _, t := range at {
		i := max(int(t.Sub(start)/time.Second), 0)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// Report prints the table, then each row's target, verdict and requests
// per second.
func (res ProtectionResult) Report(w io.Writer) {
	fmt.Fprintf(w, "\nProtection: each row on a fresh jethook with the policy defaults (exponential from 2s, full jitter,\n")
	fmt.Fprintf(w, "12 attempts, concurrency 8, breaker failures 5, cooldown 5s), a loopback backend, 1 route:\n%s",
		indent(res.Config, "  "))
	fmt.Fprintf(w, "%-13s %6s %8s %8s %9s %11s %8s %8s %7s %9s %9s %s\n", "ROW", "EVENTS", "BACKEND", "ATTEMPTS",
		"REQ/EVENT", "FIRST AFTER", "DRAIN", "MINIMUM", "÷ MIN", "P99 DELAY", "DELIVERED", "RESULT")
	for _, r := range res.Rows {
		first, drain, minimum, ratio := "-", "-", "-", "-"
		if r.Returned && r.FirstAfter >= 0 {
			first = seconds(r.FirstAfter)
		}
		if r.Drain >= 0 {
			drain = seconds(r.Drain)
		}
		if r.MinDrain > 0 {
			minimum = seconds(r.MinDrain)
			if r.Drain >= 0 {
				ratio = fmt.Sprintf("%.2f", r.DrainRatio())
			}
		}
		result := "pass"
		if !r.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(w, "%-13s %6d %8d %8d %9.2f %11s %8s %8s %7s %9s %9s %s\n", r.Name, r.Events, r.Requests, r.Attempts,
			r.PerEvent(), first, drain, minimum, ratio, seconds(r.P99()), fmt.Sprintf("%d/%d", r.Delivered, r.Healthy), result)
	}
	fmt.Fprintln(w, "(backend: requests that reached it; attempts: jethook's, refused connections included; req/event: attempts ÷ events;")
	fmt.Fprintln(w, " first after: the return to the first 200; drain: the return (or the first post) until every event posted before it had its 200;")
	fmt.Fprintln(w, " minimum: that backlog at the backend's capacity; p99 delay: post to 200 of the healthy events)")
	for _, r := range res.Rows {
		fmt.Fprintf(w, "\n%s: %s\n", r.Name, r.Title)
		result := "pass"
		if !r.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(w, "  target: %s → %s (%s)\n", r.Target, result, r.Verdict)
		fmt.Fprintf(w, "  %d repeated deliveries, %d dead-lettered", r.Repeats, r.DeadLettered)
		if r.Returned {
			fmt.Fprintf(w, "; %d attempts while down; backlog at the return %d", r.DownAttempts, r.Backlog)
		}
		fmt.Fprintln(w)
		if len(r.Schedule) > 0 {
			fmt.Fprintf(w, "  delay p50 %s, p99 %s, max %s; on the schedule's own: p50 %s, p99 %s, max %s\n",
				seconds(percentile(r.Delays, 50)), seconds(r.P99()), seconds(percentile(r.Delays, 100)),
				seconds(percentile(r.Schedule, 50)), seconds(percentile(r.Schedule, 99)), seconds(percentile(r.Schedule, 100)))
		}
		from, to := window(r)
		fmt.Fprintf(w, "  per second, from second %d:\n", from)
		fmt.Fprintf(w, "    requests %s\n", counts(r.PerSecond, from, to))
		fmt.Fprintf(w, "    200s     %s\n", counts(r.OKPerSecond, from, to))
		fmt.Fprintf(w, "    attempts %s\n", counts(r.AttemptsPerSecond, from, to))
	}
}

// window is the seconds of a row worth printing: around the return, or
// from the start, at most 90.
func window(r RowResult) (from, to int) {
	if r.Returned {
		from = max(r.ReturnSecond-10, 0)
	}
	n := max(len(r.PerSecond), len(r.AttemptsPerSecond))
	return from, min(n, from+90)
}

func counts(v []int, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(' ')
		}
		n := 0
		if i < len(v) {
			n = v[i]
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// short prints a duration without trailing zero units: 15m, 90s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
