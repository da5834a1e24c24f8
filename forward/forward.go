// Package forward delivers stored webhooks to their destinations. One loop
// per route × destination fetches from that destination's durable consumer
// no more messages than it has free request slots, posts each to the
// backend, and settles it: Ack on 2xx, NakWithDelay on a transient failure,
// or a dead letter (stored and acked first) then Term when the failure is
// permanent or the retry policy is exhausted.
package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
	"github.com/jethook/jethook/transform"
)

// ackMargin is added to a destination's timeout to make the consumer's
// AckWait: the server redelivers only if jethook itself died mid-attempt,
// so it is also how long such a message waits after a crash. Settling
// after the attempt (a dead letter's publish) first extends the wait with
// InProgress, then takes at most settleWait, so that the message is never
// redelivered while an attempt still holds it.
const ackMargin = 5 * time.Second

// settleWait bounds a dead letter's publish: InProgress has just given the
// message a whole AckWait again (a timeout plus ackMargin, whatever a
// reload made the timeout), and a Nak must reach the server before it runs
// out.
const settleWait = ackMargin - time.Second

// What is left of a response body is read, so that its connection can
// carry the next attempt, only up to maxDrain bytes and for drainWait (and
// never past the attempt's timeout); a longer or slower body is closed,
// and its connection with it.
const (
	maxDrain  = 64 << 10
	drainWait = time.Second
)

// Forwarder runs the delivery loops. Set the fields, then call Start.
type Forwarder struct {
	// Store holds the messages and dead letters. Required.
	Store *store.Store
	// Transport sends attempts; nil uses one made for jethook (see
	// newTransport). Each attempt is a single round trip: a 3xx comes back
	// as it is, never followed: a redirect is a permanent configuration
	// error (docs/design.md, "Retry policy").
	Transport http.RoundTripper
	// Egress are the rules on the addresses attempts may connect to,
	// checked on every connection newTransport dials; nil is
	// egress.Default(). A Transport set by the caller dials as it likes.
	Egress *egress.Rules
	// Logger gets one line per failed attempt and per dead letter.
	Logger *slog.Logger
	// Now is the clock for Retry-After dates, dead-letter times and the
	// attempts' times and latencies.
	Now func() time.Time
	// FetchWait bounds one fetch from a consumer (default 2s); it is also how
	// long Stop may wait for a loop to notice.
	FetchWait time.Duration
	// Metrics records attempts, deliveries, dead letters and breaker
	// state; nil records nothing.
	Metrics *metrics.Metrics
	// Alerts hears of dead letters and breakers; nil tells no one.
	Alerts Alerts
	// ParkAfter is the shortest wait before a next attempt that parks the
	// webhook in the store (store.Park) instead of leaving it nak-delayed
	// in its consumer (default 5s).
	ParkAfter time.Duration
	// Tracer, when not nil, makes a client span of each attempt in the
	// trace stored with its webhook, sends its traceparent to the
	// backend, and records dead letters (package telemetry). Nil traces
	// nothing, at no cost.
	Tracer trace.Tracer

	stop     context.CancelFunc
	abort    context.CancelFunc
	loops    sync.WaitGroup
	inflight sync.WaitGroup
	reg      registry // running loops, for Reload, Status, Pause (reload.go)
	returned returned // messages handed back unattempted (handBack)
}

// Start creates or updates the consumer of every destination in cfg and
// starts delivering. It returns once every consumer exists.
func (f *Forwarder) Start(ctx context.Context, cfg *policy.Config) error {
	if f.Egress == nil {
		f.Egress = egress.Default()
	}
	if f.Transport == nil {
		f.Transport = newTransport(f.Egress, nil)
	}
	if f.Logger == nil {
		f.Logger = slog.New(slog.DiscardHandler)
	}
	if f.Now == nil {
		f.Now = time.Now
	}
	if f.FetchWait <= 0 {
		f.FetchWait = 2 * time.Second
	}
	if f.ParkAfter <= 0 {
		f.ParkAfter = DefaultParkAfter
	}
	var dests []*destination
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			dst, err := f.newDestination(ctx, r, d)
			if err != nil {
				return err
			}
			dests = append(dests, dst)
		}
	}
	fetchCtx, stop := context.WithCancel(context.Background())
	attemptCtx, abort := context.WithCancel(context.Background())
	f.stop, f.abort = stop, abort
	f.reg.start(f, fetchCtx, attemptCtx, dests)
	return nil
}

// newDestination creates or updates route r's destination d's consumer and
// returns its loop, not yet running.
func (f *Forwarder) newDestination(ctx context.Context, r policy.Route, d policy.Destination) (*destination, error) {
	flt, err := newFilter(d)
	if err != nil {
		return nil, fmt.Errorf("route %q destination %q: %w", r.Name, d.Name, err)
	}
	tf, err := newTransform(r, d)
	if err != nil {
		return nil, fmt.Errorf("route %q destination %q: %w", r.Name, d.Name, err)
	}
	rt := f.Transport
	if d.Auth != nil && d.Auth.TLS != nil {
		base, ok := f.Transport.(*http.Transport)
		if !ok {
			base = newTransport(f.Egress, nil)
		}
		if rt, err = newTLSTransport(base, *d.Auth.TLS); err != nil {
			return nil, fmt.Errorf("route %q destination %q: auth.tls: %w", r.Name, d.Name, err)
		}
	}
	ord, err := newOrder(d)
	if err != nil {
		return nil, fmt.Errorf("route %q destination %q: %w", r.Name, d.Name, err)
	}
	c, err := f.Store.Consumer(ctx, r.Name, d.Name, d.Timeout+ackMargin)
	if err != nil {
		return nil, err
	}
	u, badURL := parseDest(d.URL)
	dst := &destination{f: f, route: r, dest: d, url: u, badURL: badURL, spanAttrs: attemptAttrs(r, d), cons: c, filter: flt, transform: tf, rt: rt, auth: newAuth(d.Auth, tokenClient(rt), f.Now), order: ord,
		log:   f.Logger.With("route", r.Name, "destination", d.Name),
		gate:  newGate(d, f.Now),
		ended: make(chan struct{}, 1),
		jobs:  make(chan job)}
	if d.Pull != nil {
		dst.leases = newLeases()
		dst.leases.d = dst
	}
	dst.expectReturns()
	if ord != nil {
		dst.owner = newOwner(dst, f.Store.Ownership(r.Name, d.Name))
	}
	return dst, nil
}

