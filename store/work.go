package store

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Work records keep count of what a process was doing to a webhook when
// it died. The forwarder marks the work it does on a webhook's body
// before a request (a destination's filter) with BeginWork and clears the
// mark with EndWork; a mark still there when the webhook comes back is a
// process that died during that work: a Go crash, the OOM killer, a kill
// -9. A kill during an HTTP attempt leaves no mark.
//
// The marks live in the index's Pebble database, outside its generations:
//
//	'w' route 0x00 dest 0x00 seq(8); value: count(8) time(8)
//
// They are written without fsync: a process that dies leaves its writes
// with the operating system, which is all a crash loop needs (a machine
// that loses power loses the count, and the loop starts counting again).
// A mark is cleared when its work ends; one left by a webhook that never
// came back (settled by another replica, purged) is dropped once it is
// older than the index keeps anything.
//
// The counts are also kept in memory (work), read from the index once when
// it opens: BeginWork writes its mark and reads nothing, where a read of
// the index cost as much as the work it guards (a transform's run).

// work is the count of each mark in the index, by key.
type work struct {
	mu     sync.Mutex
	counts map[string]uint64
}

// loadWork reads the marks in the index into x.work.
func (x *index) loadWork() error {
	x.work.counts = make(map[string]uint64)
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'w'}, UpperBound: []byte{'w' + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 16 {
			x.work.counts[string(it.Key())] = binary.BigEndian.Uint64(v)
		}
	}
	return it.Close()
}

// workKey is the key of the work record of webhook seq for one destination.
func workKey(route, destination string, seq uint64) []byte {
	k := make([]byte, 0, 1+len(route)+1+len(destination)+1+8)
	k = append(k, 'w')
	k = append(k, route...)
	k = append(k, 0)
	k = append(k, destination...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// BeginWork marks that work on webhook seq (its stream sequence) for
// route's destination begins, and returns how many times such work began
// before and never ended: the number of times the process died during it.
func (s *Store) BeginWork(route, destination string, seq uint64, now time.Time) (int, error) {
	k := workKey(route, destination, seq)
	w := &s.idx.work
	w.mu.Lock()
	n := w.counts[string(k)]
	w.counts[string(k)] = n + 1
	w.mu.Unlock()
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n+1), uint64(now.UnixNano()))
	if err := s.idx.db.Set(k, v, pebble.NoSync); err != nil {
		w.mu.Lock()
		w.counts[string(k)] = n
		if n == 0 {
			delete(w.counts, string(k))
		}
		w.mu.Unlock()
		return 0, fmt.Errorf("work record: %w", err)
	}
	return int(n), nil
}

// EndWork clears the mark of BeginWork: the work ended. A mark that cannot be cleared counts one more death if the
// webhook comes back, which is logged.
func (s *Store) EndWork(route, destination string, seq uint64) {
	k := workKey(route, destination, seq)
	w := &s.idx.work
	w.mu.Lock()
	delete(w.counts, string(k))
	w.mu.Unlock()
	if err := s.idx.db.Delete(k, pebble.NoSync); err != nil {
		s.opts.Logger.Warn("work record not cleared", "route", route, "destination", destination, "seq", seq, "err", err)
	}
}

// expireWork drops the work records last begun before cut.
func (x *index) expireWork(cut time.Time) error {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'w'}, UpperBound: []byte{'w' + 1}})
	if err != nil {
		return err
	}
	b := x.db.NewBatch()
	var gone []string
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) != 16 || int64(binary.BigEndian.Uint64(v[8:])) < cut.UnixNano() {
			_ = b.Delete(it.Key(), nil)
			gone = append(gone, string(it.Key()))
		}
	}
	if err := it.Close(); err != nil {
		b.Close()
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	x.work.mu.Lock()
	for _, k := range gone {
		delete(x.work.counts, k)
	}
	x.work.mu.Unlock()
	return nil
}
