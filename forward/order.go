package forward

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// destOrder is a destination's `order:`: its compiled key, the keys whose
// head is in an attempt here, and the kinds of key failure it has logged.
// The heads and queues themselves are on disk (store.Admit).
type destOrder struct {
	key        *filter.Key
	maxBlocked time.Duration

	// settling bounds the delivered heads whose key is being passed on
	// in the background (orderedMsg.Ack) to maxSettling: a slow disk
	// holds the next attempts back instead of piling settles up.
	settling chan struct{}

	mu       sync.Mutex
	inflight map[store.OrderKey]uint64 // key → the head's sequence, while an attempt holds it here
	logged   map[string]bool
}

// newOrder compiles d's ordering key; nil when d is unordered.
func newOrder(d policy.Destination) (*destOrder, error) {
	if d.Order == nil {
		return nil, nil
	}
	k, err := filter.CompileKey(d.Order.Key)
	if err != nil {
		return nil, err
	}
	return &destOrder{key: k, maxBlocked: d.Order.MaxBlocked, settling: make(chan struct{}, maxSettling),
		inflight: map[store.OrderKey]uint64{}, logged: map[string]bool{}}, nil
}

// of evaluates the key on e.
func (o *destOrder) of(e *store.Envelope) (string, error) {
	return o.key.Eval(&filter.Event{Route: e.Route, Method: e.Method, Header: e.Header, Body: e.Body})
}

// take marks key k's head seq as in an attempt here; false when it is
// already (a second copy of its message: a redelivery or a due record).
func (o *destOrder) take(k store.OrderKey, seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.inflight[k]; ok && s == seq {
		return false
	}
	o.inflight[k] = seq
	return true
}

// attempting reports whether key k's head seq is in an attempt here.
func (o *destOrder) attempting(k store.OrderKey, seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.inflight[k]
	return ok && s == seq
}

func (o *destOrder) done(k store.OrderKey, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inflight[k] == seq {
		delete(o.inflight, k)
	}
}

func (o *destOrder) firstOf(kind string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.logged[kind] {
		return false
	}
	o.logged[kind] = true
	return true
}

// maxSettling is how many delivered heads of a destination may have their
// key passed on in the background at once: enough for the deliveries of
// the longest disk sync (about 10,000 a second for 100 ms), each a
// goroutine and its message.
const maxSettling = 1024

// orderedMsg is the message of a key's head. Settling it (Ack, unless it
// was parked; Term) passes the key on to the next event first
// (store.SettleDelivered, store.SettleHead); a Nak, or an Ack after
// parking, keeps the key, on disk (store.KeepHead).
type orderedMsg struct {
	jetstream.Msg
	d      *destination
	key    store.OrderKey
	seq    uint64
	env    *store.Envelope // read by admit, for hold; nil for a due record
	parked bool
	ended  atomic.Bool // the attempt's hold on the key here ended (end)
}

// end ends the attempt's hold on the key here, once: a later attempt of
// the same head, which may hold the key by the time this one's worker
// returns, keeps its hold.
func (m *orderedMsg) end() {
	if m.ended.CompareAndSwap(false, true) {
		m.d.order.done(m.key, m.seq)
	}
}

// Each settle ends the attempt's hold on the key here (end) before it
// settles the message, which may come back at once; Term ends it once the
// key is passed on.

// Ack, after a delivery (or a filter), passes the key on and acks the
// message once that is on disk, in the background: the attempt ends at
// once, and its slot goes to the next event while the disk syncs. The
// next event of the key may go meanwhile: a crash before the sync brings
// this one back first, a duplicate (store.SettleDelivered). Stop waits
// for it as for an attempt. With maxSettling settles on their way, Ack
// waits for one to end.
func (m *orderedMsg) Ack() error {
	d := m.d
	m.end()
	if m.parked {
		// The parked record carries the event on; the key's head entry
		// must outlive a crash first.
		if err := m.keep(); err != nil {
			d.log.Warn("a parked head's key cannot be kept on disk yet; its message comes back", "seq", m.seq, "err", err)
			return m.Msg.NakWithDelay(settleRetry)
		}
		return m.Msg.Ack()
	}
	d.order.settling <- struct{}{}
	d.f.inflight.Add(1)
	go func() {
		defer func() {
			<-d.order.settling
			d.f.inflight.Done()
		}()
		if !m.settle(d.f.Store.SettleDelivered) {
			_ = m.Msg.NakWithDelay(settleRetry)
			return
		}
		if err := m.Msg.Ack(); err != nil {
			d.log.Warn("ack failed; the backend may see this event again", "seq", m.seq, "err", err)
		}
	}()
	return nil
}