// Stop stops fetching, lets attempts in flight finish for up to grace, then
// cancels the rest (they are Nak'd and redelivered later). Nothing is lost:
// a message not settled stays in its consumer.
func (f *Forwarder) Stop(grace time.Duration) {
	if f.stop == nil {
		return
	}
	f.reg.close()
	f.stop()
	f.loops.Wait()
	done := make(chan struct{})
	go func() { f.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		f.abort()
		<-done
	}
	f.abort()
	f.reg.release()
}

// destination is the delivery loop of one route × destination.
type destination struct {
	f     *Forwarder
	route policy.Route
	dest  policy.Destination
	cons  jetstream.Consumer
	log   *slog.Logger
	gate  *gate
	// metrics records its attempts; set when its loop starts (launch) and
	// removed when a reload stops it.
	metrics *metrics.Destination

	inflight atomic.Int64
	ended    chan struct{} // a signal each time an attempt ends
	jobs     chan job      // to the workers waiting for an attempt (start)
	last     lastAttempt   // latest success and failure, for Status
	// refetch is when an ordered destination may fetch again after a
	// fetch that ended late (awaitDropped); its loop's alone.
	refetch time.Time
	// dropsBack is when what may have been sent to a fetch and not
	// attempted has come back (expectReturns), in Unix nanoseconds: what
	// the run, loop or owner before this one handed back or held when it
	// died, once this one starts to fetch; what nats.go may have dropped
	// of a fetch that ended late (endedLate). Until then hold numbers a
	// message that comes again after the attempts the attempt log holds
	// (renumber).
	dropsBack atomic.Int64

	filter    *destFilter    // nil: every event is attempted
	transform *destTransform // nil: every attempt sends the event as stored

	url    *url.URL          // dest.URL parsed once, for every attempt
	badURL error             // why dest.URL does not parse: every attempt fails with it
	rt     http.RoundTripper // the Forwarder's Transport, or one with the destination's TLS files
	auth   *auth
	order  *destOrder // nil: unordered
	owner  *owner     // an ordered destination's lease, when replicas may share it (owner.go); nil otherwise
	leases *leases    // a pull destination's (lease.go); nil for a push destination
	waits  shortWaits // messages nak'd for a short backoff, for RetryNow (retrynow.go)

	spanAttrs []attribute.KeyValue // what every attempt span says of the destination (trace.go)
}

func (d *destination) run(fetchCtx, attemptCtx context.Context) {
	defer close(d.jobs) // no attempt starts after the loop: the workers end
	if d.order != nil {
		defer d.sweepLost(fetchCtx)()
		d.awaitInherited(fetchCtx)
		d.expectReturns() // after the wait, which can outlast the window of the start
	} else {
		d.unorder(fetchCtx)
	}
	for fetchCtx.Err() == nil {
		if d.owner != nil && !d.owner.own(fetchCtx) {
			continue
		}
		if wait := time.Until(d.refetch); wait > 0 {
			if d.owner != nil {
				wait = min(wait, d.owner.every()) // the lease is kept meanwhile
			}
			d.idle(fetchCtx, wait)
			continue
		}
		n, wait, probe := d.gate.admit(int(d.inflight.Load()))
		if n == 0 {
			if d.owner != nil && (wait == 0 || wait > d.owner.every()) {
				wait = d.owner.every() // the lease is kept while the gate is shut
			}
			d.idle(fetchCtx, wait)
			continue
		}
		got := 0
		if k := d.tokens(fetchCtx, n); k > 0 {
			got = d.fetch(fetchCtx, attemptCtx, k, probe)
		}
		if probe && got == 0 {
			d.gate.unprobe()
		}
	}
}

// idle waits until an attempt ends, wait passes (if not 0) or ctx ends.
func (d *destination) idle(ctx context.Context, wait time.Duration) {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-d.ended:
	case <-timer:
	case <-ctx.Done():
	}
}

// tokens takes up to n tokens from the destination's rate limiter, waiting
// for the first, so that no fetched message ever waits for one.
func (d *destination) tokens(ctx context.Context, n int) int {
	l := d.gate.limiter
	if l == nil {
		return n
	}
	got := d.gate.takeCredit(n)
	if got == 0 {
		if l.Tokens() < 1 {
			d.gate.contend()
		}
		if err := l.Wait(ctx); err != nil {
			return 0
		}
		got = 1
	}
	for got < n && l.Allow() {
		got++
	}
	return got
}

