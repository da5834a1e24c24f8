package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ordering: a destination with `order:` delivers the events of one key one
// at a time, in the order of their stream sequences. For each key that has
// an event not yet settled, the index's Pebble database holds the key's
// head, the one event that may be attempted, and the events queued behind
// it:
//
//	'o' route 0x00 dest 0x00 key(16); value: seq(8) since(8) failing(8) event id
//	'q' route 0x00 dest 0x00 key(16) seq(8); value: attempts(8) first(8) queued(8) event id
//
// key is the first 16 bytes of the SHA-256 of the key's value, seq the
// webhook's sequence in WEBHOOKS (a replay's own), since when the event
// became head, failing when its first attempt failed (0 while none did)
// and queued when the event was queued behind the head. Times are Unix
// nanoseconds. A queued event's message is acked: the queue entry carries it on,
// as a parked record does. When the head is settled (delivered,
// dead-lettered, filtered), the first queued event becomes head and comes
// back as a due record; when none is queued the key's entries are gone. So
// the database holds the keys that have an event in flight or waiting,
// never every key seen, and the server none of them.
//
// A head whose first attempt is under way here, with nothing queued
// behind it, is kept in memory only (orderStripe.fresh): most keys have
// one event at a time, and their head is taken and passed on without a
// write. It goes to disk when an event is queued behind it, when its
// attempt fails, and when its message goes back to its consumer or is
// parked (KeepHead). A kill -9 loses it, as it could lose a head written
// without fsync: its message, not settled, comes back before anything
// newer and takes the key again.
//
// Every other change is committed with fsync before the message it
// concerns is settled or attempted: a kill -9 never leaves a key without
// its head nor a later event before an earlier one. Like the work records, these
// entries are kept here and nowhere else; the waiting records (below), on
// by default with an external server, bring the queued events back to
// their keys when an index is lost. Without them a lost index loses the
// queues of blocked keys (their events stay in WEBHOOKS, acked).

// OrderKey identifies an ordering key: the first 16 bytes of the SHA-256
// of its value.
type OrderKey [16]byte

// KeyOf is the OrderKey of a key's value.
func KeyOf(value string) OrderKey {
	sum := sha256.Sum256([]byte(value))
	return OrderKey(sum[:16])
}

// String is the key in hex, as due records carry it.
func (k OrderKey) String() string { return hex.EncodeToString(k[:]) }

// hdrKey carries the ordering key of a parked or due record.
const hdrKey = "Jethook-Order-Key"

// DueKey is the ordering key a due record carries; ok is false for one
// parked by a destination without ordering.
func DueKey(m jetstream.Msg) (k OrderKey, ok bool) {
	b, err := hex.DecodeString(m.Headers().Get(hdrKey))
	if err != nil || len(b) != len(k) {
		return k, false
	}
	return OrderKey(b), true
}

// Verdict is what Admit decided for one event.
type Verdict int

const (
	// Go: the event is its key's head; attempt it.
	Go Verdict = iota
	// Queued: an earlier event holds the key; the event is queued behind it
	// and its message may be acked.
	Queued
	// Settled: the key has moved past the event (it was delivered or
	// dead-lettered, and its settle was lost); ack it without an attempt.
	Settled
	// Overtaken: a later event of the key took the key while this one,
	// never settled, was away (handed back by a fetch that ended, or
	// dropped by one and sent again after its ack wait). It is queued
	// first behind the head, as Queued is: the key keeps one event at a
	// time and loses none, but this one goes after the head.
	Overtaken
	// Renew: a waiting record of an event still queued behind its head;
	// park the next one (Wait), then ack this one.
	Renew
)

// Claim is one fetched event of an ordered destination, for Admit.
type Claim struct {
	Key       OrderKey
	Seq       uint64    // the webhook's sequence in WEBHOOKS (a replay's own)
	EventID   string    // for the due record when it is released
	Attempts  int       // attempts made so far
	FirstSeen time.Time // when it was stored
	Due       bool      // a due record: it goes if it is head, else is settled, unless the index lost it
	// Waiting marks the due record of a waiting record: the event was
	// queued behind its head at QueuedAt, and the record was due at
	// WaitDue.
	Waiting  bool
	QueuedAt time.Time
	WaitDue  time.Time
	By       string // the instance that wrote the due record, if it says
}

// orderStripes is how many locks share the keys: an admit and a release of
// one key never interleave.
const orderStripes = 1024

// orderState is what the ordering keeps in memory, shared among the keys
// by stripe. Its size does not depend on the keys seen or blocked: about
// 1 MiB, and a map entry per head in its first attempt.
type orderState struct {
	stripes [orderStripes]orderStripe
	load    sync.Once // counts the head entries on disk (loadHeads)
	loadErr error
}

// orderStripe is one lock of the keys and what it guards for them:
//   - fresh: the heads kept in memory only, taken by Admit for their first
//     attempt here with nothing queued behind them, by destination and key;
//   - onDisk: a counting filter of the head entries on disk: a key whose
//     slot counts 0 has none, and Admit does not read the index for it
//     (a lookup that misses costs more than one that finds: it reads the
//     index blocks of every table that might hold the key). A count is
//     raised before its entry is written and lowered once it is deleted,
//     so it never counts too few; a slot that reached 255 stays there.
type orderStripe struct {
	sync.Mutex
	fresh  map[freshKey]head
	onDisk [onDiskSlots]uint8
}

// onDiskSlots is each stripe's count of slots: with 100,000 head entries
// on disk about one key in ten whose slot is shared reads the index.
const onDiskSlots = 1024

type freshKey struct {
	route, dest string
	key         OrderKey
}

func stripe(k OrderKey) int { return int(binary.BigEndian.Uint16(k[:2])) % orderStripes }

func slot(k OrderKey) int { return int(binary.BigEndian.Uint16(k[2:4])) % onDiskSlots }

