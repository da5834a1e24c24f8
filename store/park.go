package store

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Parking: a webhook waiting a while for its next attempt is not left in
// its consumer as a nak-delayed message, which JetStream keeps in memory
// (about 184 B each), counts against MaxAckPending and scans on every
// timer. The forwarder parks it instead: a small record, without the
// body, in WEBHOOKS_PARKED on parked.<route>.<destination>.<slot>, where
// slot is the due time in Unix milliseconds rounded down to parkSlot, and
// acks the message. The store's mover reads each slot's subject once that
// slot has passed, publishes a due record to WEBHOOKS on
// due.<route>.<destination>.v2 (which only that destination's consumer
// reads) and purges what it moved. The forwarder loads the body of a due
// record from the original message. Memory per destination grows with the
// distinct slots in flight (at most the longest delay ÷ parkSlot), not with
// the webhooks parked.

// parkSlot is the width of one due slot: a parked webhook comes back at
// most this much after its due time, plus the mover's tick.
const parkSlot = 250 * time.Millisecond

// ParkedStreamName is the stream of parked records.
const ParkedStreamName = "WEBHOOKS_PARKED"

// Headers of parked and due records.
const (
	hdrAttempt = "Jethook-Attempt" // attempts made so far
	hdrDue     = "Jethook-Due"
	hdrWaiting = "Jethook-Waiting" // a waiting record: when its event was queued
	hdrBy      = "Jethook-By"      // the instance that wrote an ordered record
)

// Parked says where a parked webhook stands.
type Parked struct {
	Seq       uint64    // the original message's sequence in WEBHOOKS
	Attempts  int       // attempts made so far
	FirstSeen time.Time // when the original was stored (for max_age)
	Due       time.Time // when the next attempt is due
	// Again is, for a message parked again without an attempt (one that
	// arrived after its destination's gate shut), that message's sequence
	// in WEBHOOKS: with it, the record is new although its attempts are
	// the same as the record that queued the message.
	Again uint64
	// Key is the event's ordering key when Ordered (a destination with
	// `order:`, order.go): its due record goes only if it is still the
	// key's head.
	Key     OrderKey
	Ordered bool
	// Waiting marks a waiting record (order.go): the event is queued
	// behind its key's head, since QueuedAt, and the record brings it
	// back only if the index no longer knows it.
	Waiting  bool
	QueuedAt time.Time
	// By names the instance that wrote an ordered record, with waiting
	// records on (owners.go).
	By string
}

// DueSubject is where a destination's parked webhooks come back when due.
func DueSubject(route, destination string) string {
	return "due." + route + "." + destination + "." + layoutToken
}

// waitingSubject is where a waiting record (order.go) is parked: its
// due slot's subject with waitingToken appended, which the mover moves as
// it moves a slot, but which neither counts as a webhook in backoff nor
// matches the filters that look for them (parked.<route>.<dest>.*).
func waitingSubject(route, destination string, due time.Time) string {
	return parkedSubject(route, destination, due) + "." + waitingToken
}

const waitingToken = "w"

func parkedSubject(route, destination string, due time.Time) string {
	ms := due.UnixMilli()
	return "parked." + route + "." + destination + "." + strconv.FormatInt(ms-ms%parkSlot.Milliseconds(), 10)
}

func (p Parked) header(eventID string) nats.Header {
	h := nats.Header{
		hdrEventID:   {eventID},
		hdrSeq:       {strconv.FormatUint(p.Seq, 10)},
		hdrAttempt:   {strconv.Itoa(p.Attempts)},
		hdrFirstSeen: {p.FirstSeen.UTC().Format(time.RFC3339Nano)},
		hdrDue:       {p.Due.UTC().Format(time.RFC3339Nano)},
	}
	if p.Ordered {
		h.Set(hdrKey, p.Key.String())
	}
	if p.Waiting {
		h.Set(hdrWaiting, p.QueuedAt.UTC().Format(time.RFC3339Nano))
	}
	if p.By != "" {
		h.Set(hdrBy, p.By)
	}
	return h
}