// fetch pulls up to n messages and starts an attempt for each; it returns
// how many arrived. probe is true when the one message is the breaker's
// probe.
//
// The fetch ends on the server's word (FetchMaxWait), never on a client
// deadline: nats.go drops a message that arrives after the client gave up
// on its fetch, and that message came back only after its ack wait, with
// an attempt number one higher and, for an ordered destination, behind the
// events of its key that came after it. When jethook stops fetching while
// a fetch is open, handBack gives back what else arrives. But nats.go
// also ends a fetch on its own clock, a second after its wait (lateFetch):
// an ordered destination then waits for what it may have dropped to come
// back before it fetches again (awaitDropped).
func (d *destination) fetch(fetchCtx, attemptCtx context.Context, n int, probe bool) int {
	began := time.Now()
	batch, err := d.cons.Fetch(n, jetstream.FetchMaxWait(d.f.FetchWait))
	got, received := 0, 0
	if err == nil {
		msgs := batch.Messages()
		for {
			var m jetstream.Msg
			var ok bool
			select {
			case m, ok = <-msgs:
			case <-fetchCtx.Done():
				if d.order == nil {
					go d.handBack(msgs, false) // no order to keep: stopping need not wait for the fetch to end
					return got
				}
				d.handBack(msgs, true)
				return got
			}
			if !ok {
				break
			}
			group, admitted := []jetstream.Msg{m}, true
			if d.order != nil {
				// What else has arrived goes through the ordering with
				// m, in one write.
				group = append(group, arrived(msgs)...)
				received += len(group)
				group, admitted = d.admit(fetchCtx, group)
			} else {
				received++
			}
			got += len(group)
			for _, m := range group {
				d.start(attemptCtx, fetchCtx.Done(), m, probe)
			}
			if !admitted {
				// The ordering gave its messages back: what the fetch
				// still brings goes back behind them.
				d.handBack(msgs, false)
				return got
			}
		}
		err = batch.Error()
		if received < n && time.Since(began) >= d.f.FetchWait+lateFetch {
			d.endedLate(time.Since(began))
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && fetchCtx.Err() == nil {
		d.log.Warn("fetch failed", "err", err)
		select {
		case <-time.After(time.Second):
		case <-fetchCtx.Done():
		}
	}
	return got
}

// lateFetch is how long after its wait nats.go ends a fetch that the
// server has not ended (with its 408), on the client's clock. The server
// may still send messages to it, which nats.go drops: JetStream counts
// them delivered, and sends them again only after their ack wait. A fetch
// ends this late only when the process stalled for over a second (a
// pause, a starved CPU) while it was open, or the server answered late.
const lateFetch = time.Second

// endedLate handles a fetch that ended late, which nats.go may have
// dropped messages of. The server sent such messages at most its wait
// after the fetch ended here; they come back after their ack wait,
// counted delivered once more. Until then (and a second for the server's
// timers), a message that comes again is numbered after its logged
// attempts (renumber), not by JetStream's count. An ordered destination
// also fetches nothing new until then: the consumer sends such messages
// again before any message it has not sent yet, and a later event of
// their key fetched before then would take the key first. When nothing
// was dropped, which jethook cannot tell, the wait costs an ordered
// destination that much delay.
func (d *destination) endedLate(took time.Duration) {
	wait := d.comeBack()
	d.expectReturns()
	msg := "a fetch ended late, after a stall of this process or of the server; what the server sent it meanwhile comes back after its ack wait"
	if d.order != nil {
		d.refetch = time.Now().Add(wait)
		msg += ", and this ordered destination fetches nothing new until then"
	}
	d.log.Warn(msg, "took", took.Round(time.Millisecond).String(), "wait", wait.String())
}

// comeBack is how long a message sent to a fetch of the destination and
// not settled takes at most to come back to its consumer: the fetch's
// wait, then its ack wait.
func (d *destination) comeBack() time.Duration { return d.f.FetchWait + d.dest.Timeout + ackMargin }

// expectReturns opens (or extends) the window in which hold numbers a
// message that comes again by the attempts the attempt log holds
// (renumber) to comeBack and a second (for the server's timers) from now:
// after a fetch that ended late, and when the destination starts to fetch,
// since what the run, loop or owner before was sent and never attempted
// (handed back, dropped, or taken when it died) comes back meanwhile,
// counted delivered once more.
func (d *destination) expectReturns() {
	until := time.Now().Add(d.comeBack() + time.Second).UnixNano()
	for {
		was := d.dropsBack.Load()
		if was >= until || d.dropsBack.CompareAndSwap(was, until) {
			return
		}
	}
}

// handBack naks what a fetch still delivers after jethook stopped
// fetching, unattempted, so that it comes again at once (to this process
// after a reload) instead of after its ack wait. Until the fetch ends
// (within FetchWait and a second) that may be new messages too. It
// returns when the fetch has ended. An ordered destination's loop waits
// for it, so that a loop that starts on the consumer after it (a
// reload's) gets what was handed back before anything newer, and no
// event of an ordering key goes before an earlier one that this fetch
// held; an unordered one's loop does not. JetStream counts each as a
// delivery: returned keeps the count, so that the next fetch here does
// not number an attempt that was never made.
//
// With order true, an ordered destination first puts the messages through
// its ordering: an event whose key has a head is queued behind it, as a
// fetch would, and only the rest is handed back. Handed back, such an
// event would come again before its head if the head waits out a
// backoff in the consumer, and a jethook that takes the destination over
// (store.TakeOver) knows of the head nothing that would hold the event.
func (d *destination) handBack(msgs <-chan jetstream.Msg, order bool) {
	order = order && d.order != nil
	for m := range msgs {
		if !order {
			d.giveBack(m, 0)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleWait)
		back, ok := d.admit(ctx, append([]jetstream.Msg{m}, arrived(msgs)...))
		cancel()
		for _, m := range back {
			d.giveBack(m, 0)
		}
		order = ok // the ordering cannot be read: the rest goes back as it is
	}
}

// giveBack naks m, unattempted, to come again after delay, and counts the
// delivery in returned, so that its next fetch here does not number an
// attempt that was never made.
func (d *destination) giveBack(m jetstream.Msg, delay time.Duration) {
	md, err := m.Metadata()
	if err != nil {
		_ = nakAfter(m, delay)
		return
	}
	// Counted before the nak, which may bring it back at once.
	d.f.returned.add(md.Stream, md.Consumer, md.Sequence.Stream)
	if err := nakAfter(m, delay); err != nil {
		d.f.returned.take(md.Stream, md.Consumer, md.Sequence.Stream)
	}
}

func nakAfter(m jetstream.Msg, delay time.Duration) error {
	if delay > 0 {
		return m.NakWithDelay(delay)
	}
	return m.Nak()
}

// forget drops the count returned keeps of m, which is settled here and
// does not come back.
func (d *destination) forget(m jetstream.Msg) {
	if d.f.returned.empty.Load() {
		return
	}
	if md, err := m.Metadata(); err == nil {
		d.f.returned.take(md.Stream, md.Consumer, md.Sequence.Stream)
	}
}

// returned counts, per consumer and stream sequence, the deliveries of
// messages handed back unattempted, for the next fetch of each to take off
// its attempt number. A message that does not come back to this process
// (its destination removed, the process stopping) stays counted until
// returnedMax messages are, when the count starts over.
type returned struct {
	mu    sync.Mutex
	n     map[returnedKey]int
	empty atomic.Bool // no count kept: take need not lock (most of the time)
}

type returnedKey struct {
	stream, consumer string
	seq              uint64
}

const returnedMax = 4096

func (r *returned) add(stream, consumer string, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil || len(r.n) >= returnedMax {
		r.n = make(map[returnedKey]int)
	}
	r.n[returnedKey{stream, consumer, seq}]++
	r.empty.Store(false)
}

// take returns and forgets the count of the message.
func (r *returned) take(stream, consumer string, seq uint64) int {
	if r.empty.Load() {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := returnedKey{stream, consumer, seq}
	n := r.n[k]
	delete(r.n, k)
	r.empty.Store(len(r.n) == 0)
	return n
}

// count returns the count of the message and keeps it.
func (r *returned) count(stream, consumer string, seq uint64) int {
	if r.empty.Load() {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[returnedKey{stream, consumer, seq}]
}

// start makes m's attempt on one of the destination's workers: a goroutine
// that outlives its attempt and waits for the next, so that an attempt
// does not begin on a small stack and grow it deep inside net/http or a
// transform's engine, copying every frame each time. An attempt that finds
// no worker waiting starts one. Workers stay while the destination's loop
// runs: there are about as many as its attempts were in flight at once,
// each parked on a stack the garbage collector shrinks.
func (d *destination) start(attemptCtx context.Context, stopping <-chan struct{}, m jetstream.Msg, probe bool) {
	d.inflight.Add(1)
	d.f.inflight.Add(1)
	j := job{ctx: attemptCtx, stopping: stopping, m: m, probe: probe}
	select {
	case d.jobs <- j:
	default:
		go d.work(j)
	}
}

// job is an attempt start hands to a worker.
type job struct {
	ctx      context.Context
	stopping <-chan struct{}
	m        jetstream.Msg
	probe    bool
}

// work makes j's attempt, then those start hands it, until the
// destination's loop ends (run closes jobs).
func (d *destination) work(j job) {
	if d.transform != nil {
		// The script's run nests deep: make room while nothing is
		// above to copy.
		transform.GrowStack()
	}
	for ok := true; ok; j, ok = <-d.jobs {
		d.attempted(j)
	}
}

// attempted makes j's attempt and counts it ended.
func (d *destination) attempted(j job) {
	defer d.f.inflight.Done()
	d.attempt(j.ctx, j.stopping, j.m, j.probe)
	if om, ok := j.m.(*orderedMsg); ok {
		om.end() // if its settle did not
	}
	d.inflight.Add(-1)
	select {
	case d.ended <- struct{}{}:
	default:
	}
}

// arrived takes the messages already waiting in msgs, without waiting for
// more.
func arrived(msgs <-chan jetstream.Msg) []jetstream.Msg {
	var out []jetstream.Msg
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return out
			}
			out = append(out, m)
		default:
			return out
		}
	}
}

// DefaultParkAfter is the default Forwarder.ParkAfter: JetStream keeps a
// nak-delayed message in its consumer's memory (about 184 B), counts it
// against MaxAckPending and scans it on every timer, so only the short
// first waits stay there.
const DefaultParkAfter = 5 * time.Second

// held is a fetched message and what an attempt needs of it. A due record
// (a parked webhook come back) stands for the original webhook: its
// sequence, its stored time and the attempts made so far.
type held struct {
	m     jetstream.Msg
	n     int       // this attempt's number
	seq   uint64    // the webhook's sequence in WEBHOOKS
	first time.Time // when the webhook was stored
	due   bool      // came back from parking
	queue bool      // messages not yet delivered waited behind it when it was fetched
	local int       // attempts made here as the breaker's probe, which JetStream's count of deliveries does not know
}

// hold reads m into an envelope and its held facts. ok is false when m was
// settled or handed back here (a due record early or without its original).
func (d *destination) hold(ctx context.Context, m jetstream.Msg) (e *store.Envelope, h held, ok bool) {
	md, err := m.Metadata()
	if err != nil {
		d.log.Error("message without metadata", "err", err)
		_ = m.Nak()
		return nil, h, false
	}
	h = held{m: m, n: int(md.NumDelivered), seq: md.Sequence.Stream, first: md.Timestamp, queue: md.NumPending > 0}
	back := d.f.returned.take(md.Stream, md.Consumer, md.Sequence.Stream)
	h.n = max(h.n-back, 1)
	if store.IsDue(m) {
		var p store.Parked
		e, p, err = d.f.Store.LoadDue(ctx, m)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			_ = m.NakWithDelay(5 * time.Second)
			return nil, h, false
		case err != nil:
			d.log.Error("parked webhook gone; dropping its due record", "seq", p.Seq, "err", err)
			_ = m.Term()
			return nil, h, false
		}
		if p.Waiting && d.order == nil {
			// A waiting record at a destination no longer ordered: the
			// release of its key's queue (unorder) carried the event.
			_ = m.Ack()
			return nil, h, false
		}
		if wait := p.Due.Sub(d.f.Now()); wait > time.Millisecond {
			_ = m.NakWithDelay(wait) // early (the clocks of two replicas differ): wait out the rest
			return nil, h, false
		}
		h = held{m: m, n: p.Attempts + 1, seq: p.Seq, first: p.FirstSeen, due: true, queue: h.queue}
	} else if e, err = decode(m); err != nil {
		// Not written by jethook's ingress (no event id): kept as a dead
		// letter under its stream sequence, body and all, not dropped.
		e = &store.Envelope{Route: d.route.Name, EventID: fmt.Sprintf("seq-%d", md.Sequence.Stream), Body: m.Data()}
		o := Outcome{Kind: Permanent, Err: err, Reason: "undecodable: " + err.Error(), Unsent: true}
		d.deadLetter(ctx, h, e, o, "permanent", d.eventLog(e, h.n))
		return nil, h, false
	}
	// A due record of an ordered head given back here (it came while the
	// head was in an attempt) may have been overtaken by that attempt's
	// own parked record: checked against the attempt log as it is now.
	givenBack := h.due && back > 0 && d.order != nil
	if (d.f.Store.Inherited(md.Sequence.Stream) || givenBack) && !d.resume(ctx, e, &h, givenBack) {
		return nil, h, false
	}
	if !h.due {
		n := d.renumber(ctx, e, h.n, h.first)
		for ; h.n > n; h.n-- {
			// Kept, so that the message's next delivery here (after a
			// nak) takes them off too.
			d.f.returned.add(md.Stream, md.Consumer, md.Sequence.Stream)
		}
	}
	return e, h, true
}

