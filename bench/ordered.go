package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/internal/procs"
	"github.com/jethook/jethook/policy"
)

// OrderedOptions configure the ordered scenario; a zero field takes its
// default.
type OrderedOptions struct {
	// Keys and PerKey shape the interleaved case: PerKey events of each of
	// Keys keys, posted interleaved, each key's in order (default 10,000 ×
	// 10), with Fail of the attempts answered 500 at random (default 0.2).
	Keys, PerKey int
	Fail         float64
	// ThroughputPerKey is the events per key of the throughput case, run
	// unordered then ordered on the same backlog (default 3).
	ThroughputPerKey int
	// Healthy keys share Rate events a second for Duration in the blocked
	// case, beside one key whose head always fails (defaults 1,000, 200/s,
	// 20s); MaxBlocked is the destination's max_blocked (default 5s).
	Healthy, Rate int
	Duration      time.Duration
	MaxBlocked    time.Duration
	// MemoryKeys distinct keys, MemoryBlocked of them behind a head that
	// always fails, are posted in the memory case (defaults 1,000,000 and
	// 100,000): one event per key, and one more waiting behind each
	// failing head.
	MemoryKeys, MemoryBlocked int
	// Cases to run, of interleaved, throughput, blocked and memory
	// (default the first three).
	Cases []string
	// Concurrency is the destination's concurrency (default 64).
	Concurrency int
	// Clients post concurrently (default 64).
	Clients int
	// Dir holds the stores' temporary data directories.
	Dir string
	// Progress, if set, hears what each case is doing.
	Progress io.Writer
}

func (o *OrderedOptions) applyDefaults() {
	o.Keys = cmpOr(o.Keys, 10_000)
	o.PerKey = cmpOr(o.PerKey, 10)
	if o.Fail <= 0 {
		o.Fail = 0.2
	}
	o.ThroughputPerKey = cmpOr(o.ThroughputPerKey, 3)
	o.Healthy = cmpOr(o.Healthy, 1000)
	o.Rate = cmpOr(o.Rate, 200)
	if o.Duration <= 0 {
		o.Duration = 20 * time.Second
	}
	if o.MaxBlocked <= 0 {
		o.MaxBlocked = 5 * time.Second
	}
	o.MemoryKeys = cmpOr(o.MemoryKeys, 1_000_000)
	o.MemoryBlocked = cmpOr(o.MemoryBlocked, 100_000)
	if len(o.Cases) == 0 {
		o.Cases = []string{"interleaved", "throughput", "blocked"}
	}
	o.Concurrency = cmpOr(o.Concurrency, 64)
	o.Clients = cmpOr(o.Clients, 64)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// OrderedResult is what the ordered scenario measured.
type OrderedResult struct {
	Options OrderedOptions // with defaults applied
	// The interleaved case.
	Events, Delivered, Inversions, Duplicates, DeadLettered int
	Attempts                                                int
	Drain                                                   time.Duration // from the first post to the last first delivery
	// PeakRSS and HeapAfter are this process's peak resident set (VmHWM)
	// after the interleaved case, and its Go heap in use once it drained.
	PeakRSS, HeapAfter uint64
	// The throughput case: a backlog of Keys × ThroughputPerKey drained,
	// unordered and ordered: the rate, and the process's CPU per event.
	Unordered, Ordered Delivery
	// The blocked case, run on an unordered destination first (the
	// baseline) and then on an ordered one.
	HealthyEvents              int
	HealthyP50, HealthyP99     time.Duration // from the post's answer to the first delivery
	UnorderedP50, UnorderedP99 time.Duration // the same, unordered
	BlockedEvents              int
	BlockedInOrder             bool          // the blocked key's later events arrived in order
	BlockedHeld                time.Duration // from the blocked head's first attempt to its next event's delivery
	BlockedDeadLetterReason    string
	BlockedDeliveredAfterHead  int
	// The memory case: this process's RSS and Go heap once MemoryKeys
	// keys were delivered or blocked, the index's size on disk, and how
	// long a status read of the blocked keys took.
	Memory *OrderedMemory
}

// OrderedMemory is what the memory case measured.
type OrderedMemory struct {
	Keys, Blocked, Waiting int
	Posted                 time.Duration // to post every event
	RSS, PeakRSS, Heap     uint64
	IndexBytes             uint64
	StatusRead             time.Duration
}

// orderBody is a bench event of an ordered destination.
type orderBody struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
	Pad string `json:"pad"`
}