// Term, after a dead letter, passes the key on before the next event of
// the key can see it: a crash never brings this event back to an attempt
// after a later one was delivered.
func (m *orderedMsg) Term() error {
	passed := m.settle(m.d.f.Store.SettleHead)
	m.end() // after: a copy of the head that comes meanwhile waits, then finds the key passed on
	if !passed {
		return m.Msg.NakWithDelay(settleRetry)
	}
	return m.Msg.Term()
}

func (m *orderedMsg) Nak() error {
	m.end()
	m.keepUnsynced()
	return m.Msg.Nak()
}

func (m *orderedMsg) NakWithDelay(delay time.Duration) error {
	m.end()
	m.keepUnsynced()
	return m.Msg.NakWithDelay(delay)
}

// keep puts the head's entry on disk, with fsync, as its message is acked
// after parking.
func (m *orderedMsg) keep() error {
	if err := m.d.f.Store.KeepHead(m.d.route.Name, m.d.dest.Name, m.key, m.seq); err != nil {
		return err
	}
	return m.d.f.Store.SyncOrder()
}

// keepUnsynced puts the head's entry on disk, without fsync, as its message
// goes back to its consumer: a crash brings the message back, and it
// takes its key again. If it cannot, the head stays in memory, and its
// message takes its key again when it comes back.
func (m *orderedMsg) keepUnsynced() {
	if err := m.d.f.Store.KeepHead(m.d.route.Name, m.d.dest.Name, m.key, m.seq); err != nil {
		m.d.log.Warn("a key's head cannot be written to the index; it is held in memory until its message comes back", "seq", m.seq, "err", err)
	}
}

// settleRetry is how soon a head whose key could not be passed on comes
// back: it is attempted again (a redelivery of the head), then passes the
// key on.
const settleRetry = 5 * time.Second

// settle passes the key on with passOn (a store.Store's SettleHead or
// SettleDelivered); false when it could not.
func (m *orderedMsg) settle(passOn func(ctx context.Context, route, dest string, k store.OrderKey, seq uint64, now time.Time) error) bool {
	d := m.d
	ctx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	if err := passOn(ctx, d.route.Name, d.dest.Name, m.key, m.seq, d.f.Now()); err != nil {
		d.log.Warn("the next event of a key cannot go yet; this one comes back first", "seq", m.seq, "err", err)
		return false
	}
	return true
}