func parkedFrom(h nats.Header) (p Parked, err error) {
	var err1, err2, err3, err4 error
	p.Seq, err1 = strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	p.Attempts, err2 = strconv.Atoi(h.Get(hdrAttempt))
	p.FirstSeen, err3 = time.Parse(time.RFC3339Nano, h.Get(hdrFirstSeen))
	p.Due, err4 = time.Parse(time.RFC3339Nano, h.Get(hdrDue))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return p, fmt.Errorf("parked record: %w", err)
	}
	if b, err := hex.DecodeString(h.Get(hdrKey)); err == nil && len(b) == len(p.Key) {
		p.Key, p.Ordered = OrderKey(b), true
	}
	if v := h.Get(hdrWaiting); v != "" {
		if p.QueuedAt, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return p, fmt.Errorf("parked record: %w", err)
		}
		p.Waiting = true
	}
	p.By = h.Get(hdrBy)
	return p, nil
}

func (s *Store) ensureParked(ctx context.Context) error {
	_, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        ParkedStreamName,
		Description: "jethook: webhooks waiting for their next attempt, by due time (no payloads)",
		Subjects:    []string{"parked.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      s.opts.Retention,
		Duplicates:  s.opts.RaceWindow,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", ParkedStreamName, err)
	}
	return nil
}

// Park stores a record that route's destination should attempt event
// eventID again at p.Due, and waits for the stream's ack: only then may the
// caller ack the message it parks. Parking the same attempt twice (a crash
// between park and ack) stores one record within the race window.
func (s *Store) Park(ctx context.Context, route, destination, eventID string, p Parked) error {
	s.stamp(&p)
	m := &nats.Msg{Subject: parkedSubject(route, destination, p.Due), Header: p.header(eventID)}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	id := fmt.Sprintf("park/%s/%d/%d", destination, p.Seq, p.Attempts)
	if p.Again != 0 {
		id += fmt.Sprintf("/again/%d", p.Again)
	}
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(ParkedStreamName))
	if err != nil {
		return fmt.Errorf("%w: park: %w", ErrUnavailable, err)
	}
	if !ack.Duplicate {
		s.mover.count(route, destination)
	}
	return nil
}

// IsDue reports whether m, fetched from a destination's consumer, is a
// parked webhook come due rather than a webhook or a replay.
func IsDue(m jetstream.Msg) bool { return strings.HasPrefix(m.Subject(), "due.") }

// LoadDue reads a due record and the webhook it points to. ErrNotFound
// means the original is gone (purged, or past the retention).
func (s *Store) LoadDue(ctx context.Context, m jetstream.Msg) (*Envelope, Parked, error) {
	p, err := parkedFrom(m.Headers())
	if err != nil {
		return nil, p, err
	}
	orig, err := s.main.GetMsg(ctx, p.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, p, fmt.Errorf("webhook %d: %w", p.Seq, ErrNotFound)
	}
	if err != nil {
		return nil, p, fmt.Errorf("%w: webhook %d: %w", ErrUnavailable, p.Seq, err)
	}
	e, err := decodeEnvelope(orig.Subject, orig.Header, orig.Data)
	if err != nil {
		return nil, p, err
	}
	return e, p, nil
}

// mover moves parked records whose slot has passed back to their
// destinations. Every jethook of a cluster runs one; the due records'
// Nats-Msg-Id keeps two movers from queuing a record twice.
type mover struct {
	s    *Store
	st   jetstream.Stream
	tick time.Duration
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	parked map[[2]string]uint64 // route, destination → records parked
	// parks counts the records this store parked, ever: a look adds those
	// parked since it began to what it listed, so that a webhook parked
	// and acked is counted from its parking on, not from the next look.
	parks    map[[2]string]uint64
	releases map[[2]string]struct{} // route, destination → release asked for
}

// moveTick is how often the mover looks for slots that have passed.
const moveTick = 100 * time.Millisecond

func (s *Store) startMover(ctx context.Context) error {
	st, err := s.js.Stream(ctx, ParkedStreamName)
	if err != nil {
		return fmt.Errorf("stream %s: %w", ParkedStreamName, err)
	}
	s.parked = st
	mv := &mover{s: s, st: st, tick: moveTick, stop: make(chan struct{}), done: make(chan struct{}),
		parked: map[[2]string]uint64{}, parks: map[[2]string]uint64{}, releases: map[[2]string]struct{}{}}
	s.mover = mv
	go mv.run()
	return nil
}

func (mv *mover) close() {
	if mv == nil {
		return
	}
	close(mv.stop)
	<-mv.done
}

func (mv *mover) run() {
	defer close(mv.done)
	t := time.NewTicker(mv.tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-mv.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := mv.moveDue(ctx, time.Now()); err != nil && !errors.Is(err, context.Canceled) {
			mv.s.opts.Logger.Warn("moving parked webhooks", "err", err)
			select { // a store outage: try again a little later
			case <-time.After(time.Second):
			case <-mv.stop:
			}
		}
		cancel()
	}
}

