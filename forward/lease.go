package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/store"
)

// A pull destination (policy.Pull) has no delivery loop: a client fetches
// its webhooks with Pull, each under a lease as long as the destination's
// timeout, and settles each with Ack or Nak. The messages are the
// destination's consumer's, fetched and settled as a push destination's
// are; a lease is a fetched message that waits for its client instead of
// for a backend. A nak, and a lease that runs out, is a failed attempt: the
// webhook waits on the route's schedule (nak-delayed, or parked) and is
// dead-lettered once the schedule is exhausted. The consumer's AckWait
// (timeout + ackMargin) outlasts every lease, so JetStream redelivers a
// leased message only when jethook itself stopped.

// Limits of pull destinations, per destination.
const (
	// MaxPullBatch is the most webhooks one Pull returns.
	MaxPullBatch = 256
	// MaxPullWait is the longest long poll: under the public listener's
	// 30 s write timeout.
	MaxPullWait = 25 * time.Second
	// MaxLeases is the most webhooks leased and not yet settled.
	MaxLeases = 1024
	// MaxLeaseBytes bounds the bodies and headers leases hold: a Pull
	// that finds more held waits for settles. One batch may pass it.
	MaxLeaseBytes = 64 << 20
	// MaxPulls is how many Pulls may wait at once.
	MaxPulls = 4
)

// Errors of Pull, Ack and Nak.
var (
	// ErrNotPull: the destination exists but jethook calls it.
	ErrNotPull = errors.New("not a pull destination")
	// ErrLeasesFull: MaxLeases or MaxLeaseBytes are held; settle some.
	ErrLeasesFull = errors.New("too many webhooks leased and not settled")
	// ErrPullsBusy: MaxPulls are waiting already.
	ErrPullsBusy = errors.New("too many pulls waiting at once")
	// ErrPaused: an operator paused the destination.
	ErrPaused = errors.New("destination paused by an operator")
	// ErrStopped: jethook is shutting down.
	ErrStopped = errors.New("shutting down")
)

// errLeaseExpired is the failure of a lease its client let run out.
var errLeaseExpired = errors.New("lease expired without an ack")

// Lease is one webhook handed to a pull client: the request jethook would
// have made to a push destination, and until when the client may settle it.
type Lease struct {
	// ID names the lease in Ack and Nak; unique within the destination.
	ID          string
	EventID     string
	Attempt     int
	Method      string
	Query       string      // the query string the sender called, "" if none
	Header      http.Header // the original headers and jethook's X-Webhook-*, as a push attempt sends them
	Body        []byte
	Stored      time.Time // when jethook stored the webhook
	Expires     time.Time // when an unsettled lease counts as a failed attempt
	Redelivered bool      // an earlier attempt failed (a nak, a lease that ran out, a replay)
}

// NakReason is what a client says of a webhook it could not deliver.
type NakReason struct {
	// Delay is when to offer it again; 0 follows the route's schedule.
	// It is clamped to retry.retry_after_max, like a Retry-After.
	Delay time.Duration
	// Status is the HTTP status the client's backend answered, 0 if none.
	Status int
	// Error is the client's reason, for the attempt log and dead letters.
	Error string
}

// leases are a pull destination's leased webhooks. A reload that restarts
// the destination hands its leases to the new one.
type leases struct {
	mu     sync.Mutex
	d      *destination // the destination's current settings
	held   map[string]*leased
	bytes  int
	pulls  int
	closed bool
}

// leased is one leased webhook.
type leased struct {
	h     held
	e     *store.Envelope
	at    time.Time // when it was leased, for the attempt's latency
	size  int
	timer *time.Timer
}

func newLeases() *leases { return &leases{held: map[string]*leased{}} }

// pullDestination returns the running pull destination route/destination.
func (f *Forwarder) pullDestination(route, destination string) (*destination, error) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	if f.reg.stopped {
		return nil, ErrStopped
	}
	for _, l := range f.reg.loops {
		if l.d.route.Name == route && l.d.dest.Name == destination {
			if l.d.leases == nil {
				return nil, fmt.Errorf("route %q destination %q: %w", route, destination, ErrNotPull)
			}
			return l.d, nil
		}
	}
	return nil, fmt.Errorf("route %q destination %q: %w", route, destination, ErrUnknownDestination)
}