// renumber returns the number of the attempt that a message of e (stored
// at first) makes, given n, its number by JetStream's count of deliveries
// less what returned kept. That is n, except inside the window
// expectReturns opens (what was sent to a fetch and never attempted comes
// back, counted delivered once more): then it is the number after the
// attempt this destination made before a short wait of the message
// (shortWaits.made), or else after the attempts the attempt log holds of
// e at this destination, if lower. It waits for the attempt log to be
// read to its end first, so that an attempt logged a moment ago counts.
func (d *destination) renumber(ctx context.Context, e *store.Envelope, n int, first time.Time) int {
	if n <= 1 || time.Now().UnixNano() >= d.dropsBack.Load() {
		return n
	}
	if made, ok := d.waits.made(e.EventID); ok {
		// Nak'd here for a short wait after an attempt, which the
		// attempt log may not have read back yet: the attempt after it.
		return min(n, made+1)
	}
	last, ok, err := d.f.Store.LoggedAttempt(ctx, d.route.Name, d.dest.Name, e.EventID, first)
	switch {
	case err != nil:
		return n // JetStream's count: at worst one too high
	case ok:
		return min(n, last.Attempt+1)
	}
	return 1
}

// resume checks a message that a run of jethook killed before this one may
// have attempted (store.Inherited) against the attempt log: each attempt
// is logged before its message is settled, and the record is on disk
// within milliseconds, where the embedded server may lose the settle of
// the last tenth of a second or so. It reports false when the attempt log
// shows the message settled, and acks it without an attempt:
//   - the event was delivered (its ack was lost): attempting it again
//     would deliver it twice;
//   - its latest attempt parked it, and this message is the one parked
//     or a due record already attempted: the parked record carries the
//     event on, and a second copy would go through the schedule too.
//
// Otherwise the message is the event's one copy. If the logged attempts
// reach its number (a nak was lost), its next attempt is numbered after
// them, so that X-Webhook-Attempt repeats no logged attempt; that count, which
// JetStream's count of deliveries does not know, then goes with the
// event when it waits (h.local parks it).
//
// With givenBack, h is a due record of an ordered head given back here while
// the head was in an attempt, and the attempt log is read once it has
// every attempt logged so far: a later attempt that parked the event
// carries it on, and the copy is stale (a release published twice, a
// record carried again) and settled here, not a second line of attempts.
func (d *destination) resume(ctx context.Context, e *store.Envelope, h *held, givenBack bool) bool {
	var last store.Attempt
	var ok bool
	var err error
	if givenBack {
		last, ok, err = d.f.Store.LoggedAttempt(ctx, d.route.Name, d.dest.Name, e.EventID, h.first)
	} else {
		last, ok, err = d.f.Store.LastAttempt(d.route.Name, d.dest.Name, e.EventID, h.first)
	}
	if err != nil || !ok {
		return true // not attempted since it was stored (or unknown): attempt it
	}
	if last.Outcome == Delivered.String() || last.Parked && (!h.due || last.Attempt >= h.n) {
		msg := "settled before a restart (the settle was lost); not attempted again"
		if givenBack {
			msg = "a copy of a key's head was overtaken by a later attempt; not attempted again"
		}
		d.eventLog(e, h.n).Info(msg, "logged_attempt", last.Attempt, "outcome", last.Outcome, "parked", last.Parked)
		if om, ok := h.m.(*orderedMsg); ok && last.Outcome != Delivered.String() {
			om.parked = true // the parked record carries the event on, and it keeps its key
		}
		_ = h.m.Ack()
		return false
	}
	if last.Attempt >= h.n {
		h.local += last.Attempt + 1 - h.n
		h.n = last.Attempt + 1
	}
	return true
}