// orderedBackend answers 500 to a share of the attempts (and to every
// attempt of the blocked key's head) and checks each key's order.
type orderedBackend struct {
	fail    float64
	blocked string // its seq 1 always fails

	mu         sync.Mutex
	rnd        *rand.Rand
	highest    map[string]int
	seen       map[string]bool // key#seq delivered
	attempts   int
	first      int
	inversions int
	duplicates int
	firstTry   map[string]time.Time
	at         map[string]time.Time // key#seq → first delivery
	done       chan struct{}
	want       int
}

func newOrderedBackend(fail float64, blocked string, want int) *orderedBackend {
	return &orderedBackend{fail: fail, blocked: blocked, rnd: rand.New(rand.NewPCG(1, 2)), highest: map[string]int{},
		seen: map[string]bool{}, firstTry: map[string]time.Time{}, at: map[string]time.Time{}, done: make(chan struct{}), want: want}
}

func (b *orderedBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev orderBody
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	now := time.Now()
	id := fmt.Sprintf("%s#%d", ev.Key, ev.Seq)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
	if _, ok := b.firstTry[id]; !ok && ev.Key == b.blocked {
		b.firstTry[id] = now
	}
	if (ev.Key == b.blocked && ev.Seq == 1) || b.rnd.Float64() < b.fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	switch {
	case b.seen[id]:
		b.duplicates++
	default:
		if ev.Seq < b.highest[ev.Key] {
			b.inversions++
		}
		b.seen[id] = true
		b.at[id] = now
		b.first++
		b.highest[ev.Key] = max(b.highest[ev.Key], ev.Seq)
		if b.first == b.want {
			close(b.done)
		}
	}
	w.WriteHeader(http.StatusOK)
}

func orderedConfig(order string, concurrency int) string {
	return fmt.Sprintf(`
defaults:
  retry: {backoff: exponential, base: 50ms, multiplier: 2, max_delay: 1s, jitter: full, max_attempts: 1000, max_age: 1h}
routes:
  - name: bench
    path: %s
    destinations:
      - {name: backend, url: "${BACKEND}", concurrency: %d, breaker: {failures: 0}, slow_start: 0s%s}
`, hookPath, concurrency, order)
}

// Ordered runs the cases of ordered delivery per key that o.Cases names.
func Ordered(ctx context.Context, o OrderedOptions) (OrderedResult, error) {
	o.applyDefaults()
	r := OrderedResult{Options: o}
	if slices.Contains(o.Cases, "interleaved") {
		if err := orderedInterleaved(ctx, o, &r); err != nil {
			return r, fmt.Errorf("interleaved: %w", err)
		}
	}
	if slices.Contains(o.Cases, "throughput") {
		var err error
		if r.Unordered, err = orderedDrain(ctx, o, ""); err != nil {
			return r, fmt.Errorf("throughput, unordered: %w", err)
		}
		if r.Ordered, err = orderedDrain(ctx, o, ", order: {key: 'body.key'}"); err != nil {
			return r, fmt.Errorf("throughput, ordered: %w", err)
		}
	}
	if slices.Contains(o.Cases, "blocked") {
		if err := orderedBlocked(ctx, o, &r); err != nil {
			return r, fmt.Errorf("blocked: %w", err)
		}
	}
	if slices.Contains(o.Cases, "memory") {
		if err := orderedMemory(ctx, o, &r); err != nil {
			return r, fmt.Errorf("memory: %w", err)
		}
	}
	return r, nil
}