// Pull leases up to max webhooks of a pull destination. When none is
// waiting it waits up to wait for the first, then returns it with those
// that arrived with it; it returns none when wait passes or ctx ends. A
// webhook the destination's filter drops is settled here and not returned.
func (f *Forwarder) Pull(ctx context.Context, route, destination string, max int, wait time.Duration) ([]Lease, error) {
	d, err := f.pullDestination(route, destination)
	if err != nil {
		return nil, err
	}
	if d.gate.status().Held {
		return nil, ErrPaused
	}
	t := d.leases
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.leave()
	max = min(MaxPullBatch, max)
	wait = min(MaxPullWait, wait)
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []Lease
	for len(out) == 0 {
		n, err := t.room(max)
		if err != nil {
			return nil, err
		}
		msgs, err := d.fetchLeases(waitCtx, n, wait > 0)
		for _, m := range msgs {
			if l, ok := d.lease(ctx, m); ok {
				out = append(out, l)
			}
		}
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 || wait == 0 {
			break // waited out (or not asked to wait)
		}
	}
	return out, nil
}

// fetchLeases fetches up to n messages: those waiting now, or, when there
// are none and long is true, the first to arrive before ctx ends and those
// waiting with it.
func (d *destination) fetchLeases(ctx context.Context, n int, long bool) ([]jetstream.Msg, error) {
	msgs, err := d.fetchNoWait(n)
	if err != nil || len(msgs) > 0 || !long {
		return msgs, err
	}
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
		return nil, nil
	}
	msgs, err = collect(d.cons.Fetch(1, jetstream.FetchContext(ctx)))
	if err != nil || len(msgs) == 0 || n == 1 {
		return msgs, err
	}
	more, err := d.fetchNoWait(n - 1)
	return append(msgs, more...), err
}

// fetchNoWait fetches up to n messages waiting now. nats.go ends such a
// fetch on its own clock, lateFetch after asking, and drops what the
// server sends it after that: a fetch that took that long ended late.
func (d *destination) fetchNoWait(n int) ([]jetstream.Msg, error) {
	began := time.Now()
	msgs, err := collect(d.cons.FetchNoWait(n))
	if took := time.Since(began); took >= lateFetch && len(msgs) < n {
		d.endedLate(took)
	}
	return msgs, err
}

// collect reads a batch; the end of its wait is no error.
func collect(b jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: fetch: %w", store.ErrUnavailable, err)
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, jetstream.ErrNoMessages) {
		return out, fmt.Errorf("%w: fetch: %w", store.ErrUnavailable, err)
	}
	return out, nil
}

// lease reads m as a push attempt would and holds it under a lease; ok is
// false when m was settled instead (filtered, not a webhook, a due record
// early).
func (d *destination) lease(ctx context.Context, m jetstream.Msg) (Lease, bool) {
	e, h, ok := d.hold(ctx, m)
	if !ok || d.filtered(ctx, h, e) {
		return Lease{}, false
	}
	md, err := m.Metadata()
	if err != nil {
		_ = m.Nak()
		return Lease{}, false
	}
	method, query, header, err := d.request(ctx, e, h.n)
	if err != nil {
		o := Outcome{Kind: Permanent, Err: err, Reason: "bad request: " + err.Error(), Unsent: true}
		d.observe(e, h.first, h.n, o, 0, d.f.Now(), 0, false)
		d.deadLetter(ctx, h, e, o, "permanent", d.eventLog(e, h.n))
		return Lease{}, false
	}
	l := Lease{ID: strconv.FormatUint(md.Sequence.Consumer, 10), EventID: e.EventID, Attempt: h.n,
		Method: method, Query: query, Header: header, Body: e.Body, Stored: h.first,
		Expires: d.f.Now().Add(d.dest.Timeout), Redelivered: h.n > 1 || store.IsReplay(m)}
	size := len(m.Data()) + len(e.Body)
	for k, vs := range header {
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	d.leases.add(l.ID, &leased{h: h, e: e, at: time.Now(), size: size}, d.dest.Timeout)
	return l, true
}

// pullURL stands for the backend in a pull destination's requests, of
// which only the method, query and headers go to the client.
const pullURL = "http://pull.invalid/"

// request is what a push attempt n of e would send, but for the URL.
func (d *destination) request(ctx context.Context, e *store.Envelope, n int) (method, query string, h http.Header, err error) {
	req, err := newRequest(ctx, pullURL, e, n)
	if err != nil {
		return "", "", nil, err
	}
	if rs := d.dest.Resign; rs != nil {
		if err := resign(req.Header, e.EventID, e.Body, rs, d.f.Now()); err != nil {
			return "", "", nil, fmt.Errorf("resign: %w", err)
		}
	}
	return req.Method, req.URL.RawQuery, req.Header, nil
}

// Ack settles leased webhooks as delivered. gone lists the ids that are
// not leased (any more): their lease ran out, or they were settled.
func (f *Forwarder) Ack(route, destination string, ids []string) (gone []string, err error) {
	d, err := f.pullDestination(route, destination)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		l := d.leases.take(id)
		if l == nil {
			gone = append(gone, id)
			continue
		}
		d := d.leases.current()
		o := Outcome{Kind: Delivered, Status: http.StatusOK}
		now := d.f.Now()
		d.last.record(o, now)
		d.observe(l.e, l.h.first, l.h.n, o, time.Since(l.at), now, 0, false)
		if err := l.h.m.Ack(); err != nil {
			d.eventLog(l.e, l.h.n).Warn("ack failed; the client may get this event again", "err", err)
		}
	}
	return gone, nil
}