// attempt makes the HTTP attempt for m and settles it. While the
// destination is down and m is the breaker's probe, that may be up to
// probeStreak attempts in a row (see gate.reprobe). stopping closes when
// jethook stops fetching.
func (d *destination) attempt(ctx context.Context, stopping <-chan struct{}, m jetstream.Msg, probe bool) {
	e, h, ok := d.hold(ctx, m)
	if !ok || d.filtered(ctx, h, e) {
		return
	}
	if !probe {
		if ok, until := d.gate.fetched(); !ok {
			// Fetched before the gate shut (the breaker opened, a
			// Retry-After pause began) and arrived after: it waits,
			// unattempted.
			d.putBack(ctx, h, e, until)
			return
		}
	}
	for d.try(ctx, stopping, &h, e) {
		h.n++
		h.local++
	}
}

// try makes attempt h.n and settles it; it reports whether the event is
// to be attempted again at once, as the breaker's probe.
func (d *destination) try(ctx context.Context, stopping <-chan struct{}, h *held, e *store.Envelope) (again bool) {
	m, n := h.m, h.n
	d.metrics.AttemptStarted()
	defer d.metrics.AttemptEnded()
	actx, cancel := context.WithTimeout(ctx, d.dest.Timeout)
	defer cancel()
	var span trace.Span
	if d.f.Tracer != nil {
		actx, span = d.startAttempt(actx, e)
	}
	began := d.f.Now()
	o := d.send(actx, e, n, h.seq)
	now := d.f.Now() // the attempt's end: one reading serves its latency, the gate, its record
	latency := now.Sub(began)
	var due time.Time // of the next attempt, for the span
	if span != nil {
		o.Span = span.SpanContext()
		defer func() { d.endAttempt(span, e, n, o, due) }()
	}
	if o.Dropped {
		d.gate.unprobe()
		d.dropped(ctx, *h, e)
		return false
	}
	if ctx.Err() != nil && o.Kind != Delivered {
		// Shutdown cut this attempt short: hand the message back at once.
		_ = m.Nak()
		return false
	}
	d.last.record(o, now)
	retry := d.route.Retry
	if o.RetryAfter > 0 {
		o.RetryAfter = retry.ClampRetryAfter(o.RetryAfter)
	}
	var v verdict
	if o.Unsent {
		// Says nothing about the backend; if this was the breaker's
		// probe, the next message probes instead.
		d.gate.unprobe()
	} else {
		v = d.gate.record(o, n == 1, began, now)
		d.reportGate(e, n, v)
	}
	switch o.Kind {
	case Delivered:
		d.observe(e, h.first, n, o, latency, now, 0, false)
		if d.log.Enabled(ctx, slog.LevelDebug) {
			d.eventLog(e, n).With(telemetry.LogAttrs(span)...).Debug("delivered", "status", o.Status)
		}
		if err := m.Ack(); err != nil {
			d.eventLog(e, n).Warn("ack failed; the backend may see this event again", "err", err)
		}
		return false
	case Transient:
		log := d.eventLog(e, n).With(telemetry.LogAttrs(span)...)
		key := e.EventID + "/" + d.dest.Name
		next := retry.Delay(n, key)
		if v.victim {
			next = min(next, victimDelay(retry, key, n))
		}
		if o.RetryAfter > 0 {
			next = o.RetryAfter
		}
		next = max(next, minRetryDelay)
		reason := "exhausted"
		if left, ordered := d.blockedLeft(m, now); ordered {
			// The head holds its key: its attempts end at max_blocked.
			if left <= 0 {
				reason = "max_blocked"
			} else {
				next = min(next, left)
			}
		}
		if reason == "exhausted" && !exhausted(retry, n, now.Sub(h.first), next, v) {
			logged := func(parked bool) { d.observe(e, h.first, n, o, latency, now, next, parked) }
			if v.again {
				d.observe(e, h.first, n, o, latency, now, v.wait, false)
				due = now.Add(v.wait)
				log.Info("probe failed; the destination is down and this event probes it again", "outcome", o.Reason, "status", o.Status, errAttr(o.Err), "next", v.wait.Round(time.Millisecond).String())
				if d.probeAgain(ctx, stopping, m) {
					return true
				}
				logged = nil
			} else {
				log.Info("attempt failed; will retry", "outcome", o.Reason, "status", o.Status, errAttr(o.Err), "next", next.Round(time.Millisecond).String())
			}
			if due.IsZero() {
				due = now.Add(next)
			}
			d.retryLater(ctx, *h, e, now.Add(next), log, logged)
			return false
		}
		if v.again {
			d.gate.unhold()
		}
		d.observe(e, h.first, n, o, latency, now, 0, false)
		d.deadLetter(ctx, *h, e, o, reason, log)
	case Permanent:
		if o.Transform != nil {
			d.transformFailed(ctx, *h, e, o)
			return false
		}
		d.observe(e, h.first, n, o, latency, now, 0, false)
		d.deadLetter(ctx, *h, e, o, "permanent", d.eventLog(e, n).With(telemetry.LogAttrs(span)...))
	}
	return false
}