// stripeOf is k's stripe of s's ordering.
func (s *Store) stripeOf(k OrderKey) *orderStripe { return &s.order.stripes[stripe(k)] }

// mayHave reports whether k may have a head entry on disk.
func (st *orderStripe) mayHave(k OrderKey) bool { return st.onDisk[slot(k)] > 0 }

// written counts a head entry of k about to be written.
func (st *orderStripe) written(k OrderKey) {
	if c := &st.onDisk[slot(k)]; *c < 255 {
		*c++
	}
}

// deleted uncounts a head entry of k, deleted.
func (st *orderStripe) deleted(k OrderKey) {
	if c := &st.onDisk[slot(k)]; *c > 0 && *c < 255 {
		*c--
	}
}

// loadHeads counts the head entries on disk, once, before the first use
// of the ordering's filter.
func (s *Store) loadHeads() error {
	s.order.load.Do(func() {
		if s.idx == nil {
			return
		}
		it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'o'}, UpperBound: []byte{'o' + 1}})
		if err != nil {
			s.order.loadErr = fmt.Errorf("order: %w", err)
			return
		}
		for it.First(); it.Valid(); it.Next() {
			if k := it.Key(); len(k) > len(OrderKey{}) {
				key := OrderKey(k[len(k)-len(OrderKey{}):])
				s.stripeOf(key).written(key)
			}
		}
		if err := it.Close(); err != nil {
			s.order.loadErr = fmt.Errorf("order: %w", err)
		}
	})
	return s.order.loadErr
}

// headOf reads key k's head at route's destination: from memory (fresh)
// or from disk. The caller holds k's lock.
func (s *Store) headOf(route, dest string, k OrderKey) (h head, fresh, ok bool, err error) {
	if err := s.loadHeads(); err != nil {
		return head{}, false, false, err
	}
	st := s.stripeOf(k)
	if h, ok := st.fresh[freshKey{route, dest, k}]; ok {
		return h, true, true, nil
	}
	if !st.mayHave(k) {
		return head{}, false, false, nil
	}
	h, ok, err = s.readHead(headKey(route, dest, k))
	return h, false, ok, err
}

// remember keeps h, a fresh head of key k, in memory (fresh is true) or
// forgets the fresh head k had, now on disk or settled. The caller holds
// k's lock.
func (st *orderStripe) remember(route, dest string, k OrderKey, h head, fresh bool) {
	fk := freshKey{route, dest, k}
	if !fresh {
		delete(st.fresh, fk)
		return
	}
	if st.fresh == nil {
		st.fresh = map[freshKey]head{}
	}
	st.fresh[fk] = h
}

func orderPrefix(kind byte, route, dest string) []byte {
	p := make([]byte, 0, 1+len(route)+1+len(dest)+1+16+8)
	p = append(p, kind)
	p = append(p, route...)
	p = append(p, 0)
	p = append(p, dest...)
	return append(p, 0)
}

func headKey(route, dest string, k OrderKey) []byte {
	return append(orderPrefix('o', route, dest), k[:]...)
}

func queueKey(route, dest string, k OrderKey, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(orderPrefix('q', route, dest), k[:]...), seq)
}

// queueOf bounds an iterator to the events queued behind key k's head,
// oldest first.
func queueOf(route, dest string, k OrderKey) *pebble.IterOptions {
	lower := append(orderPrefix('q', route, dest), k[:]...)
	return &pebble.IterOptions{LowerBound: lower, UpperBound: binary.BigEndian.AppendUint64(slices.Clone(lower), ^uint64(0))}
}

// head is a key's head entry.
type head struct {
	seq     uint64
	since   int64 // Unix ns
	failing int64 // Unix ns, 0 while no attempt failed
	id      string
}

func (h head) value() []byte {
	v := binary.BigEndian.AppendUint64(nil, h.seq)
	v = binary.BigEndian.AppendUint64(v, uint64(h.since))
	v = binary.BigEndian.AppendUint64(v, uint64(h.failing))
	return append(v, h.id...)
}

func headFrom(v []byte) (head, bool) {
	if len(v) < 24 {
		return head{}, false
	}
	return head{binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:])),
		int64(binary.BigEndian.Uint64(v[16:])), string(v[24:])}, true
}

// queued is the entry of an event queued behind its key's head.
type queued struct {
	attempts int
	first    int64 // Unix ns: when the webhook was stored
	at       int64 // Unix ns: when it was queued
	id       string
}

func (q queued) value() []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(q.attempts))
	v = binary.BigEndian.AppendUint64(v, uint64(q.first))
	v = binary.BigEndian.AppendUint64(v, uint64(q.at))
	return append(v, q.id...)
}

func queuedFrom(v []byte) (queued, bool) {
	if len(v) < 24 {
		return queued{}, false
	}
	return queued{int(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])),
		int64(binary.BigEndian.Uint64(v[16:])), string(v[24:])}, true
}

func (s *Store) readHead(k []byte) (head, bool, error) {
	v, closer, err := s.idx.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return head{}, false, nil
	}
	if err != nil {
		return head{}, false, fmt.Errorf("order: %w", err)
	}
	defer closer.Close()
	h, ok := headFrom(v)
	if !ok {
		return head{}, false, fmt.Errorf("order: head entry of %d bytes", len(v))
	}
	return h, true, nil
}