// moveDue moves every slot that ended by now, oldest first, and refreshes
// the parked counts: what the stream lists, less what this look moved,
// plus what this store parked since the look began. A record parked
// during the look may be counted once too often, until the next look.
func (mv *mover) moveDue(ctx context.Context, now time.Time) error {
	st := mv.st
	mv.mu.Lock()
	parksBefore := maps.Clone(mv.parks)
	mv.mu.Unlock()
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("parked.>"))
	if err != nil {
		return err
	}
	counts := map[[2]string]uint64{}
	type bucket struct {
		subject, route, dest string
		slot                 int64
		waiting              bool // waiting records (order.go), not webhooks in backoff
	}
	var due []bucket
	for subj, n := range info.State.Subjects {
		p := strings.Split(subj, ".")
		waiting := len(p) == 5 && p[4] == waitingToken
		if len(p) != 4 && !waiting {
			continue
		}
		slot, err := strconv.ParseInt(p[3], 10, 64)
		if err != nil {
			continue
		}
		if !waiting { // a waiting event is not in backoff
			counts[[2]string{p[1], p[2]}] += n
		}
		if slot+parkSlot.Milliseconds() <= now.UnixMilli() {
			due = append(due, bucket{subj, p[1], p[2], slot, waiting})
		}
	}
	defer func() {
		mv.mu.Lock()
		for k, n := range mv.parks {
			counts[k] += n - parksBefore[k]
		}
		mv.parked = counts
		mv.mu.Unlock()
	}()
	slices.SortFunc(due, func(a, b bucket) int { return cmp.Compare(a.slot, b.slot) }) // oldest first
	for _, b := range due {
		n, err := mv.move(ctx, st, b.subject, b.route, b.dest, 0, time.Time{})
		k := [2]string{b.route, b.dest}
		if !b.waiting {
			counts[k] -= min(n, counts[k]) // records parked since the listing may be moved too
		}
		if err != nil {
			return err
		}
	}
	mv.mu.Lock()
	releases := mv.releases
	mv.releases = map[[2]string]struct{}{}
	mv.mu.Unlock()
	for k := range releases {
		var slots []bucket
		for subj := range info.State.Subjects {
			p := strings.Split(subj, ".")
			if len(p) != 4 || p[1] != k[0] || p[2] != k[1] {
				continue
			}
			if slot, err := strconv.ParseInt(p[3], 10, 64); err == nil {
				slots = append(slots, bucket{subj, p[1], p[2], slot, false})
			}
		}
		slices.SortFunc(slots, func(a, b bucket) int { return cmp.Compare(a.slot, b.slot) })
		var moved uint64
		for _, b := range slots {
			n, err := mv.move(ctx, st, b.subject, b.route, b.dest, info.State.LastSeq, now)
			moved += n
			counts[k] -= min(n, counts[k])
			if err != nil {
				mv.mu.Lock()
				mv.releases[k] = struct{}{} // the rest on the next tick
				mv.mu.Unlock()
				return err
			}
		}
		if moved > 0 {
			mv.s.opts.Logger.Info("parked webhooks released: their destination is back", "route", k[0], "destination", k[1], "released", moved)
		}
	}
	return nil
}

// Release brings route's destination's parked webhooks forward: on its
// next tick (a tenth of a second), the mover queues every record parked
// until then as due at once, whatever its due time, and the forwarder
// attempts them at the destination's limits. The forwarder asks for it
// when a destination comes back after an outage, so that the webhooks
// that failed during it do not each wait out their own backoff. A record
// parked after the release began waits for its own due time.
func (s *Store) Release(route, destination string) {
	if s.mover == nil {
		return
	}
	s.mover.mu.Lock()
	s.mover.releases[[2]string{route, destination}] = struct{}{}
	s.mover.mu.Unlock()
}