// minRetryDelay is the shortest wait before a retry. The attempt log reads
// a failed attempt without a next one as the event's last (dead-lettered,
// or settled for an ordered destination), so a retry due at once (a zero
// delay, or a jittered draw of 0) is logged, and made, this much later.
const minRetryDelay = time.Millisecond

// exhausted reports whether attempt n, which failed, was the event's last.
// A probe that found the destination still down, and an overload answer
// that was the load's doing, do not count towards max_attempts: an outage
// or an overload must not use up the attempts of the events it happened
// to hit; only max_age ends them.
func exhausted(r policy.Retry, n int, age, next time.Duration, v verdict) bool {
	if v.probe || v.victim {
		n = 1
	}
	return r.Exhausted(n, age, next)
}

// victimDelay is the wait after attempt n of the event keyed key failed
// with an overload answer that was the load's doing: the schedule's first
// step, jittered anew for each attempt, so that the event goes back behind
// the load at the learned limit's pace rather than after the backoff of
// all its attempts.
func victimDelay(r policy.Retry, key string, n int) time.Duration {
	return r.Delay(1, key+"#"+strconv.Itoa(n))
}

// reportGate logs what attempt n of e changed at the gate, and brings the
// destination's waiting retries forward when it came back.
func (d *destination) reportGate(e *store.Envelope, n int, v verdict) {
	switch {
	case v.opened:
		g := d.gate.status()
		d.eventLog(e, n).Warn("breaker open: the destination delivers nothing; one probe at a time until it answers",
			"failures", g.Failures, "attempts", g.Attempts, "next_probe", g.Cooldown)
	case v.recovered:
		d.eventLog(e, n).Info("destination back: its waiting retries come forward, at the learned limit")
		d.f.Store.Release(d.route.Name, d.dest.Name)
	}
}