// Admit decides, for each claim of route's destination in the order they
// were fetched, whether the event may be attempted now: a key without a
// head takes the event as head, an event after the head is queued behind
// it, an event before it was settled already, unless the attempt log
// says it was not (Overtaken: it is queued first behind the head). It
// commits the batch's changes with fsync before it returns, so the caller
// may then attempt (Go) or ack (Queued, Overtaken, Settled); it syncs them
// only when an event was queued. A new head is kept in memory (fresh)
// until something must outlive a crash with it. A due record (a parked
// head's retry, or a queued event released) is Go only if it is its key's
// head.
func (s *Store) Admit(route, dest string, claims []Claim, now time.Time) ([]Verdict, error) {
	var idx []int
	for _, c := range claims {
		idx = append(idx, stripe(c.Key))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.order.stripes[i].Lock()
	}
	defer func() {
		for _, i := range idx {
			s.order.stripes[i].Unlock()
		}
	}()
	out := make([]Verdict, len(claims))
	b := s.idx.db.NewBatch()
	defer b.Close()
	// The heads taken, or written to disk, in this batch: in memory
	// (fresh) once it is committed.
	type taken struct {
		h     head
		fresh bool
	}
	decided := map[OrderKey]taken{}
	for i, c := range claims {
		lost := false
		hk := headKey(route, dest, c.Key)
		st := s.stripeOf(c.Key)
		t, ok := decided[c.Key]
		if !ok {
			var err error
			if t.h, t.fresh, ok, err = s.headOf(route, dest, c.Key); err != nil {
				return nil, err
			}
		}
		h := t.h
		if c.Due && !(ok && h.seq == c.Seq) {
			// A due record of an event that is not head: still queued
			// (a release that did not finish comes again; a waiting
			// record is renewed), settled, or lost by an index made
			// since, which takes it as it would a new event.
			v, err := s.admitDue(route, dest, c)
			if err != nil {
				return nil, err
			}
			if out[i] = v; v != Go {
				continue
			}
			s.opts.Logger.Warn("an event waiting behind its ordering key, which another replica or a lost index held, comes back to its key",
				"route", route, "destination", dest, "event_id", c.EventID, "seq", c.Seq, "waiting_record", c.Waiting)
			c.Due, lost = false, true
			if !ok {
				// The key's head, and the other events that waited, may
				// come back in any order: all are queued, by sequence,
				// behind a placeholder head that ReleaseHeadless lets go
				// once they have had time to come back.
				h = head{seq: 0, since: now.UnixNano()}
				ok = true
				t = taken{h: h}
				st.written(c.Key)
				_ = b.Set(hk, h.value(), nil)
			}
		}
		switch {
		case ok && h.seq == c.Seq && c.Waiting:
			out[i] = Settled // the head's attempt, parked or due record carries it
		case ok && h.seq == c.Seq:
			out[i] = Go
		case !ok:
			decided[c.Key] = taken{h: head{seq: c.Seq, since: now.UnixNano(), id: c.EventID}, fresh: true}
			out[i] = Go
		default:
			out[i] = Queued
			if c.Seq < h.seq && lost {
				out[i] = Overtaken
			} else if c.Seq < h.seq {
				// Before the head: settled already, or overtaken.
				settled, err := s.settledAt(route, dest, c, true)
				if err != nil {
					return nil, err
				}
				if settled {
					out[i] = Settled
					continue
				}
				out[i] = Overtaken
			}
			if t.fresh {
				// The head goes to disk with the event queued behind it.
				st.written(c.Key)
				_ = b.Set(hk, h.value(), nil)
				t.fresh = false
			}
			q := queued{attempts: c.Attempts, first: c.FirstSeen.UnixNano(), at: now.UnixNano(), id: c.EventID}
			_ = b.Set(queueKey(route, dest, c.Key, c.Seq), q.value(), nil)
			decided[c.Key] = t
		}
	}
	if !b.Empty() {
		// The batch queues events behind their heads (with the heads, if
		// fresh or placeholders): their messages are acked next, so it
		// must be on disk first.
		if err := b.Commit(pebble.Sync); err != nil {
			return nil, fmt.Errorf("order: %w", err)
		}
	}
	for k, t := range decided {
		s.stripeOf(k).remember(route, dest, k, t.h, t.fresh)
	}
	return out, nil
}

// admitDue decides for a due record whose event is not its key's head:
// Settled when the event is queued (a waiting record then gets Renew) or
// was settled; Go when the index lost it, for Admit to place as a new
// event. An index knows every event queued or parked since it was made,
// and since this jethook took the destination, so only an event another
// owner (or this one before its index was made) wrote the record of, and
// neither delivered nor dead-lettered nor filtered by the attempt log, was
// lost.
func (s *Store) admitDue(route, dest string, c Claim) (Verdict, error) {
	_, closer, err := s.idx.db.Get(queueKey(route, dest, c.Key, c.Seq))
	switch {
	case err == nil:
		closer.Close()
		if c.Waiting {
			return Renew, nil // this instance's record from now on
		}
		return Settled, nil
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, fmt.Errorf("order: %w", err)
	}
	if c.By != "" && s.inst != nil {
		if c.By == s.inst.self {
			return Settled, nil // this index moved it on
		}
		// Written by the destination's owner before this one (owners.go).
		return s.lostUnlessSettled(route, dest, c)
	}
	since := c.FirstSeen
	if c.Waiting {
		since = c.QueuedAt
	}
	if !since.Before(s.idx.born) {
		return Settled, nil
	}
	return s.lostUnlessSettled(route, dest, c)
}

// lostUnlessSettled is Settled if the attempt log shows c's event
// delivered, dead-lettered or filtered at route's destination, else Go.
// Parked does not count: c is the due record its parked record became.
func (s *Store) lostUnlessSettled(route, dest string, c Claim) (Verdict, error) {
	settled, err := s.settledAt(route, dest, c, false)
	if err != nil || settled {
		return Settled, err
	}
	return Go, nil
}

