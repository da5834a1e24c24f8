package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Scan selects stored webhooks by route and time for Search; Match decides
// on each one it reads.
type Scan struct {
	Route string    // "" for every route
	Since time.Time // stored at or after; zero: the oldest retained
	Until time.Time // stored before; zero: now
	// Oldest reads oldest first; by default the scan reads newest first.
	Oldest bool
	// Cursor continues a scan where the previous page ended (Next): newest
	// first, it reads sequences before it; oldest first, from it on.
	Cursor uint64
	// Match decides whether the webhook e, stored at seq, is a hit; nil
	// matches every one. It may keep nothing of e's body after it returns.
	Match func(e *Envelope, seq uint64) bool
	// Limit is the most hits one page holds (at least 1).
	Limit int
	// MaxBytes bounds the bytes (headers and bodies) one page reads; 0 is
	// no bound.
	MaxBytes int64
	// Deadline, if not zero, ends a page that runs until then, with a
	// cursor to go on from.
	Deadline time.Time
}

// Hit is one webhook a scan matched.
type Hit struct {
	Seq      uint64
	Envelope *Envelope
	Size     int // the body's length in bytes
}

// ScanProgress is how far a scan has come.
type ScanProgress struct {
	Scanned int   // webhooks read (of the route, within the window)
	Bytes   int64 // bytes read
	// Reached is the stored time of the last webhook read: the scan has
	// covered the window from its start (newest first: its end) to here.
	Reached time.Time
}

// ScanEnd is how a page ended: with its progress, and Next, the cursor of
// the next page (0 when the window is covered), and Stopped, why it ended
// before the window's end: "limit" (the page is full), "max_bytes" or
// "deadline".
type ScanEnd struct {
	ScanProgress
	Next    uint64
	Stopped string
}

// scanBatch is how many messages one fetch of a scan asks for.
const scanBatch = 512