// inProgressEvery is how often a held probe's message is told to the
// server as still in progress: well within its AckWait (the timeout plus
// ackMargin).
const inProgressEvery = ackMargin / 2

// probeAgain waits until the gate lets the held probe's event probe again,
// keeping m from being redelivered meanwhile. It reports false when the
// event may not (the destination came back through another attempt, an
// operator paused it, or jethook stops): it then waits on its own
// schedule.
func (d *destination) probeAgain(ctx context.Context, stopping <-chan struct{}, m jetstream.Msg) bool {
	for {
		ok, wait := d.gate.reprobe()
		if ok {
			return true
		}
		if wait <= 0 {
			return false
		}
		_ = m.InProgress()
		t := time.NewTimer(min(wait, inProgressEvery))
		select {
		case <-t.C:
		case <-stopping:
			t.Stop()
			d.gate.unhold()
			return false
		case <-ctx.Done():
			t.Stop()
			d.gate.unhold()
			return false
		}
	}
}

// eventLog is the destination's logger with the event and attempt, built
// only when there is something to log: a delivery logs nothing above debug.
func (d *destination) eventLog(e *store.Envelope, attempt int) *slog.Logger {
	return d.log.With("event_id", e.EventID, "attempt", attempt)
}

// send makes attempt number attempt of webhook seq: the HTTP request, and
// what came back classified.
func (d *destination) send(ctx context.Context, e *store.Envelope, attempt int, seq uint64) (out Outcome) {
	var req *http.Request
	err := d.badURL
	if err == nil {
		req, err = newRequestTo(ctx, d.url, e, attempt)
	}
	if err != nil {
		return Outcome{Kind: Permanent, Err: err, Reason: "bad request: " + err.Error(), Unsent: true}
	}
	body := e.Body
	if d.transform != nil {
		var o Outcome
		var ok bool
		if body, o, ok = d.guardedTransform(req, e, attempt, seq); !ok {
			return o
		}
		defer func() {
			if !out.Unsent {
				out.Sent = o.Sent
			}
		}()
	}
	if d.f.Tracer != nil {
		telemetry.Inject(ctx, req.Header)
	}
	if rs := d.dest.Resign; rs != nil {
		// Fresh Standard Webhooks headers on every attempt, so a late retry
		// still passes the backend's timestamp check; over what is sent.
		if err := resign(req.Header, e.EventID, body, rs, d.f.Now()); err != nil {
			return Outcome{Kind: Permanent, Err: err, Reason: "resign: " + err.Error(), Unsent: true}
		}
	}
	resp, err := d.roundTrip(ctx, req)
	if o, ok := egressRefused(err); ok {
		return o
	}
	if te, ok := errors.AsType[*TokenError](err); ok {
		// The backend was not called; the breaker counts it like a
		// backend that cannot be reached.
		return Outcome{Kind: Transient, Err: te, Reason: "oauth2 token"}
	}
	if err != nil {
		return Classify(d.route.Retry, nil, err, d.f.Now)
	}
	if resp.Body == http.NoBody {
		// Nothing to read (net/http's answer without a body, such as
		// a Content-Length: 0): nothing to close at the context's end.
		return Classify(d.route.Retry, resp, nil, d.f.Now)
	}
	// The attempt ends with its context whatever the backend sends: a
	// 101's body is the raw connection, which the request's context does
	// not cancel, and a Transport need not cancel reads of a body either.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer func() {
		stop()
		resp.Body.Close()
	}()
	if resp.StatusCode >= 200 {
		drain(resp.Body)
	}
	return Classify(d.route.Retry, resp, nil, d.f.Now)
}