// settledAt reports whether the attempt log shows c's event settled at
// route's destination: its latest attempt since it was stored delivered
// it, filtered it out or dead-lettered it (none of these has a next
// attempt), or parked it (its parked record carries it on). An event that
// comes to Admit after a later event of its key took the key is either
// one whose settle was lost (a crash between its key's passing on and its
// ack) or one that was away and never settled. Parking counts only if
// parked is true.
func (s *Store) settledAt(route, dest string, c Claim, parked bool) (bool, error) {
	as, err := s.indexedAttempts(c.EventID)
	if err != nil {
		return false, err
	}
	for _, a := range slices.Backward(as) {
		if a.Route == route && a.Destination == dest && !a.Time.Before(c.FirstSeen) {
			return a.Outcome == "delivered" || a.Next == 0 || parked && a.Parked, nil
		}
	}
	return false, nil
}

// SyncOrder puts on disk the ordering changes written so far without
// sync (KeepHead, Failing): a head's message may be acked after its
// parking only once its head entry is there.
func (s *Store) SyncOrder() error {
	if err := s.idx.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	return nil
}

// Failing notes that route's destination's head seq of key k failed an
// attempt, and returns since when it has been failing: its first failed
// attempt, which max_blocked counts from.
// A fresh head goes to disk with its mark: from its first failure on, the
// key may stay blocked for a while, and status reads and the sweep of
// lost heads see it.
func (s *Store) Failing(route, dest string, k OrderKey, seq uint64, now time.Time) (time.Time, error) {
	st := s.stripeOf(k)
	st.Lock()
	defer st.Unlock()
	h, fresh, ok, err := s.headOf(route, dest, k)
	if err != nil || !ok || h.seq != seq {
		return now, err
	}
	if h.failing == 0 || fresh {
		h.failing = cmp.Or(h.failing, now.UnixNano())
		// Without fsync: a lost mark only starts max_blocked again, and
		// a lost fresh head comes back with its message.
		if err := s.writeHead(route, dest, k, h, fresh); err != nil {
			return now, err
		}
	}
	return time.Unix(0, h.failing), nil
}

// KeepHead puts route's destination's head seq of key k on disk, without
// fsync, if it is fresh: its message goes back to its consumer (a nak) or
// waits parked (then SyncOrder before its ack), and the key must stay
// held meanwhile, in the index where the status reads and the sweep of
// lost heads find it, not in memory.
func (s *Store) KeepHead(route, dest string, k OrderKey, seq uint64) error {
	st := s.stripeOf(k)
	st.Lock()
	defer st.Unlock()
	h, fresh := st.fresh[freshKey{route, dest, k}]
	if !fresh || h.seq != seq {
		return nil
	}
	return s.writeHead(route, dest, k, h, true)
}

// writeHead writes h, key k's head entry, without fsync; one that was
// fresh is then on disk only. The caller holds k's lock.
func (s *Store) writeHead(route, dest string, k OrderKey, h head, fresh bool) error {
	st := s.stripeOf(k)
	if fresh {
		st.written(k)
	}
	if err := s.idx.db.Set(headKey(route, dest, k), h.value(), pebble.NoSync); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	st.remember(route, dest, k, h, false)
	return nil
}

// SettleHead passes key k of route's destination on from its head seq, which
// was settled: the first event queued behind it becomes head and is
// published as a due record, due at now; or, with none queued, the key's
// entries go. It does nothing when seq is not the head. It returns once
// the change is on disk: only then may the caller settle seq's message.
// The next event of the key sees the change only once it is on disk too:
// use it for a head that was not delivered (dead-lettered, or gone), which
// a crash must not bring back to an attempt after a later event of its key
// was delivered.
// The due record is published before the head moves, so a crash in
// between leaves seq head, its message unsettled and the next event
// queued: the release is done again when seq comes back.
func (s *Store) SettleHead(ctx context.Context, route, dest string, k OrderKey, seq uint64, now time.Time) error {
	st := s.stripeOf(k)
	st.Lock()
	defer st.Unlock()
	_, err := s.passOn(ctx, route, dest, k, seq, now, pebble.Sync)
	return err
}

// SettleDelivered is SettleHead for a head that was delivered (or
// filtered out): the next event of the key sees the change at once, and
// may be attempted while it is being put on disk; SettleDelivered returns
// once it is there. A crash before that brings seq back as head, with its
// message, which was not settled yet: it is delivered again (or filtered
// again) before the next event, a duplicate and never an event of the key
// first delivered after a later one. So the key's lock is not held while
// the disk syncs: the destination's other events go on meanwhile. A
// fresh head is forgotten, and nothing is written.
func (s *Store) SettleDelivered(ctx context.Context, route, dest string, k OrderKey, seq uint64, now time.Time) error {
	st := s.stripeOf(k)
	st.Lock()
	wrote, err := s.passOn(ctx, route, dest, k, seq, now, pebble.NoSync)
	st.Unlock()
	if err != nil || !wrote {
		return err
	}
	return s.SyncOrder()
}

// passOn is SettleHead's change, committed with opts; wrote is false when
// seq was not the head, or was fresh: nothing is queued behind a fresh
// head, and it is only forgotten. The caller holds k's lock.
func (s *Store) passOn(ctx context.Context, route, dest string, k OrderKey, seq uint64, now time.Time, opts *pebble.WriteOptions) (wrote bool, err error) {
	hk := headKey(route, dest, k)
	h, fresh, ok, err := s.headOf(route, dest, k)
	if err != nil || !ok || h.seq != seq {
		return false, err
	}
	st := s.stripeOf(k)
	if fresh {
		st.remember(route, dest, k, h, false)
		return false, nil
	}
	it, err := s.idx.db.NewIter(queueOf(route, dest, k))
	if err != nil {
		return false, fmt.Errorf("order: %w", err)
	}
	var next []byte
	var val []byte
	if it.First() {
		next, val = slices.Clone(it.Key()), slices.Clone(it.Value())
	}
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("order: %w", err)
	}
	b := s.idx.db.NewBatch()
	defer b.Close()
	q, readable := queuedFrom(val)
	gone := next == nil || !readable
	if gone {
		_ = b.Delete(hk, nil)
		if next != nil {
			_ = b.Delete(next, nil) // unreadable: dropped rather than blocking the key
		}
	} else {
		p := Parked{
			Seq:       binary.BigEndian.Uint64(next[len(next)-8:]),
			Attempts:  q.attempts,
			FirstSeen: time.Unix(0, q.first),
			Due:       now,
			Key:       k,
			Ordered:   true,
		}
		if err := s.publishDue(ctx, route, dest, p, q.id); err != nil {
			return false, err
		}
		_ = b.Set(hk, head{seq: p.Seq, since: now.UnixNano(), id: q.id}.value(), nil)
		_ = b.Delete(next, nil)
	}
	if err := b.Commit(opts); err != nil {
		return false, fmt.Errorf("order: %w", err)
	}
	if gone {
		st.deleted(k)
	}
	return true, nil
}