// move queues every record on subject (up to the stream sequence bound, if
// not 0) as a due record of route's destination, then purges what it
// queued, and returns how many it moved. A zero now keeps each record's
// due time; otherwise the records are due at now (a release).
func (mv *mover) move(ctx context.Context, st jetstream.Stream, subject, route, dest string, bound uint64, now time.Time) (uint64, error) {
	var (
		last   uint64
		futs   []jetstream.PubAckFuture
		pubErr error
	)
	// Read through a record source: a read cut short (a stall) is asked
	// again, not taken for the end, which would leave a release's records
	// waiting for their own due time.
	src := recordSource{st, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}}
	err := src.while(ctx, 1024, func(m jetstream.Msg) bool {
		md, err := m.Metadata()
		if err != nil {
			return true
		}
		if bound > 0 && md.Sequence.Stream > bound {
			return false
		}
		last = md.Sequence.Stream
		p, err := parkedFrom(m.Headers())
		if err != nil {
			mv.s.opts.Logger.Error("parked record unreadable; dropped", "subject", subject, "seq", last, "err", err)
			return true
		}
		h := m.Headers()
		if !now.IsZero() {
			h = p.header(h.Get(hdrEventID))
			h.Set(hdrDue, now.UTC().Format(time.RFC3339Nano))
		}
		dm := &nats.Msg{Subject: DueSubject(route, dest), Header: h}
		fut, err := mv.s.js.PublishMsgAsync(dm,
			// One due record per parked record, whoever moves it
			// (two movers, or one again after a crash before the
			// purge); a webhook parked twice with the same attempts
			// (again, unattempted) has two parked records.
			jetstream.WithMsgID(fmt.Sprintf("due/%s/p%d", dest, last)),
			jetstream.WithExpectStream(StreamName),
			jetstream.WithStallWait(mv.s.opts.PublishTimeout))
		if err != nil {
			pubErr = err
			return false
		}
		futs = append(futs, fut)
		return true
	})
	if pubErr != nil {
		return 0, fmt.Errorf("due record: %w", pubErr)
	}
	if err != nil {
		return 0, err
	}
	timeout := time.NewTimer(mv.s.opts.PublishTimeout)
	defer timeout.Stop()
	for _, fut := range futs {
		select {
		case ack := <-fut.Ok():
			if !ack.Duplicate { // a duplicate's sequence is the record told before
				mv.s.indexSeq(ack.Sequence)
			}
		case err := <-fut.Err():
			return 0, fmt.Errorf("due record: %w", err)
		case <-timeout.C:
			return 0, errors.New("due records: no ack from the stream")
		}
	}
	if last == 0 {
		return 0, nil
	}
	// Only what was read: a record parked into this slot meanwhile stays
	// for the next tick.
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(last+1)); err != nil {
		return 0, fmt.Errorf("purge %s: %w", subject, err)
	}
	return uint64(len(futs)), nil
}

// count counts a record just parked (Park) in the parked counts at once:
// the forwarder acks the webhook's message next, and until the mover's
// next look the webhook would be counted nowhere (Backlogs).
func (mv *mover) count(route, destination string) {
	if mv == nil {
		return
	}
	k := [2]string{route, destination}
	mv.mu.Lock()
	mv.parked[k]++
	mv.parks[k]++
	mv.mu.Unlock()
}

// ParkedCount is how many of route's destination's webhooks are parked,
// as of the mover's last look (a fraction of a second ago), plus those
// this store parked since: a webhook this store parks counts at once,
// one another jethook parks from the next look, and one that came due
// counts until the look that moved it ends.
func (s *Store) ParkedCount(route, destination string) uint64 {
	if s.mover == nil {
		return 0
	}
	s.mover.mu.Lock()
	defer s.mover.mu.Unlock()
	return s.mover.parked[[2]string{route, destination}]
}

// parkedRefs returns, per route, the lowest WEBHOOKS sequence a parked
// record, a due record stored at or after from, or an event queued behind
// its ordering key's head (order.go) points at: webhooks
// still waiting for an attempt, whose messages are acked. It reads every
// parked record, and is for the rare purge near the store's limit.
func (s *Store) parkedRefs(ctx context.Context, from uint64) (map[string]uint64, error) {
	refs := map[string]uint64{}
	parked, err := s.js.Stream(ctx, ParkedStreamName)
	if err != nil {
		return nil, err
	}
	for _, src := range []recordSource{
		{parked, jetstream.OrderedConsumerConfig{HeadersOnly: true}},
		{s.main, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{"due.>"},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, 1)}},
	} {
		err := src.each(ctx, func(m jetstream.Msg) {
			p := subjectParts(m.Subject())
			seq, err := strconv.ParseUint(m.Headers().Get(hdrSeq), 10, 64)
			if len(p) < 2 || err != nil {
				return
			}
			if at, ok := refs[p[1]]; !ok || seq < at {
				refs[p[1]] = seq
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if err := s.orderRefs(refs); err != nil {
		return nil, err
	}
	return refs, nil
}
