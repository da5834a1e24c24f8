package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Dedup: a webhook whose event id (or signed key) its route stored within
// Options.DedupWindow is a duplicate, acknowledged and not stored again.
// Three layers answer, cheapest first:
//   - seen, in memory: a Bloom filter per index generation turns away
//     almost every new id in a few hundred nanoseconds;
//   - the index (eventSeq): an exact lookup of what the filter could not
//     turn away;
//   - the stream itself (Nats-Msg-Id within raceWindow): two copies
//     stored at the same moment, before the index has read the first.

// Has reports whether route's event eventID was stored within the dedup
// window, that is whether Publish would call it a duplicate. It reads the
// index, waiting up to a second for it to take in what was stored a
// moment ago (by this process or, on a cluster, another replica).
func (s *Store) Has(ctx context.Context, route, eventID string) (bool, error) {
	since := time.Now().Add(-s.opts.DedupWindow)
	_, ok, err := s.idx.eventSeq(route, eventID, since)
	if ok || err != nil {
		return ok, err
	}
	if synced, err := s.tails[0].sync(ctx, time.Second); err != nil || !synced {
		return false, err
	}
	_, ok, err = s.idx.eventSeq(route, eventID, since)
	return ok, err
}

// DedupWindow is how long the store remembers an event id (Options).
func (s *Store) DedupWindow() time.Duration { return s.opts.DedupWindow }

// eventSeq finds route's webhook eventID stored at or after since by exact
// key, newest generation first: the dedup check of every publish. A
// generation whose filter lacks the id is not read.
func (x *index) eventSeq(route, eventID string, since time.Time) (uint64, bool, error) {
	id := eventHash(eventID)
	for _, g := range x.liveGens(since) {
		if !x.seen.mayContain(g, id) {
			continue
		}
		v, closer, err := x.db.Get(key(g, id, kindEvent, route, "", nil))
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("%w: index: %w", ErrUnavailable, err)
		}
		ok := len(v) >= 16 && !time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).Before(since)
		seq := uint64(0)
		if ok {
			seq = binary.BigEndian.Uint64(v)
		}
		closer.Close()
		if ok {
			return seq, true, nil
		}
	}
	return 0, false, nil
}

// seen answers "was this event id ever indexed in generation g?" from
// memory, so that the dedup check of a new webhook, which almost always
// misses, costs a few hundred nanoseconds instead of a disk lookup:
// Pebble reads no Bloom filter of its bottom level on a Get, so a miss
// there reads and decompresses a data block (about 10 µs).
//
// It keeps one Bloom filter per live generation, of a fixed size: memory
// is set by configuration (Options.DedupFilterBytes), whatever the
// traffic. A filter that holds more ids than it was sized for answers
// "maybe" more often, and a maybe is checked on disk: more traffic costs
// lookups, never a missed duplicate. Each filter is cache-line blocked:
// the k bits of an id lie in one 64-byte line, one cache miss per check.
type seen struct {
	lines int // 512-bit lines per generation's filter

	mu   sync.Mutex                        // serialises changes to gens
	gens atomic.Pointer[map[int64]*filter] // copied on change: read on every publish
}

// filter is one generation's Bloom filter. Until complete, it does not
// yet hold every id indexed in its generation (it is being filled from
// the index at start) and every check answers maybe.
type filter struct {
	words    []atomic.Uint64
	complete atomic.Bool
}

// seenProbes is the number of bits set per id: fewer than the optimum
// for 10 bits per id (7), so that a filter that holds several times the
// ids it was sized for still turns most misses away.
const seenProbes = 4

// newSeen sizes each generation's filter at perGen bytes (at least one
// line).
func newSeen(perGen int) *seen {
	s := &seen{lines: max(perGen/64, 1)}
	s.gens.Store(&map[int64]*filter{})
	return s
}

// open makes generation g's filter; complete says whether it starts
// complete (a generation that did not exist before this process).
func (s *seen) open(g int64, complete bool) *filter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := (*s.gens.Load())[g]; f != nil {
		return f
	}
	f := &filter{words: make([]atomic.Uint64, s.lines*8)}
	f.complete.Store(complete)
	s.change(func(m map[int64]*filter) { m[g] = f })
	return f
}

// drop forgets generation g's filter.
func (s *seen) drop(g int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.change(func(m map[int64]*filter) { delete(m, g) })
}

// change applies edit to a copy of gens and publishes the copy; s.mu held.
func (s *seen) change(edit func(map[int64]*filter)) {
	m := maps.Clone(*s.gens.Load())
	edit(m)
	s.gens.Store(&m)
}

// add records id in generation g. It is called before the index entry
// is committed, so a lookup that finds no bit never misses a committed
// entry.
func (s *seen) add(g int64, id [16]byte) {
	f := s.filter(g)
	if f == nil {
		f = s.open(g, false)
	}
	line, probes := s.probe(id)
	for i := range seenProbes {
		bit := probes >> (9 * i) & 511
		f.words[line+int(bit>>6)].Or(1 << (bit & 63))
	}
}

// mayContain reports whether id may have been indexed in generation g:
// false only when g's filter is complete and lacks one of id's bits.
func (s *seen) mayContain(g int64, id [16]byte) bool {
	f := s.filter(g)
	if f == nil || !f.complete.Load() {
		return true
	}
	line, probes := s.probe(id)
	for i := range seenProbes {
		bit := probes >> (9 * i) & 511
		if f.words[line+int(bit>>6)].Load()&(1<<(bit&63)) == 0 {
			return false
		}
	}
	return true
}

func (s *seen) filter(g int64) *filter { return (*s.gens.Load())[g] }

// probe picks id's line (the index of its first word) and the bits in it
// from the two halves of its hash, which is already uniform (SHA-256).
func (s *seen) probe(id [16]byte) (line int, probes uint64) {
	hi, _ := bits.Mul64(binary.LittleEndian.Uint64(id[:8]), uint64(s.lines))
	return int(hi) * 8, binary.LittleEndian.Uint64(id[8:])
}