// Blocked is what waits on route's destination's ordering keys.
type Blocked struct {
	Keys    int       // keys whose head failed at least once and has not been settled
	Oldest  time.Time // when the longest-failing of them first failed; zero when Keys is 0
	Waiting int       // events queued behind a head
}

// Blocked counts the blocked keys of route's destination and the events
// queued behind heads. It reads their entries on disk: as many as there
// are keys in flight or waiting.
func (s *Store) Blocked(route, dest string) (Blocked, error) {
	var out Blocked
	p := orderPrefix('o', route, dest)
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return out, err
	}
	for it.First(); it.Valid(); it.Next() {
		h, ok := headFrom(it.Value())
		if ok && h.failing != 0 {
			out.Keys++
			if t := time.Unix(0, h.failing); out.Oldest.IsZero() || t.Before(out.Oldest) {
				out.Oldest = t
			}
		}
	}
	if err := it.Close(); err != nil {
		return out, err
	}
	q := orderPrefix('q', route, dest)
	it, err = s.idx.db.NewIter(&pebble.IterOptions{LowerBound: q, UpperBound: append(slices.Clone(q[:len(q)-1]), 1)})
	if err != nil {
		return out, err
	}
	for it.First(); it.Valid(); it.Next() {
		out.Waiting++
	}
	return out, it.Close()
}

// Place is where an event of an ordered destination stands in its key's
// queue.
type Place struct {
	Head    bool      // the event is its key's head: the one attempted
	Waiting bool      // the event is queued behind the head
	Since   time.Time // when it became head, or was queued
	Ahead   int       // events queued before it (not counting the head)
	Behind  int       // events queued after it
	// The key's head: its event id and sequence, when it became head and
	// when its first attempt failed (zero while none did).
	HeadID      string
	HeadSeq     uint64
	HeadSince   time.Time
	HeadFailing time.Time
}

