package store

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	n := uint64(0)
	v, closer, err := s.idx.db.Get(k)
	switch {
	case err == nil:
		if len(v) == 16 {
			n = binary.BigEndian.Uint64(v)
		}
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, fmt.Errorf("work record: %w", err)
	}
	v = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n+1), uint64(now.UnixNano()))
	if err := s.idx.db.Set(k, v, pebble.NoSync); err != nil {
		return 0, fmt.Errorf("work record: %w", err)
	}
	return int(n), nil
}

// EndWork clears the mark of BeginWork: the work ended. A mark that cannot be cleared counts one more death if the
// webhook comes back, which is logged.
func (s *Store) EndWork(route, destination string, seq uint64) {
	if err := s.idx.db.Delete(workKey(route, destination, seq), pebble.NoSync); err != nil {
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
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) != 16 || int64(binary.BigEndian.Uint64(v[8:])) < cut.UnixNano() {
			_ = b.Delete(it.Key(), nil)
		}
	}
	if err := it.Close(); err != nil {
		b.Close()
		return err
	}
	return b.Commit(pebble.NoSync)
}