// Nak settles leased webhooks as failed attempts: each waits on the
// route's schedule (or why.Delay), or is dead-lettered when that was its
// last attempt. gone is as Ack's.
func (f *Forwarder) Nak(route, destination string, ids []string, why NakReason) (gone []string, err error) {
	d, err := f.pullDestination(route, destination)
	if err != nil {
		return nil, err
	}
	o := Outcome{Kind: Transient, Status: why.Status, Reason: "nak"}
	if why.Status != 0 {
		o.Reason = "nak: status " + strconv.Itoa(why.Status)
	}
	if why.Error != "" {
		o.Err = errors.New(why.Error)
	}
	if why.Delay > 0 {
		o.RetryAfter = max(why.Delay, time.Millisecond)
	}
	for _, id := range ids {
		l := d.leases.take(id)
		if l == nil {
			gone = append(gone, id)
			continue
		}
		d.leases.current().fail(l, o)
	}
	return gone, nil
}

// fail settles a leased webhook whose attempt failed with o: it waits for
// its next attempt, or is dead-lettered when the schedule is exhausted.
func (d *destination) fail(l *leased, o Outcome) {
	ctx := context.Background()
	h, e, n := l.h, l.e, l.h.n
	latency := time.Since(l.at)
	now := d.f.Now()
	d.last.record(o, now)
	retry := d.route.Retry
	next := retry.Delay(n, e.EventID+"/"+d.dest.Name)
	if o.RetryAfter > 0 {
		next = retry.ClampRetryAfter(o.RetryAfter)
	}
	next = max(next, minRetryDelay)
	log := d.eventLog(e, n)
	if retry.Exhausted(n, now.Sub(h.first), next) {
		d.observe(e, h.first, n, o, latency, now, 0, false)
		d.deadLetter(ctx, h, e, o, "exhausted", log)
		return
	}
	log.Info("attempt failed; will retry", "outcome", o.Reason, "status", o.Status, errAttr(o.Err), "next", next.Round(time.Millisecond).String())
	d.retryLater(ctx, h, e, now.Add(next), log, func(parked bool) { d.observe(e, h.first, n, o, latency, now, next, parked) })
}

// enter counts a waiting Pull.
func (t *leases) enter() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return ErrStopped
	case t.pulls >= MaxPulls:
		return ErrPullsBusy
	}
	t.pulls++
	return nil
}

func (t *leases) leave() {
	t.mu.Lock()
	t.pulls--
	t.mu.Unlock()
}

// room is how many of want more webhooks may be leased now.
func (t *leases) room(want int) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(want, MaxLeases-len(t.held))
	if n <= 0 || t.bytes >= MaxLeaseBytes {
		return 0, ErrLeasesFull
	}
	return n, nil
}

// add holds l under id until it is taken or ttl passes; then it fails as
// a lease that ran out.
func (t *leases) add(id string, l *leased, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.held[id]; old != nil {
		// The same delivery cannot be fetched twice; keep the accounting right anyway.
		old.timer.Stop()
		t.bytes -= old.size
	}
	t.held[id] = l
	t.bytes += l.size
	l.timer = time.AfterFunc(ttl, func() {
		if t.take(id) == l {
			t.current().fail(l, Outcome{Kind: Transient, Err: errLeaseExpired, Reason: "lease expired"})
		}
	})
}

// take removes and returns the lease id; nil when it is not held.
func (t *leases) take(id string) *leased {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[id]
	if l == nil {
		return nil
	}
	delete(t.held, id)
	t.bytes -= l.size
	if l.timer != nil {
		l.timer.Stop()
	}
	return l
}

// current is the destination the leases belong to now.
func (t *leases) current() *destination {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d
}

// count is how many webhooks are leased now.
func (t *leases) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held)
}

// close stops the leases' clocks when jethook stops: their messages stay
// unacked in the consumer, which offers them again after its AckWait.
func (t *leases) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, l := range t.held {
		l.timer.Stop()
		delete(t.held, id)
	}
	t.bytes = 0
}
