package store

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
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
// A mark is a slot of a small file mapped into memory (workSlotsFile in
// the data directory, slots.go): BeginWork writes the webhook's key into a
// free slot and EndWork clears it, stores to memory without a system call.
// A process that dies leaves the mapping's pages with the operating
// system, which is all a crash loop needs (a machine that loses power
// loses the count, and the loop starts counting again). When the index
// opens, each slot still marked is a death: it is added to the webhook's
// count in the index's Pebble database, outside its generations,
//
//	'w' route 0x00 dest 0x00 seq(8); value: count(8) time(8)
//
// and the file is emptied. A mark whose key does not fit a slot, or made
// while every slot is taken, is written to the index itself as its count
// plus one, with fsync: Pebble may hold a write without one in its own
// buffer when the process dies. A count is cleared when its work ends;
// one left by a webhook that never came back (settled by another replica,
// purged) is dropped once it is older than the index keeps anything.
//
// The counts are also kept in memory (work), read once when the index
// opens: BeginWork reads nothing from the index, where a read cost as much
// as the work it guards (a transform's run), and writes nothing to it,
// where a write and the compaction of its deletion cost a few µs more.

// work is what the marks count, by key.
type work struct {
	mu     sync.Mutex
	counts map[string]*workCount
	slots  *slots // nil: every mark is written to the index
}

// workCount is the deaths during one key's work, and the marks of its work
// in progress.
type workCount struct {
	n      uint64  // deaths found at open, plus marks made since
	stored bool    // the index holds a record of the key
	marks  []int32 // the slots marking its work in progress
}

// loadWork reads the counts in the index into x.work, adds the marks a
// process that died left in the slots of dir, then empties the slots.
func (x *index) loadWork(dir string, log *slog.Logger) error {
	w := &x.work
	w.counts = make(map[string]*workCount)
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'w'}, UpperBound: []byte{'w' + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 16 {
			w.counts[string(it.Key())] = &workCount{n: binary.BigEndian.Uint64(v), stored: true}
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	path := filepath.Join(dir, workSlotsFile)
	left, err := leftMarks(path)
	if err != nil {
		log.Warn("the work marks left by the last process cannot be read: deaths during its work are not counted", "err", err)
	}
	if len(left) > 0 {
		// Counted before the slots are emptied: a process that dies in
		// between counts these deaths twice, never none.
		b := x.db.NewBatch()
		defer b.Close()
		now := time.Now()
		for _, k := range left {
			c := w.counts[k]
			if c == nil {
				c = &workCount{}
				w.counts[k] = c
			}
			c.n++
			c.stored = true
		}
		// Written once all are counted: a key may be left in more than
		// one slot.
		for _, k := range left {
			_ = b.Set([]byte(k), workRecord(w.counts[k].n, now), nil)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return err
		}
	}
	if w.slots, err = mapSlots(path); err != nil {
		// The guard goes on through the index, as where no file can be
		// mapped (slots_other.go).
		log.Warn("work marks go to the index: the file of slots cannot be mapped", "err", err)
	}
	return nil
}

// closeWork unmaps the slots. A mark after it goes to the index; a mark
// in a slot that is still there counts as a death at the next open, as
// any work that had not ended by the close.
func (x *index) closeWork() {
	x.work.mu.Lock()
	defer x.work.mu.Unlock()
	if x.work.slots != nil {
		x.work.slots.close()
		x.work.slots = nil
	}
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

// workRecord is the value of a work record: count(8) time(8).
func workRecord(n uint64, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), n), uint64(t.UnixNano()))
}

// BeginWork marks that work on webhook seq (its stream sequence) for
// route's destination begins, and returns how many times such work began
// before and never ended: the number of times the process died during it.
func (s *Store) BeginWork(route, destination string, seq uint64, now time.Time) (int, error) {
	k := workKey(route, destination, seq)
	w := &s.idx.work
	w.mu.Lock()
	c := w.counts[string(k)]
	if c == nil {
		c = &workCount{}
		w.counts[string(k)] = c
	}
	n := c.n
	c.n++
	if i, ok := w.slots.mark(k); ok {
		c.marks = append(c.marks, i)
		w.mu.Unlock()
		return int(n), nil
	}
	w.mu.Unlock()
	// Synced: without it, the write may wait in Pebble's buffer when
	// the process dies.
	err := s.idx.db.Set(k, workRecord(n+1, now), pebble.Sync)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		c.n--
		if c.n == 0 && !c.stored && len(c.marks) == 0 && w.counts[string(k)] == c {
			delete(w.counts, string(k))
		}
		return 0, fmt.Errorf("work record: %w", err)
	}
	c.stored = true
	return int(n), nil
}

// EndWork clears the marks of BeginWork: the work ended. A count that
// cannot be cleared in the index counts one more death if the webhook
// comes back, which is logged.
func (s *Store) EndWork(route, destination string, seq uint64) {
	k := workKey(route, destination, seq)
	w := &s.idx.work
	w.mu.Lock()
	c := w.counts[string(k)]
	delete(w.counts, string(k))
	if c != nil {
		for _, i := range c.marks {
			w.slots.clear(i)
		}
	}
	w.mu.Unlock()
	if c == nil || !c.stored {
		return
	}
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
		if c := x.work.counts[k]; c != nil && len(c.marks) > 0 {
			c.stored = false // its work is under way: its marks stay
			continue
		}
		delete(x.work.counts, k)
	}
	x.work.mu.Unlock()
	return nil
}