// PlaceOf says where the event at seq (a replay's own sequence) stands in
// key k's queue at route's destination; ok is false when it is neither
// the head nor queued (not yet fetched, or settled). It reads the key's
// entries: as many as events wait behind its head.
func (s *Store) PlaceOf(route, dest string, k OrderKey, seq uint64) (p Place, ok bool, err error) {
	if s.idx == nil {
		return p, false, nil
	}
	st := s.stripeOf(k)
	st.Lock()
	h, _, ok, err := s.headOf(route, dest, k)
	st.Unlock()
	if err != nil || !ok {
		return p, false, err
	}
	p = Place{Head: h.seq == seq, HeadID: h.id, HeadSeq: h.seq, HeadSince: time.Unix(0, h.since)}
	if h.failing != 0 {
		p.HeadFailing = time.Unix(0, h.failing)
	}
	if p.Head {
		p.Since = p.HeadSince
	}
	it, err := s.idx.db.NewIter(queueOf(route, dest, k))
	if err != nil {
		return p, false, fmt.Errorf("order: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		key := it.Key()
		switch at := binary.BigEndian.Uint64(key[len(key)-8:]); {
		case at < seq:
			p.Ahead++
		case at > seq:
			p.Behind++
		default:
			q, _ := queuedFrom(it.Value())
			p.Waiting, p.Since = true, time.Unix(0, q.at)
		}
	}
	if err := it.Close(); err != nil {
		return p, false, fmt.Errorf("order: %w", err)
	}
	return p, p.Head || p.Waiting, nil
}

// BlockedKey is a key whose head keeps failing.
type BlockedKey struct {
	Key     OrderKey
	HeadID  string    // the head's event id
	HeadSeq uint64    // the head's sequence (a replay's own)
	Failing time.Time // when the head's first attempt failed
	Waiting int       // events queued behind the head
}

// OldestBlocked lists up to n of route's destination's blocked keys, the
// longest failing first. It reads every head entry of the destination, as
// Blocked does, and the queues of the n it keeps.
func (s *Store) OldestBlocked(route, dest string, n int) ([]BlockedKey, error) {
	if s.idx == nil || n <= 0 {
		return nil, nil
	}
	var out []BlockedKey
	p := orderPrefix('o', route, dest)
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		h, ok := headFrom(it.Value())
		if !ok || h.failing == 0 || len(out) == n && h.failing >= out[n-1].Failing.UnixNano() {
			continue
		}
		b := BlockedKey{Key: OrderKey(it.Key()[len(p):]), HeadID: h.id, HeadSeq: h.seq, Failing: time.Unix(0, h.failing)}
		i, _ := slices.BinarySearchFunc(out, b, func(a, b BlockedKey) int { return a.Failing.Compare(b.Failing) })
		out = slices.Insert(out, i, b)
		if len(out) > n {
			out = out[:n]
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	for i := range out {
		it, err := s.idx.db.NewIter(queueOf(route, dest, out[i].Key))
		if err != nil {
			return nil, fmt.Errorf("order: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			out[i].Waiting++
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("order: %w", err)
		}
	}
	return out, nil
}

// OldHead is a key's head that has held its key for a while.
type OldHead struct {
	Key   OrderKey
	Seq   uint64
	ID    string
	Since time.Time // when it became head
}

// ReleaseHeadless lets go of route's destination's placeholder heads
// (Admit and TakeOver, for the events another owner or a lost index held)
// set before before: the first event queued behind each comes back as a
// due record. A key that a
// parked record names keeps its placeholder: its head waits parked for
// its next attempt, and goes first when it comes back. It returns how many
// it let go. It reads every head of the destination, and its parked
// records only when a placeholder is old enough to go.
func (s *Store) ReleaseHeadless(ctx context.Context, route, dest string, before, now time.Time) (int, error) {
	if s.idx == nil {
		return 0, nil
	}
	p := orderPrefix('o', route, dest)
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return 0, fmt.Errorf("order: %w", err)
	}
	var keys []OrderKey
	for it.First(); it.Valid(); it.Next() {
		if h, ok := headFrom(it.Value()); ok && h.seq == 0 && h.since < before.UnixNano() {
			keys = append(keys, OrderKey(it.Key()[len(p):]))
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("order: %w", err)
	}
	if len(keys) == 0 {
		return 0, nil // the usual case: no index was lost
	}
	parked, err := s.parkedKeys(ctx, route, dest)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if parked[k] {
			continue
		}
		if err := s.SettleHead(ctx, route, dest, k, 0, now); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// TakeOver makes this index the one that knows route's destination's
// ordering, when this jethook takes the destination (Ownership.Taken):
// the heads and queues it held before are dropped, and each event that a
// waiting record says is queued behind its key, or that a due record the
// consumer has not settled yet brings back (a queued event released, a
// parked head come due), and that the attempt log does not show settled,
// is queued again, by sequence, behind a placeholder head
// (ReleaseHeadless lets it go). A key that a parked
// record names gets a placeholder too: its head waits parked, and goes
// first when it comes back. So the keys' heads and their other events,
// which come back in any order, all take their places first. The
// forwarder takes over before its first fetch. It returns how many
// events it queued; their waiting records stay, and are renewed by this
// jethook when they come due.
func (s *Store) TakeOver(ctx context.Context, route, dest string, now time.Time) (int, error) {
	if !s.Waits() || s.idx == nil {
		return 0, nil
	}
	type rec struct {
		key OrderKey
		seq uint64
		q   queued
	}
	// The attempt log says which events are settled: it must hold what
	// the owner before logged.
	if err := s.syncAttempts(ctx, s.opts.PublishTimeout); err != nil {
		return 0, err
	}
	info, err := s.consumerInfo(ctx, route, dest)
	if err != nil {
		return 0, err
	}
	var from uint64 = 1 // the due records the consumer has not settled yet
	if info != nil {
		from = info.AckFloor.Stream + 1
	}
	var recs []rec
	var lost error
	headed := map[OrderKey]bool{}
	queue := func(m jetstream.Msg) {
		p, err := parkedFrom(m.Headers())
		if err != nil || !p.Ordered || lost != nil {
			return
		}
		if !p.Waiting && strings.HasPrefix(m.Subject(), "parked.") {
			headed[p.Key] = true // a head in backoff: it goes first when it comes back
			return
		}
		id := m.Headers().Get(hdrEventID)
		settled, err := s.settledAt(route, dest, Claim{EventID: id, FirstSeen: p.FirstSeen}, false)
		if err != nil {
			lost = err
			return
		}
		if !settled {
			headed[p.Key] = true
			recs = append(recs, rec{p.Key, p.Seq, queued{attempts: p.Attempts, first: p.FirstSeen.UnixNano(), at: now.UnixNano(), id: id}})
		}
	}
	for _, src := range []recordSource{
		{s.parked, jetstream.OrderedConsumerConfig{HeadersOnly: true,
			FilterSubjects: []string{"parked." + route + "." + dest + ".*", "parked." + route + "." + dest + ".*." + waitingToken}}},
		{s.main, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{"due." + route + "." + dest + ".*"},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from}},
	} {
		if err := src.each(ctx, queue); err != nil {
			return 0, fmt.Errorf("%w: waiting, parked and due records: %w", ErrUnavailable, err)
		}
		if lost != nil {
			return 0, lost
		}
	}
	if err := s.dropOrder(route, dest); err != nil {
		return 0, err
	}
	b := s.idx.db.NewBatch()
	defer b.Close()
	for k := range headed {
		if err := s.placeholder(b, route, dest, k, now); err != nil {
			return 0, err
		}
	}
	for _, r := range recs {
		_ = b.Set(queueKey(route, dest, r.key, r.seq), r.q.value(), nil)
	}
	_ = b.Delete(pendingKey(route, dest), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("order: %w", err)
	}
	return len(recs), nil
}

// placeholder sets, in b, a placeholder head for key k at route's
// destination if it has no head, and writes a fresh head to b: the events
// Adopt queues go behind it.
func (s *Store) placeholder(b *pebble.Batch, route, dest string, k OrderKey, now time.Time) error {
	st := s.stripeOf(k)
	st.Lock()
	defer st.Unlock()
	h, fresh, ok, err := s.headOf(route, dest, k)
	switch {
	case err != nil:
		return err
	case !ok:
		h = head{seq: 0, since: now.UnixNano()}
	case !fresh:
		return nil
	}
	st.written(k)
	st.remember(route, dest, k, h, false)
	return b.Set(headKey(route, dest, k), h.value(), nil)
}

// parkedKeys returns the ordering keys route's destination's parked
// records name (not its waiting records).
func (s *Store) parkedKeys(ctx context.Context, route, dest string) (map[OrderKey]bool, error) {
	keys := map[OrderKey]bool{}
	src := recordSource{s.parked, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{"parked." + route + "." + dest + ".*"}}}
	err := src.each(ctx, func(m jetstream.Msg) {
		if b, err := hex.DecodeString(m.Headers().Get(hdrKey)); err == nil && len(b) == len(OrderKey{}) {
			keys[OrderKey(b)] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: parked records: %w", ErrUnavailable, err)
	}
	return keys, nil
}

// OldHeads lists up to n of route's destination's heads that became head
// before before, in the order of their keys from from on. next is the key
// to go on from; it is zero when the list reached the last key.
func (s *Store) OldHeads(route, dest string, from OrderKey, before time.Time, n int) (heads []OldHead, next OrderKey, err error) {
	if s.idx == nil {
		return nil, next, nil
	}
	p := orderPrefix('o', route, dest)
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: append(slices.Clone(p), from[:]...), UpperBound: append(slices.Clone(p[:len(p)-1]), 1)})
	if err != nil {
		return nil, next, fmt.Errorf("order: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := OrderKey(it.Key()[len(p):])
		if len(heads) == n {
			next = k
			break
		}
		if h, ok := headFrom(it.Value()); ok && h.seq != 0 && h.since < before.UnixNano() { // not a placeholder (ReleaseHeadless)
			heads = append(heads, OldHead{Key: k, Seq: h.seq, ID: h.id, Since: time.Unix(0, h.since)})
		}
	}
	if err := it.Close(); err != nil {
		return nil, OrderKey{}, fmt.Errorf("order: %w", err)
	}
	return heads, next, nil
}

// Gone reports whether the message at seq in WEBHOOKS (a webhook or a
// replay) is no longer there: deleted, or purged with what came before
// it. JetStream never delivers such a message again.
func (s *Store) Gone(ctx context.Context, seq uint64) (bool, error) {
	_, err := s.main.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: message %d: %w", ErrUnavailable, seq, err)
	}
	return false, nil
}

// Uncarried returns those of route's destination's heads that nothing
// brings to an attempt any more: a head whose message is acked in the
// destination's consumer (at or below its ack floor) and that neither a
// parked record nor a due record the consumer may not have acked yet
// names. Such a head lost its parked record (expired with the parked
// stream's max age, or purged by hand) and would hold its key for good.
// It reads the ack floor first, then the parked records, then the due
// records above the floor: a record the mover moves meanwhile is seen in
// one or the other. It reads every parked record of the destination.
func (s *Store) Uncarried(ctx context.Context, route, dest string, heads []OldHead) ([]OldHead, error) {
	info, err := s.consumerInfo(ctx, route, dest)
	if err != nil || info == nil {
		return nil, err
	}
	floor := info.AckFloor.Stream
	left := map[uint64]bool{}
	for _, h := range heads {
		if h.Seq <= floor {
			left[h.Seq] = true
		}
	}
	if len(left) == 0 {
		return nil, nil
	}
	parked, err := s.js.Stream(ctx, ParkedStreamName)
	if err != nil {
		return nil, fmt.Errorf("%w: parked records: %w", ErrUnavailable, err)
	}
	for _, src := range []recordSource{
		{parked, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{"parked." + route + "." + dest + ".*"}}},
		{s.main, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{DueSubject(route, dest)},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: floor + 1}},
	} {
		err := src.each(ctx, func(m jetstream.Msg) {
			if m.Headers().Get(hdrWaiting) != "" {
				return // a waiting record does not bring a head back
			}
			if seq, err := strconv.ParseUint(m.Headers().Get(hdrSeq), 10, 64); err == nil {
				delete(left, seq)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("%w: parked records: %w", ErrUnavailable, err)
		}
	}
	var out []OldHead
	for _, h := range heads {
		if left[h.Seq] {
			out = append(out, h)
		}
	}
	return out, nil
}

// Recarry brings route's destination's head h back to an attempt now, as
// its lost parked record would have: a due record with the attempts
// logged for it and the time its message was stored. A head that has
// moved on when the record comes back lets it go (Admit); one in an
// attempt has it wait for that attempt (the forwarder's hold on a key).
func (s *Store) Recarry(ctx context.Context, route, dest string, h OldHead, now time.Time) error {
	m, err := s.main.GetMsg(ctx, h.Seq)
	if err != nil {
		return fmt.Errorf("%w: message %d: %w", ErrUnavailable, h.Seq, err)
	}
	last, _, err := s.LastAttempt(route, dest, h.ID, m.Time)
	if err != nil {
		return err
	}
	return s.publishDue(ctx, route, dest, Parked{Seq: h.Seq, Attempts: last.Attempt, FirstSeen: m.Time, Due: now, Key: h.Key, Ordered: true}, h.ID)
}

// Waiting records: an event queued behind its key's head has its message
// acked, and only the index's queue entry carries it on. With
// Options.WaitingEvery set, it also leaves a waiting record in
// WEBHOOKS_PARKED (on its slot's subject plus ".w"): a parked record that
// comes back as a due record, which Admit renews (Renew) while the event
// is queued and drops once it has moved on. If the index is lost (an
// external server's jethook on a disk that did not outlive it, or an
// index deleted by hand), the records bring the queued events back to
// their keys, where the index made since takes them as new events
// (admitDue). A record is due at least WaitingEvery and at most an hour
// after the one it renews, and no sooner than the event has waited so far:
// an event that waits long costs a record per hour. Counted from the due
// time of the record it renews, not from when that was read, the records
// of a key's queue keep the order of its events.

// Waits reports whether queued events leave waiting records.
func (s *Store) Waits() bool { return s.opts.WaitingEvery > 0 }

// stamp names this instance on p, an ordered record it writes, unless p
// names one already (a record renewed keeps its writer).
func (s *Store) stamp(p *Parked) {
	if p.Ordered && p.By == "" && s.inst != nil {
		p.By = s.inst.self
	}
}

// WaitingEvery is the least time between two waiting records of an event.
func (s *Store) WaitingEvery() time.Duration { return max(s.opts.WaitingEvery, 0) }

// Wait parks a waiting record for each of route's destination's claims,
// queued behind their key's head (since c.QueuedAt, and renewing the
// record due at c.WaitDue; now when they are zero), and waits for the
// stream's acks: only then may the caller ack
// their messages. It does nothing unless Waits.
func (s *Store) Wait(ctx context.Context, route, dest string, claims []Claim, now time.Time) error {
	if !s.Waits() || len(claims) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	futs := make([]jetstream.PubAckFuture, 0, len(claims))
	for _, c := range claims {
		at, from := c.QueuedAt, c.WaitDue
		if at.IsZero() {
			at = now
		}
		if from.IsZero() {
			from = now
		}
		due := from.Add(max(s.opts.WaitingEvery, min(from.Sub(at), time.Hour)))
		if due.Before(now) { // jethook was away for longer
			due = now.Add(s.opts.WaitingEvery)
		}
		p := Parked{Seq: c.Seq, Attempts: c.Attempts, FirstSeen: c.FirstSeen, Due: due,
			Key: c.Key, Ordered: true, Waiting: true, QueuedAt: at}
		s.stamp(&p)
		m := &nats.Msg{Subject: waitingSubject(route, dest, p.Due), Header: p.header(c.EventID)}
		f, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(fmt.Sprintf("wait/%s/%d/%d", dest, c.Seq, p.Due.UnixMilli())),
			jetstream.WithExpectStream(ParkedStreamName), jetstream.WithStallWait(s.opts.PublishTimeout))
		if err != nil {
			return fmt.Errorf("%w: waiting record: %w", ErrUnavailable, err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("%w: waiting record: %w", ErrUnavailable, err)
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting record: %w", ErrUnavailable, ctx.Err())
		}
	}
	return nil
}

// publishDue publishes p as a due record of route's destination, for
// event eventID: the destination attempts it at once.
func (s *Store) publishDue(ctx context.Context, route, dest string, p Parked, eventID string) error {
	s.stamp(&p)
	m := &nats.Msg{Subject: DueSubject(route, dest), Header: p.header(eventID)}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(StreamName))
	if err != nil {
		return fmt.Errorf("%w: release: %w", ErrUnavailable, err)
	}
	s.indexSeq(ack.Sequence)
	return nil
}

// orderRefs lowers refs[route] to the sequence of every event queued
// behind a key's head: their messages are acked, and the purge near the
// store's limit must keep them.
func (s *Store) orderRefs(refs map[string]uint64) error {
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'q'}, UpperBound: []byte{'q' + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		end := slices.Index(k[1:], 0)
		if end < 0 || len(k) < 8 {
			continue
		}
		route := string(k[1 : 1+end])
		seq := binary.BigEndian.Uint64(k[len(k)-8:])
		if at, ok := refs[route]; !ok || seq < at {
			refs[route] = seq
		}
	}
	return it.Close()
}