// Search reads route's webhooks (every route's when empty) in the window
// q.Since to q.Until, newest or oldest first, and hands each one q.Match
// accepts to hit, in order, until q.Limit hits, q.MaxBytes or the window's
// end. progress, if not nil, is told after each batch read. A hit that
// returns false ends the page as if it were full. Memory: newest first, a
// page holds at most q.Limit envelopes of one window before handing them
// out newest first; oldest first, one batch.
func (s *Store) Search(ctx context.Context, q Scan, hit func(Hit) bool, progress func(ScanProgress)) (ScanEnd, error) {
	var end ScanEnd
	if q.Route != "" && !validToken(q.Route) {
		return end, fmt.Errorf("%q is not a route name: names hold only letters, digits, \"_\" and \"-\"", q.Route)
	}
	if q.Limit < 1 {
		q.Limit = 1
	}
	info, err := s.main.Info(ctx)
	if err != nil {
		return end, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	first, last := max(info.State.FirstSeq, 1), info.State.LastSeq+1
	lo, hi := first, last
	if !q.Since.IsZero() {
		if lo, err = s.seqAt(ctx, q.Since, last); err != nil {
			return end, err
		}
	}
	if !q.Until.IsZero() {
		if hi, err = s.seqAt(ctx, q.Until, last); err != nil {
			return end, err
		}
	}
	sc := &scanner{s: s, q: q, hit: hit, progress: progress, subject: "webhooks.*.*"}
	if info.State.Msgs > 0 {
		sc.avg = int64(info.State.Bytes / info.State.Msgs)
	}
	if q.Route != "" {
		sc.subject = "webhooks." + q.Route + ".*"
	}
	if q.Oldest {
		if q.Cursor > lo {
			lo = q.Cursor
		}
		err = sc.forward(ctx, lo, hi)
	} else {
		if q.Cursor > 0 && q.Cursor < hi {
			hi = q.Cursor
		}
		err = sc.backward(ctx, lo, hi)
	}
	return sc.end, err
}

// seqAt is the sequence of the first message of the stream stored at or
// after t; last (the next sequence) if there is none.
func (s *Store) seqAt(ctx context.Context, t time.Time, last uint64) (uint64, error) {
	c, err := s.js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &t,
		HeadersOnly:   true,
	})
	if err != nil {
		return 0, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	batch, err := c.FetchNoWait(1)
	if err != nil {
		return 0, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	for m := range batch.Messages() {
		if md, err := m.Metadata(); err == nil {
			return md.Sequence.Stream, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	return last, nil
}

// scanner is one page of a Search.
type scanner struct {
	s        *Store
	q        Scan
	hit      func(Hit) bool
	progress func(ScanProgress)
	subject  string
	end      ScanEnd
	hits     int
	avg      int64 // the stream's average message size, for window sizes
}

// read reads the webhooks in [start, stop) in order and calls fn on each
// hit, until fn returns false. It returns the sequence it stopped at (stop
// when it read the whole span), whether it ran into a bound (only checked
// when bound is true), and the stored time of the first webhook it read.
// It fetches a batch at a time from one consumer without acks (an
// ordered consumer would be made anew for each fetch): the server sends
// no more than the scan has asked for, so a slow scan makes it wait, not
// drop messages.
func (sc *scanner) read(ctx context.Context, start, stop uint64, bound bool, fn func(Hit) bool) (at uint64, full bool, first time.Time, err error) {
	at = stop
	c, err := sc.s.main.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "jethook: search",
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     sc.subject,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: 30 * time.Second, // the server drops it if a search cannot
		MemoryStorage:     true,
	})
	if err != nil {
		return 0, false, first, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	defer func() { _ = sc.s.main.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	if c.CachedInfo().NumPending == 0 {
		return at, false, first, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, false, first, err
		}
		batch, err := c.FetchNoWait(scanBatch)
		if err != nil {
			return 0, false, first, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
		got, done := 0, false
		for m := range batch.Messages() {
			got++
			if done {
				continue // drain the batch
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			seq := md.Sequence.Stream
			if seq >= stop {
				done = true
				continue
			}
			if bound && sc.over() != "" {
				at, full, done = seq, true, true
				continue
			}
			h := m.Headers()
			sc.end.Scanned++
			sc.end.Bytes += int64(headerBytes(h) + len(m.Data()))
			if first.IsZero() {
				first = md.Timestamp
			}
			if bound {
				sc.end.Reached = md.Timestamp
			}
			e, err := decodeEnvelope(m.Subject(), h, m.Data())
			if err == nil && (sc.q.Match == nil || sc.q.Match(e, seq)) && !fn(Hit{Seq: seq, Envelope: e, Size: len(m.Data())}) {
				at, done = seq, true
				continue
			}
			done = md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return 0, false, first, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
		if bound && sc.progress != nil && got > 0 {
			sc.progress(sc.end.ScanProgress)
		}
		if done || got == 0 {
			return at, full, first, nil
		}
	}
}

// over says which bound the page has reached, if any: "max_bytes" or
// "deadline".
func (sc *scanner) over() string {
	switch {
	case sc.q.MaxBytes > 0 && sc.end.Bytes >= sc.q.MaxBytes:
		return "max_bytes"
	case !sc.q.Deadline.IsZero() && !time.Now().Before(sc.q.Deadline):
		return "deadline"
	}
	return ""
}

// forward reads [lo, hi) oldest first.
func (sc *scanner) forward(ctx context.Context, lo, hi uint64) error {
	if lo >= hi {
		return nil
	}
	at, full, _, err := sc.read(ctx, lo, hi, true, func(h Hit) bool {
		if sc.hits == sc.q.Limit {
			sc.end.Stopped = "limit"
			return false // h is the next page's first
		}
		sc.hits++
		if !sc.hit(h) {
			sc.end.Stopped = "limit"
			sc.end.Next = h.Seq + 1
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if sc.progress != nil {
		sc.progress(sc.end.ScanProgress)
	}
	if full {
		sc.end.Stopped = sc.over()
	}
	if at < hi && sc.end.Next == 0 {
		sc.end.Next = at
	}
	return nil
}

// Newest first, a scan reads windows of the stream that grow backwards
// from the window's end: each window forward, keeping its last hits, then
// handing them out newest first. The byte bound is checked between
// windows, and a window spans no more messages than the bytes left to
// read hold at the stream's average size, so a page reads about
// MaxBytes.
const (
	firstWindow = 1024
	maxWindow   = 64 * 1024
)

// backward reads [lo, hi) newest first.
func (sc *scanner) backward(ctx context.Context, lo, hi uint64) error {
	window := uint64(firstWindow)
	for end := hi; end > lo; {
		if why := sc.over(); why != "" {
			sc.end.Stopped, sc.end.Next = why, end
			return nil
		}
		span := min(window, end-lo)
		if sc.q.MaxBytes > 0 {
			left := sc.q.MaxBytes - sc.end.Bytes
			span = min(span, uint64(max(left/max(sc.avg, 1), 1)))
		}
		start := end - span
		var kept []Hit
		_, _, first, err := sc.read(ctx, start, end, false, func(h Hit) bool {
			if len(kept) == sc.q.Limit-sc.hits {
				kept = append(kept[1:], h) // the page has room for the newest only
			} else {
				kept = append(kept, h)
			}
			return true
		})
		if err != nil {
			return err
		}
		if !first.IsZero() {
			sc.end.Reached = first
		}
		if sc.progress != nil {
			sc.progress(sc.end.ScanProgress)
		}
		for i := len(kept) - 1; i >= 0; i-- {
			sc.hits++
			if !sc.hit(kept[i]) || sc.hits == sc.q.Limit {
				sc.end.Stopped, sc.end.Next = "limit", kept[i].Seq
				return nil
			}
		}
		end, window = start, min(window*4, maxWindow)
	}
	return nil
}

// headerBytes is about how many bytes h takes on the wire.
func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// Deliveries tells where many events stand, as Delivery does, reading
// each destination's consumer once: for the hits of one page of a search.
// Its view of a consumer is as old as its first question about it.
type Deliveries struct {
	s      *Store
	synced bool
	infos  map[[2]string]*jetstream.ConsumerInfo
}

// Deliveries starts a set of questions about where events stand.
func (s *Store) Deliveries() *Deliveries {
	return &Deliveries{s: s, infos: map[[2]string]*jetstream.ConsumerInfo{}}
}

// Of is Delivery for the event e stored at seq, at destination.
func (d *Deliveries) Of(ctx context.Context, e *Envelope, seq uint64, destination string) (Delivery, error) {
	if !d.synced {
		for _, t := range d.s.tails[:2] {
			if _, err := t.sync(ctx, time.Second); err != nil {
				return Delivery{Destination: destination}, err
			}
		}
		d.synced = true
	}
	k := [2]string{e.Route, destination}
	info, ok := d.infos[k]
	if !ok {
		var err error
		if info, err = d.s.consumerInfo(ctx, e.Route, destination); err != nil {
			return Delivery{Destination: destination}, err
		}
		d.infos[k] = info
	}
	return d.s.delivery(ctx, e, seq, destination, info)
}