// startOrdered starts jethook on cfg in front of be.
func startOrdered(ctx context.Context, o OrderedOptions, yaml string, be http.Handler, deliver bool) (*stack, *server, error) {
	srv, err := listen(be)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := policy.Parse("ordered.yaml", []byte(yaml), func(k string) (string, bool) { return srv.URL, k == "BACKEND" })
	if err != nil {
		srv.close()
		return nil, nil, err
	}
	st, err := startStack(ctx, Options{Dir: o.Dir}, cfg, false, deliver)
	if err != nil {
		srv.close()
		return nil, nil, err
	}
	return st, srv, nil
}

// postKeys posts perKey events of each of keys keys from o.Clients
// clients, each key's in order and interleaved with the others.
func postKeys(ctx context.Context, o OrderedOptions, url string, keys, perKey int) error {
	client := &http.Client{Transport: transport(o.Clients), Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, o.Clients)
	pad := string(bytes.Repeat([]byte("x"), 512))
	for c := range o.Clients {
		wg.Go(func() {
			for seq := 1; seq <= perKey; seq++ {
				for k := c; k < keys; k += o.Clients {
					b, _ := json.Marshal(orderBody{Key: fmt.Sprintf("k%d", k), Seq: seq, Pad: pad})
					if err := postOne(ctx, client, url, b); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func postOne(ctx context.Context, client *http.Client, url string, body []byte) error {
	// A 503 (the store was slow to take it, on a busy machine) is posted
	// again, as a provider would, before the poster's next event.
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case resp.StatusCode != http.StatusServiceUnavailable || try == postTries:
			return fmt.Errorf("ingress answered %d", resp.StatusCode)
		}
		if !sleep(ctx, time.Duration(try)*100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// postTries is how many times postOne posts an event the ingress answers
// 503.
const postTries = 10

func orderedInterleaved(ctx context.Context, o OrderedOptions, r *OrderedResult) error {
	r.Events = o.Keys * o.PerKey
	fmt.Fprintf(o.Progress, "ordered: %d keys × %d events, %.0f %% of attempts failing\n", o.Keys, o.PerKey, o.Fail*100)
	be := newOrderedBackend(o.Fail, "", r.Events)
	st, srv, err := startOrdered(ctx, o, orderedConfig(", order: {key: 'body.key'}", o.Concurrency), be, true)
	if err != nil {
		return err
	}
	defer srv.close()
	defer st.close()
	began := time.Now()
	if err := postKeys(ctx, o, st.ingress.URL+hookPath, o.Keys, o.PerKey); err != nil {
		return err
	}
	select {
	case <-be.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("%d of %d delivered after 10 minutes", be.first, r.Events)
	}
	r.Drain = time.Since(began)
	stats, err := st.app.Store.Stats(ctx)
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	_, r.PeakRSS = procMemory("self")
	r.HeapAfter = ms.HeapInuse
	be.mu.Lock()
	defer be.mu.Unlock()
	r.Delivered, r.Inversions, r.Duplicates, r.Attempts = be.first, be.inversions, be.duplicates, be.attempts
	r.DeadLettered = int(stats.DeadLetters)
	return nil
}

// orderedDrain posts a backlog with delivery paused, then times its drain
// and the CPU it took.
func orderedDrain(ctx context.Context, o OrderedOptions, order string) (Delivery, error) {
	n := o.Keys * o.ThroughputPerKey
	fmt.Fprintf(o.Progress, "ordered: draining %d events of %d keys%s\n", n, o.Keys, order)
	be := newOrderedBackend(0, "", n)
	st, srv, err := startOrdered(ctx, o, orderedConfig(order, o.Concurrency), be, false)
	if err != nil {
		return Delivery{}, err
	}
	defer srv.close()
	defer st.close()
	if err := postKeys(ctx, o, st.ingress.URL+hookPath, o.Keys, o.ThroughputPerKey); err != nil {
		return Delivery{}, err
	}
	began, cpu0 := time.Now(), procs.CPUTime()
	if err := st.resume(); err != nil {
		return Delivery{}, err
	}
	select {
	case <-be.done:
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	case <-time.After(10 * time.Minute):
		return Delivery{}, fmt.Errorf("%d of %d delivered after 10 minutes", be.first, n)
	}
	return Delivery{Delivered: n, Elapsed: time.Since(began), CPU: procs.CPUTime() - cpu0}, nil
}

func orderedBlocked(ctx context.Context, o OrderedOptions, r *OrderedResult) error {
	base, err := blockedCase(ctx, o, "")
	if err != nil {
		return fmt.Errorf("unordered: %w", err)
	}
	r.UnorderedP50, r.UnorderedP99 = base.p50, base.p99
	c, err := blockedCase(ctx, o, fmt.Sprintf(", order: {key: 'body.key', max_blocked: %s}", o.MaxBlocked))
	if err != nil {
		return err
	}
	r.HealthyEvents, r.HealthyP50, r.HealthyP99 = c.healthy, c.p50, c.p99
	r.BlockedEvents, r.BlockedDeadLetterReason = c.blockedEvents, c.reason
	be := c.be
	be.mu.Lock()
	defer be.mu.Unlock()
	r.BlockedInOrder = be.inversions == 0
	for s := 2; s <= r.BlockedEvents; s++ {
		if _, ok := be.at[fmt.Sprintf("%s#%d", blockedKey, s)]; ok {
			r.BlockedDeliveredAfterHead++
		}
	}
	r.BlockedHeld = be.at[blockedKey+"#2"].Sub(be.firstTry[blockedKey+"#1"])
	return nil
}

// blockedKey is the key whose head always fails in the blocked case.
const blockedKey = "blocked"

// blockedRun is one run of the blocked case.
type blockedRun struct {
	be            *orderedBackend
	healthy       int           // healthy events delivered
	p50, p99      time.Duration // of their delivery delays
	blockedEvents int
	reason        string // of the first dead letter
}

// blockedCase posts o.Rate events a second of o.Healthy keys for
// o.Duration, and one a second of blockedKey, whose first event always
// fails, to a destination with order (empty: unordered), and waits for
// every other event to be delivered.
func blockedCase(ctx context.Context, o OrderedOptions, order string) (blockedRun, error) {
	fmt.Fprintf(o.Progress, "ordered: %d healthy keys at %d/s for %s beside one blocked key%s\n", o.Healthy, o.Rate, o.Duration, order)
	n := int(o.Duration.Seconds() * float64(o.Rate))
	out := blockedRun{blockedEvents: int(o.Duration.Seconds())} // one a second
	be := newOrderedBackend(0, blockedKey, n+out.blockedEvents-1)
	out.be = be
	st, srv, err := startOrdered(ctx, o, orderedConfig(order, o.Concurrency), be, true)
	if err != nil {
		return out, err
	}
	defer srv.close()
	defer st.close()
	url := st.ingress.URL + hookPath
	client := &http.Client{Transport: transport(maxInFlight), Timeout: 30 * time.Second}
	pad := string(bytes.Repeat([]byte("x"), 512))
	var mu sync.Mutex
	answered := map[string]time.Time{}
	var wg sync.WaitGroup
	var postErr error
	send := func(key string, seq int) {
		b, _ := json.Marshal(orderBody{Key: key, Seq: seq, Pad: pad})
		err := postOne(ctx, client, url, b)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			postErr = err
			return
		}
		answered[fmt.Sprintf("%s#%d", key, seq)] = time.Now()
	}
	interval := time.Second / time.Duration(o.Rate)
	began := time.Now()
	for i := range n {
		if i%o.Rate == 0 {
			// The blocked key's events go one a second, each after the
			// one before was stored.
			send(blockedKey, i/o.Rate+1)
		}
		k, seq := i%o.Healthy, i/o.Healthy+1
		wg.Go(func() { send(fmt.Sprintf("h%d", k), seq) })
		if !sleep(ctx, time.Until(began.Add(time.Duration(i+1)*interval))) {
			return out, ctx.Err()
		}
	}
	wg.Wait()
	if postErr != nil {
		return out, postErr
	}
	select {
	case <-be.done:
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(2*o.MaxBlocked + time.Minute):
		return out, fmt.Errorf("%d of %d delivered", be.first, n+out.blockedEvents-1)
	}
	dls, err := st.app.Store.DeadLetters(ctx, "dlq.>", 10)
	if err != nil {
		return out, err
	}
	if len(dls) > 0 {
		out.reason = dls[0].Reason
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	var delays []time.Duration
	for id, at := range be.at {
		if a, ok := answered[id]; ok && id[0] == 'h' {
			delays = append(delays, max(0, at.Sub(a)))
		}
	}
	slices.Sort(delays)
	out.healthy = len(delays)
	if len(delays) > 0 {
		out.p50 = delays[len(delays)/2]
		out.p99 = delays[len(delays)*99/100]
	}
	return out, nil
}

// Report prints the ordered scenario against the targets of ordered
// delivery (docs/ordering.md).
func (r OrderedResult) Report(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\nOrdered delivery per key: destination concurrency %d, %d posting clients\n", o.Concurrency, o.Clients)
	if slices.Contains(o.Cases, "interleaved") {
		fmt.Fprintf(w, "interleaved: %d keys × %d events, %.0f %% of attempts failing at random\n", o.Keys, o.PerKey, o.Fail*100)
		fmt.Fprintf(w, "  delivered %d of %d in %s (%d attempts), %d inversions (target 0), %d delivered twice, %d dead-lettered\n",
			r.Delivered, r.Events, r.Drain.Round(time.Millisecond), r.Attempts, r.Inversions, r.Duplicates, r.DeadLettered)
		fmt.Fprintf(w, "  memory: peak RSS %s, Go heap in use after the drain %s (events queued behind their key's head wait on disk)\n",
			mib(r.PeakRSS), mib(r.HeapAfter))
	}
	if slices.Contains(o.Cases, "throughput") {
		ratio := 0.0
		if u := r.Unordered.PerSecond(); u > 0 {
			ratio = r.Ordered.PerSecond() / u
		}
		fmt.Fprintf(w, "throughput: a backlog of %d keys × %d events drained at %.0f/s unordered, %.0f/s ordered: %.2f× (target ≥ 0.8×)\n",
			o.Keys, o.ThroughputPerKey, r.Unordered.PerSecond(), r.Ordered.PerSecond(), ratio)
		fmt.Fprintf(w, "  CPU of the whole process (jethook, its NATS server, the backend) per event drained: %.0fµs unordered, %.0fµs ordered\n",
			r.Unordered.CPUPerEvent().Seconds()*1e6, r.Ordered.CPUPerEvent().Seconds()*1e6)
	}
	if slices.Contains(o.Cases, "blocked") {
		fmt.Fprintf(w, "blocked key: %d healthy keys at %d/s for %s, one key whose head always fails (max_blocked %s)\n",
			o.Healthy, o.Rate, o.Duration, o.MaxBlocked)
		fmt.Fprintf(w, "  healthy keys: %d events, delivery delay p50 %s, p99 %s (target p99 ≤ 100ms); unordered, same traffic, same run: p50 %s, p99 %s\n",
			r.HealthyEvents, millis(r.HealthyP50), millis(r.HealthyP99), millis(r.UnorderedP50), millis(r.UnorderedP99))
		fmt.Fprintf(w, "  blocked key: head dead-lettered (%s); its next event delivered %s after the head's first attempt; %d of %d later events delivered, in order: %v\n",
			r.BlockedDeadLetterReason, r.BlockedHeld.Round(time.Millisecond), r.BlockedDeliveredAfterHead, r.BlockedEvents-1, r.BlockedInOrder)
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "memory: %d distinct keys, one event each, %d of them behind a head that always fails with one more event waiting (posted in %s)\n",
			m.Keys, o.MemoryBlocked, m.Posted.Round(time.Second))
		fmt.Fprintf(w, "  %d keys blocked, %d events waiting behind their key: RSS %s (peak %s), Go heap in use %s, index on disk %s; a status read of the blocked keys took %s\n",
			m.Blocked, m.Waiting, mib(m.RSS), mib(m.PeakRSS), mib(m.Heap), mib(m.IndexBytes), m.StatusRead.Round(time.Millisecond))
	}
}

// orderedMemory posts one event for each of o.MemoryKeys keys, the first
// o.MemoryBlocked of which fail for good, then one more event for each of
// those, which waits behind it; once every other event is delivered and
// every failing head holds its key, it reads this process's memory.
func orderedMemory(ctx context.Context, o OrderedOptions, r *OrderedResult) error {
	fmt.Fprintf(o.Progress, "ordered: %d distinct keys, %d of them blocked behind a failing head\n", o.MemoryKeys, o.MemoryBlocked)
	var delivered atomic.Int64
	be := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev orderBody
		if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if strings.HasPrefix(ev.Key, "b") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		delivered.Add(1)
	})
	// A failing head's next attempt is an hour away: it parks, as a retry
	// that far away does, and holds its key meanwhile.
	yaml := fmt.Sprintf(`
defaults:
  retry: {backoff: fixed, delay: 1h, jitter: none, max_attempts: 1000, max_age: 24h}
routes:
  - name: bench
    path: %s
    destinations:
      - {name: backend, url: "${BACKEND}", concurrency: %d, breaker: {failures: 0}, slow_start: 0s, order: {key: 'body.key', max_blocked: 2h}}
`, hookPath, o.Concurrency)
	st, srv, err := startOrdered(ctx, o, yaml, be, true)
	if err != nil {
		return err
	}
	defer srv.close()
	defer st.close()
	client := &http.Client{Transport: transport(o.Clients), Timeout: 30 * time.Second}
	pad := string(bytes.Repeat([]byte("x"), 512))
	url := st.ingress.URL + hookPath
	post := func(n, seq int, key func(i int) string) error {
		var wg sync.WaitGroup
		errs := make(chan error, o.Clients)
		for c := range o.Clients {
			wg.Go(func() {
				for i := c; i < n; i += o.Clients {
					b, _ := json.Marshal(orderBody{Key: key(i), Seq: seq, Pad: pad})
					if err := postOne(ctx, client, url, b); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	key := func(i int) string {
		if i < o.MemoryBlocked {
			return fmt.Sprintf("b%d", i)
		}
		return fmt.Sprintf("k%d", i)
	}
	began := time.Now()
	if err := post(o.MemoryKeys, 1, key); err != nil {
		return err
	}
	if err := post(o.MemoryBlocked, 2, key); err != nil {
		return err
	}
	m := &OrderedMemory{Keys: o.MemoryKeys, Posted: time.Since(began)}
	healthy := int64(o.MemoryKeys - o.MemoryBlocked)
	deadline := time.Now().Add(30 * time.Minute)
	for {
		b, err := st.app.Store.Blocked("bench", "backend")
		if err != nil {
			return err
		}
		m.Blocked, m.Waiting = b.Keys, b.Waiting
		// A healthy key's attempt that timed out on a busy machine waits
		// an hour for its next, blocked too: at least MemoryBlocked.
		if delivered.Load() >= healthy && b.Keys >= o.MemoryBlocked && b.Waiting == o.MemoryBlocked {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30 minutes: %d of %d delivered, %d keys blocked, %d events waiting", delivered.Load(), healthy, b.Keys, b.Waiting)
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	t := time.Now()
	if _, err := st.app.Store.Backlogs(ctx); err != nil {
		return err
	}
	if _, err := st.app.Store.OldestBlocked("bench", "backend", 10); err != nil {
		return err
	}
	m.StatusRead = time.Since(t)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	m.Heap = ms.HeapInuse
	m.RSS, m.PeakRSS = procMemory("self")
	if n, err := dirSize(filepath.Join(st.dir, "index")); err == nil {
		m.IndexBytes = uint64(n)
	}
	r.Memory = m
	return nil
}