// DueClaim is the claim of a due record of an ordered destination; ok is
// false for one parked without ordering.
func DueClaim(m jetstream.Msg) (Claim, bool) {
	p, err := parkedFrom(m.Headers())
	if err != nil || !p.Ordered {
		return Claim{}, false
	}
	return Claim{Key: p.Key, Seq: p.Seq, EventID: m.Headers().Get(hdrEventID), Attempts: p.Attempts,
		FirstSeen: p.FirstSeen, Due: true, Waiting: p.Waiting, QueuedAt: p.QueuedAt, WaitDue: p.Due, By: p.By}, true
}

// Unorder lets go of route's destination's ordering when it no longer has
// `order:` (a reload took it away): every event queued behind a key's head
// comes back as a due record at once, unordered, and the heads and queues
// are dropped. It returns how many events it released. A crash midway
// releases the rest at the next start (those already released may be
// delivered twice).
func (s *Store) Unorder(ctx context.Context, route, dest string) (int, error) {
	if s.idx == nil {
		return 0, nil
	}
	q := orderPrefix('q', route, dest)
	qEnd := append(slices.Clone(q[:len(q)-1]), 1)
	it, err := s.idx.db.NewIter(&pebble.IterOptions{LowerBound: q, UpperBound: qEnd})
	if err != nil {
		return 0, fmt.Errorf("order: %w", err)
	}
	n := 0
	now := time.Now()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		q, ok := queuedFrom(it.Value())
		if !ok || len(k) < 8 {
			continue
		}
		p := Parked{Seq: binary.BigEndian.Uint64(k[len(k)-8:]), Attempts: q.attempts, FirstSeen: time.Unix(0, q.first), Due: now}
		if err := s.publishDue(ctx, route, dest, p, q.id); err != nil {
			it.Close()
			return n, err
		}
		n++
	}
	if err := it.Close(); err != nil {
		return n, fmt.Errorf("order: %w", err)
	}
	return n, s.dropOrder(route, dest)
}

// dropOrder forgets route's destination's heads and queues: the entries
// on disk, and the fresh heads. The heads' counts stay (onDisk counts too
// many, never too few).
func (s *Store) dropOrder(route, dest string) error {
	o, q := orderPrefix('o', route, dest), orderPrefix('q', route, dest)
	b := s.idx.db.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(q, append(slices.Clone(q[:len(q)-1]), 1), nil)
	_ = b.DeleteRange(o, append(slices.Clone(o[:len(o)-1]), 1), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	for i := range s.order.stripes {
		st := &s.order.stripes[i]
		st.Lock()
		for fk := range st.fresh {
			if fk.route == route && fk.dest == dest {
				delete(st.fresh, fk)
			}
		}
		st.Unlock()
	}
	return nil
}