// admit puts the messages of one fetch, in the order they came, through
// the destination's ordering and returns those to attempt now: a key's
// head (wrapped in an orderedMsg) and the messages that have no key. The
// others are queued behind their key's head, or were settled already, and
// are acked here. ok is false when the keys could not be read: the
// messages that have a key were nak'd, and the rest of the fetch must go
// back behind them.
func (d *destination) admit(ctx context.Context, msgs []jetstream.Msg) (_ []jetstream.Msg, ok bool) {
	var out []jetstream.Msg
	var claims []store.Claim
	var claimed []jetstream.Msg
	var envs []*store.Envelope
	for _, m := range msgs {
		c, e, ok := d.claim(ctx, m)
		if !ok {
			out = append(out, m)
			continue
		}
		claims = append(claims, c)
		claimed = append(claimed, m)
		envs = append(envs, e)
	}
	if len(claims) == 0 {
		return out, true
	}
	verdicts, err := d.f.Store.Admit(d.route.Name, d.dest.Name, claims, d.f.Now())
	if err != nil {
		// Nothing was decided: every message comes back, in its order,
		// before anything fetched later.
		d.log.Error("ordering keys cannot be read; the events come back", "err", err)
		for _, m := range claimed {
			d.giveBack(m, 0)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		return out, false
	}
	waiting := d.wait(ctx, claims, verdicts)
	for i, m := range claimed {
		c := claims[i]
		switch verdicts[i] {
		case store.Go:
			if !d.order.take(c.Key, c.Seq) {
				// The head's attempt is in progress here. This copy, a
				// redelivery or a due record, comes back after it and
				// is never dropped: that attempt may end trusting this
				// very copy to carry the event (the record it parked,
				// moved back before it ended, or a parked record another
				// copy wrote with the same attempt number, which makes
				// its own park a duplicate). If the key has moved on when
				// it comes back, Admit settles it then.
				d.log.Info("a copy of a key's head came while its attempt is in progress; it comes back after it",
					"event_id", c.EventID, "seq", c.Seq, "due", c.Due)
				d.unfetched()
				d.giveBack(m, settleRetry)
				continue
			}
			out = append(out, &orderedMsg{Msg: m, d: d, key: c.Key, seq: c.Seq, env: envs[i]})
		case store.Queued, store.Overtaken, store.Renew:
			d.unfetched()
			if !waiting {
				// Queued on disk, but without its waiting record: the
				// message comes back and is queued again (in the same
				// place), or settled if its key moved on meanwhile.
				d.giveBack(m, settleRetry)
				continue
			}
			d.forget(m) // its waiting record carries its attempts on
			if verdicts[i] == store.Overtaken {
				d.log.Warn("event came back after a later event of its key took the key; it goes next after that one",
					"event_id", c.EventID, "seq", c.Seq)
			}
			if verdicts[i] != store.Renew {
				d.f.Metrics.Queued(d.route.Name, d.dest.Name)
			}
			_ = m.Ack()
		case store.Settled:
			if !c.Waiting { // a waiting record outlives its event's wait: not news
				d.log.Info("event settled before (its key moved on); not attempted again", "seq", c.Seq, "due", c.Due)
			}
			d.unfetched()
			d.forget(m)
			_ = m.Ack()
		}
	}
	return out, true
}

// wait parks the waiting records (store.Wait) of the claims queued behind
// their key or renewed, and reports whether they are stored: only then may
// their messages be acked.
func (d *destination) wait(ctx context.Context, claims []store.Claim, verdicts []store.Verdict) bool {
	if !d.f.Store.Waits() {
		return true
	}
	var ws []store.Claim
	for i, v := range verdicts {
		switch v {
		case store.Queued, store.Overtaken:
			c := claims[i]
			c.QueuedAt, c.WaitDue = time.Time{}, time.Time{} // queued now
			ws = append(ws, c)
		case store.Renew:
			ws = append(ws, claims[i])
		}
	}
	if err := d.f.Store.Wait(ctx, d.route.Name, d.dest.Name, ws, d.f.Now()); err != nil {
		d.log.Warn("events queued behind their key cannot leave their waiting records yet; they come back", "events", len(ws), "err", err)
		return false
	}
	return true
}

// unfetched gives back the rate token of a fetched message that makes no
// request: queued behind its key, or settled before.
func (d *destination) unfetched() {
	if d.gate.limiter != nil {
		d.gate.refund()
	}
}

// claim reads what ordering needs of m: its key and its place, and the
// envelope it decoded (nil for a due record). ok is false for a message
// delivered unordered: one whose key cannot be had (counted and logged
// once per kind), and one that hold will settle on its own (no metadata,
// undecodable, a due record parked without ordering).
func (d *destination) claim(ctx context.Context, m jetstream.Msg) (_ store.Claim, _ *store.Envelope, ok bool) {
	md, err := m.Metadata()
	if err != nil {
		return store.Claim{}, nil, false
	}
	if store.IsDue(m) {
		c, ok := store.DueClaim(m)
		return c, nil, ok
	}
	e, err := store.Decode(m)
	if err != nil {
		return store.Claim{}, nil, false
	}
	v, err := d.order.of(e)
	if err != nil {
		kind := "other"
		var fe *filter.Error
		if errors.As(err, &fe) {
			kind = fe.Kind
		}
		d.f.Metrics.Unordered(d.route.Name, d.dest.Name, kind)
		if d.order.firstOf(kind) {
			d.log.Warn("ordering key failed on an event, which is delivered unordered; logged once per kind",
				"event_id", e.EventID, "kind", kind)
		}
		return store.Claim{}, nil, false
	}
	// Numbered as hold numbers it: an event queued behind its key carries
	// this count in its waiting record.
	n := max(int(md.NumDelivered)-d.f.returned.count(md.Stream, md.Consumer, md.Sequence.Stream), 1)
	return store.Claim{Key: store.KeyOf(v), Seq: md.Sequence.Stream, EventID: e.EventID,
		Attempts: d.renumber(ctx, e, n, md.Timestamp) - 1, FirstSeen: md.Timestamp}, e, true
}

// decode is store.Decode of m, but for an ordered head, whose envelope
// admit decoded already.
func decode(m jetstream.Msg) (*store.Envelope, error) {
	if om, ok := m.(*orderedMsg); ok && om.env != nil {
		return om.env, nil
	}
	return store.Decode(m)
}

// blockedLeft is how long the head m may still fail before max_blocked
// dead-letters it, counted from its first failed attempt (now, if this
// is it). ok is false for a message that is not an ordered head.
func (d *destination) blockedLeft(m jetstream.Msg, now time.Time) (left time.Duration, ok bool) {
	om, ok := m.(*orderedMsg)
	if !ok {
		return 0, false
	}
	since, err := d.f.Store.Failing(d.route.Name, d.dest.Name, om.key, om.seq, now)
	if err != nil {
		since = now
	}
	return d.order.maxBlocked - now.Sub(since), true
}

// awaitInherited waits, before an ordered destination's first fetch, until
// the messages an earlier run left unsettled have come back: a run killed
// (or stopped) between a fetch and its ordering may leave an event that
// only JetStream knows of, which it sends again once its ack wait has
// passed, ahead of newer messages. Until then a later event of its key
// could take the key first. With nothing left unsettled it does not wait.
func (d *destination) awaitInherited(ctx context.Context) {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	info, err := d.cons.Info(ictx)
	cancel()
	if err == nil && info.NumAckPending == 0 {
		return
	}
	wait := d.dest.Timeout + ackMargin + time.Second
	d.log.Info("ordered destination waits for the events an earlier run left unsettled", "wait", wait.String())
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// unorder releases, when a destination without `order:` starts (a reload
// took ordering away, and the loop of the ordered one has stopped), the
// events still waiting behind their key: they go unordered.
func (d *destination) unorder(ctx context.Context) {
	n, err := d.f.Store.Unorder(ctx, d.route.Name, d.dest.Name)
	if err != nil {
		d.log.Error("destination no longer ordered, but the events waiting behind their key cannot be released; they are at the next start", "err", err)
	}
	if n > 0 {
		d.log.Info("destination no longer ordered: the events waiting behind their key are released", "released", n)
	}
}

// KeyOf is the ordering key of e at route's destination: its value, as
// the destination's `order: key` gives it, and its store.OrderKey. ok is
// false when the destination is not ordered, or the key fails on e (e is
// then delivered unordered there).
func (f *Forwarder) KeyOf(route, destination string, e *store.Envelope) (value string, k store.OrderKey, ok bool) {
	d, err := f.find(route, destination)
	if err != nil || d.order == nil {
		return "", k, false
	}
	v, err := d.order.of(e)
	if err != nil {
		return "", k, false
	}
	return v, store.KeyOf(v), true
}

// lostBatch is how many heads held for longer than max_blocked one sweep
// checks against the stream (sweepLost).
const lostBatch = 100

// sweepLost starts, for an ordered destination, the sweep that releases
// keys whose head is lost (releaseLost), and returns a func that stops it and
// waits for it to end.
func (d *destination) sweepLost(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := min(max(d.order.maxBlocked/2, time.Second), time.Minute)
		if d.f.Store.Waits() {
			every = min(every, max(d.headlessGrace()/2, time.Second))
		}
		t := time.NewTicker(every)
		defer t.Stop()
		var from store.OrderKey
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if d.owner != nil && (!d.owner.lease.Held() || !d.owner.lease.Taken().IsZero()) {
				continue // another replica delivers it, or this one is taking it over
			}
			from = d.releaseLost(ctx, from)
			d.releaseHeadless(ctx)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// headlessGrace is how long the events that another owner (or a lost
// index) held are kept behind a placeholder head (store.TakeOver): long
// enough for the key's head to come back from its consumer (an ack wait)
// and the waiting records of the other events of its key to come due, if
// they were not renewed since long before.
func (d *destination) headlessGrace() time.Duration {
	return 2*d.f.Store.WaitingEvery() + d.dest.Timeout + ackMargin
}

// releaseHeadless lets the events held behind a placeholder head for
// longer than headlessGrace go, in the order of their sequences.
func (d *destination) releaseHeadless(ctx context.Context) {
	if !d.f.Store.Waits() {
		return
	}
	now := d.f.Now()
	n, err := d.f.Store.ReleaseHeadless(ctx, d.route.Name, d.dest.Name, now.Add(-d.headlessGrace()), now)
	if err != nil {
		d.log.Warn("the events another replica or a lost index held cannot go back to their keys yet", "err", err)
	}
	if n > 0 {
		d.log.Info("events another replica or a lost index held go back to their keys, in the order they were stored", "keys", n)
	}
}

// releaseLost checks up to lostBatch heads that have held their key for
// longer than max_blocked, from key from on, and returns where the next
// check goes on. A head in an attempt here is left to its attempt. Of the
// others, two kinds would hold their key for good:
//   - a head whose message is gone from the stream (deleted by hand, or
//     purged by a limit) can never be attempted, settled or dead-lettered:
//     its key is passed on to the next event, as if it were settled;
//   - a head whose message is acked and that no parked or due record
//     carries (its parked record expired or was purged) is never attempted
//     again on its own: it is brought back to an attempt now, and is then
//     delivered, retried or dead-lettered as any head is.
//
// Each is logged (reason head_gone, head_lost).
func (d *destination) releaseLost(ctx context.Context, from store.OrderKey) store.OrderKey {
	now := d.f.Now()
	heads, next, err := d.f.Store.OldHeads(d.route.Name, d.dest.Name, from, now.Add(-d.order.maxBlocked), lostBatch)
	if err != nil {
		d.log.Warn("ordering keys cannot be read to look for lost heads", "err", err)
		return from
	}
	var present []store.OldHead
	for _, h := range heads {
		if d.order.attempting(h.Key, h.Seq) {
			continue
		}
		gone, err := d.f.Store.Gone(ctx, h.Seq)
		if err != nil {
			continue
		}
		if !gone {
			present = append(present, h)
			continue
		}
		if err := d.f.Store.SettleHead(ctx, d.route.Name, d.dest.Name, h.Key, h.Seq, now); err != nil {
			d.log.Warn("a key's head is gone from the stream, but the key cannot be passed on yet", "event_id", h.ID, "seq", h.Seq, "err", err)
			continue
		}
		d.log.Warn("a key's head is gone from the stream (deleted or purged), so it cannot be delivered or dead-lettered; the next event of its key goes",
			"event_id", h.ID, "seq", h.Seq, "head_since", h.Since, "reason", "head_gone")
	}
	if len(present) == 0 {
		return next
	}
	lost, err := d.f.Store.Uncarried(ctx, d.route.Name, d.dest.Name, present)
	if err != nil {
		d.log.Warn("parked records cannot be read to look for lost heads", "err", err)
		return from
	}
	for _, h := range lost {
		if err := d.f.Store.Recarry(ctx, d.route.Name, d.dest.Name, h, now); err != nil {
			d.log.Warn("a key's head lost its record of its next attempt, but it cannot be brought back yet", "event_id", h.ID, "seq", h.Seq, "err", err)
			continue
		}
		d.log.Warn("a key's head lost its record of its next attempt (its parked record expired or was purged); it is attempted again now",
			"event_id", h.ID, "seq", h.Seq, "head_since", h.Since, "reason", "head_lost")
	}
	return next
}