// retryLater has the next attempt made at due: a short wait is a
// NakWithDelay; a long one, any wait of a webhook that was parked already
// or made attempts as the breaker's probe (the parked record counts them,
// where JetStream's count of deliveries would not), or any wait while the destination is busy and webhooks wait behind this
// one (its retry must not jump their queue), parks it (store.Park) and
// acks the message. If parking fails the message is nak'd with the delay
// instead, so nothing is lost. logged, unless nil, logs the attempt once
// it is known where the event waits and before the message is settled,
// which is what resume reads after a crash.
func (d *destination) retryLater(ctx context.Context, h held, e *store.Envelope, due time.Time, log *slog.Logger, logged func(parked bool)) {
	m, wait := h.m, due.Sub(d.f.Now())
	if wait >= d.f.ParkAfter || h.due || h.local > 0 || h.queue && d.gate.busy() {
		err := d.park(ctx, m, e, store.Parked{Seq: h.seq, Attempts: h.n, FirstSeen: h.first, Due: due})
		if err == nil {
			if logged != nil {
				logged(true)
			}
			if err := m.Ack(); err != nil {
				log.Warn("ack after parking failed; the attempt may be made twice", "err", err)
			}
			return
		}
		log.Warn("parking failed; waiting in the consumer instead", "err", err)
	}
	if logged != nil {
		logged(false)
	}
	if err := d.waits.nak(m, e.EventID, h.n, max(wait, 0), d.f.Now()); err != nil {
		log.Warn("nak failed; the message returns after its ack wait", "err", err)
	}
}

// putBack parks h, not attempted, until due. The parked record keeps the
// attempts made so far, which JetStream's count of deliveries, raised by
// this one, would not. If parking fails the message is nak'd instead, and
// its next attempt's number is one too high.
func (d *destination) putBack(ctx context.Context, h held, e *store.Envelope, due time.Time) {
	p := store.Parked{Seq: h.seq, Attempts: h.n - 1, FirstSeen: h.first, Due: due}
	if md, err := h.m.Metadata(); err == nil {
		p.Again = md.Sequence.Stream
	}
	if err := d.park(ctx, h.m, e, p); err != nil {
		d.eventLog(e, h.n).Warn("parking failed; waiting in the consumer instead", "err", err)
		_ = h.m.NakWithDelay(max(due.Sub(d.f.Now()), 0))
		return
	}
	if err := h.m.Ack(); err != nil {
		d.eventLog(e, h.n).Warn("ack after parking failed; the event may be attempted twice", "err", err)
	}
}

// park stores p, e's parked record, and waits for the stream's ack, after
// telling the server that m is still in progress: parking may take up to
// settleWait.
//
// The parked record of a key's head carries its key, and the head keeps
// its key while it waits (orderedMsg).
func (d *destination) park(ctx context.Context, m jetstream.Msg, e *store.Envelope, p store.Parked) error {
	_ = m.InProgress()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWait)
	defer cancel()
	om, ordered := m.(*orderedMsg)
	if ordered {
		p.Key, p.Ordered = om.key, true
	}
	err := d.f.Store.Park(sctx, d.route.Name, d.dest.Name, e.EventID, p)
	if err == nil && ordered {
		om.parked = true
	}
	return err
}

// drain reads what is left of a response body: see maxDrain.
func drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
}

// deadLetter stores the dead letter, waits for its ack, then terminates the
// message. If the dead letter cannot be stored the message is Nak'd and
// comes back, so nothing is lost.
func (d *destination) deadLetter(ctx context.Context, h held, e *store.Envelope, o Outcome, reason string, log *slog.Logger) {
	m := h.m
	dl := store.DeadLetter{
		Envelope:    e,
		Destination: d.dest.Name,
		Seq:         h.seq,
		Reason:      reason,
		LastStatus:  o.Status,
		Attempts:    h.n,
		FirstSeen:   h.first,
		LastAttempt: d.f.Now(),
	}
	if o.Err != nil {
		dl.LastError = errText(o.Err)
	}
	if o.Detail != "" {
		dl.LastError = o.Detail
	}
	if _, ordered := m.(*orderedMsg); ordered {
		dl.OrderKey, _ = d.order.key.Eval(&filter.Event{Route: e.Route, Method: e.Method, Header: e.Header, Body: e.Body})
	}
	_ = m.InProgress() // the dead letter's publish may take up to settleWait
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWait)
	defer cancel()
	if err := d.f.Store.AddDeadLetter(sctx, dl); err != nil {
		log.Error("dead letter not stored; will try again", "err", err)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	log.Warn("dead-lettered", "reason", reason, "outcome", o.Reason, "status", o.Status, errAttr(o.Err))
	d.traceDeadLetter(ctx, e, h.n, reason, o)
	d.deadLettered(e, reason)
	if err := m.Term(); err != nil {
		log.Warn("term failed; the message may be dead-lettered again (stored once)", "err", err)
	}
}

// errAttr logs err under "err" without the destination URL (it may carry a
// token), or nothing when err is nil.
func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("err", errText(err))
}
