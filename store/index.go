package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// The index finds what the streams hold about an event id: the webhook's
// stream sequence (for lookup and dedup), its dead letters, replays and
// attempt records. JetStream keeps every distinct subject in memory, so
// the streams use a few subjects per route and destination, and this
// on-disk index (a Pebble LSM tree in <data dir>/index) takes the place of
// the per-event subjects: its memory is its cache and memtables, fixed by
// configuration, whatever it holds.
//
// It is a projection of the streams, never the only copy of anything:
// each stream's tailer (an ordered consumer, tail.go) copies it in, except
// the embedded store's WEBHOOKS, which only this process writes and which
// its writer indexes as it stores (tail.go reads it only to catch up at
// start). So it is rebuilt from the streams when it is missing, and every
// replica of a cluster keeps its own.
//
// Keys are grouped in generations of a fixed width of time (when the
// message they index was stored), so expiring what the streams no longer
// hold is one range deletion per generation:
//
//	'g' gen(8) id(16) kind(1) route 0x00 dest 0x00 extra
//
// gen is the generation's start in Unix seconds, id the first 16 bytes of
// the SHA-256 of the event id, kind one of the kind* bytes. A marker key
// 'l' gen(8) lists the generations; 'm' stream holds the last sequence of
// each stream indexed, and 'b' when the index was made. 'v' gen(8) keys
// hold the value filters of blocks of WEBHOOKS (values.go). Work records
// ('w', work.go) and the ordering's heads and queues ('o', 'q', order.go)
// are the things kept here that no stream holds.
type index struct {
	db    *pebble.DB
	born  time.Time // when this index was made: it knows nothing written before
	width int64     // generation width in seconds
	keep  time.Duration

	mu   sync.Mutex
	gens []int64 // live generations, oldest first

	seen    *seen         // the event ids of each generation, in memory
	filters filterCache   // value filters kept in memory (values.go)
	work    work          // the work records' counts (work.go)
	stop    chan struct{} // closed by close: ends fillSeen
	filled  chan struct{} // closed when fillSeen has ended
}

// Kinds of index entries.
const (
	kindEvent      = 'e' // value: seq(8) time(8)
	kindDeadLetter = 'd' // value: dlq seq(8) time(8) original seq(8)
	kindReplay     = 'r' // value: seq(8) time(8) dead letter seq(8)
	kindAttempt    = 'a' // extra: time(8) attempt stream seq(8); value: the record's JSON
	kindSeq        = 0   // no entry: a sequence for the value filters (indexSeq)
)

// indexCache bounds the index's block cache; with its two 4 MiB memtables
// this is what the index can hold in memory.
const indexCache = 8 << 20

// openIndex opens (or creates) the index in dir. keep is how long its
// entries are needed: the longest of the retention, the dedup window and
// the attempt log's age. filterBytes bounds the memory of its filters of
// event ids (dedup.go).
func openIndex(dir string, keep time.Duration, filterBytes int, log *slog.Logger) (*index, error) {
	cache := pebble.NewCache(indexCache)
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:        cache,
		MemTableSize: 4 << 20,
		Logger:       pebbleLogger{log},
		// Keys follow the event's hash, so each table flushed from a
		// memtable overlaps all of the level below, and each compaction
		// of level 0 rewrites it: letting eight tables (not Pebble's
		// four) gather in level 0 first halves those rewrites, which
		// were about half of the index's CPU per delivery. Lookups may
		// read more tables; their Bloom filters answer most of them.
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 24,
	}
	// Most lookups miss (every new webhook's dedup check): a Bloom filter
	// per table answers those without reading the table.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(filepath.Join(dir, "index"), opts)
	if err != nil {
		return nil, fmt.Errorf("index in %s: %w", dir, err)
	}
	x := &index{db: db, keep: keep, width: max(int64(keep/time.Second)/4, 60), stop: make(chan struct{}), filled: make(chan struct{})}
	// At most keep/width+2 generations are live at once (expire runs
	// once a minute): the filters share filterBytes between them.
	x.seen = newSeen(filterBytes / int(int64(keep/time.Second)/x.width+2))
	if err := x.loadGens(); err != nil {
		db.Close()
		return nil, err
	}
	if err := x.loadWork(dir, log); err != nil {
		db.Close()
		return nil, fmt.Errorf("index in %s: work records: %w", dir, err)
	}
	if x.born, err = x.birth(); err != nil {
		x.closeWork()
		db.Close()
		return nil, err
	}
	go x.fillSeen(log)
	return x, nil
}

func (x *index) close() error {
	close(x.stop)
	<-x.filled
	x.closeWork()
	return x.db.Close()
}

// fillSeen fills the filters of the generations found at start from the
// index, one generation at a time, and marks each complete; until then,
// dedup checks in that generation look on disk.
func (x *index) fillSeen(log *slog.Logger) {
	defer close(x.filled)
	x.mu.Lock()
	gens := slices.Clone(x.gens)
	x.mu.Unlock()
	start := time.Now()
	ids := 0
	for _, g := range gens {
		f := x.seen.open(g, false)
		n, err := x.fillGen(g)
		if err != nil {
			if !errors.Is(err, errStopped) {
				log.Warn("index: dedup filter not filled; dedup checks read the disk", "err", err)
			}
			return
		}
		ids += n
		f.complete.Store(true)
		if !x.live(g) {
			x.seen.drop(g) // expired while it was filled: open made it again
		}
	}
	log.Debug("index: dedup filters filled", "ids", ids, "took", time.Since(start))
}

var errStopped = errors.New("stopped")

// fillGen adds the event ids of generation g to its filter.
func (x *index) fillGen(g int64) (int, error) {
	it, err := x.db.NewIter(&pebble.IterOptions{
		LowerBound: binary.BigEndian.AppendUint64([]byte{'g'}, uint64(g)),
		UpperBound: binary.BigEndian.AppendUint64([]byte{'g'}, uint64(g+1)),
	})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n, keys := 0, 0
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) > 25 && k[25] == kindEvent {
			x.seen.add(g, [16]byte(k[9:25]))
			n++
		}
		if keys++; keys%4096 == 0 {
			select {
			case <-x.stop:
				return n, errStopped
			default:
			}
		}
	}
	return n, it.Error()
}

// birth returns when the index was made, from its 'b' key, which a new
// index gets now. An index made before the key existed gets it at its
// next start: it then knows nothing written before that start, which the
// ordering's waiting records (order.go) only take for a reason to look
// at the attempt log.
func (x *index) birth() (time.Time, error) {
	v, closer, err := x.db.Get([]byte{'b'})
	if err == nil {
		defer closer.Close()
		if len(v) == 8 {
			return time.Unix(0, int64(binary.BigEndian.Uint64(v))), nil
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return time.Time{}, fmt.Errorf("index: %w", err)
	}
	now := time.Now()
	if err := x.db.Set([]byte{'b'}, binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano())), pebble.Sync); err != nil {
		return time.Time{}, fmt.Errorf("index: %w", err)
	}
	return now, nil
}

func (x *index) loadGens() error {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) == 9 {
			x.gens = append(x.gens, int64(binary.BigEndian.Uint64(k[1:])))
		}
	}
	return it.Error()
}

// gen returns the generation of stream time t, adding it to b's marker
// keys if it is new.
func (x *index) gen(b *pebble.Batch, t time.Time) int64 {
	g := t.Unix() - t.Unix()%x.width
	x.mu.Lock()
	defer x.mu.Unlock()
	i, found := slices.BinarySearch(x.gens, g)
	if !found {
		x.seen.open(g, true) // new: everything in it passes putEvent
		x.gens = slices.Insert(x.gens, i, g)
		_ = b.Set(binary.BigEndian.AppendUint64([]byte{'l'}, uint64(g)), nil, nil)
	}
	return g
}

// rewriteMarkers writes the marker key of every live generation again,
// after a batch that failed to commit: gen counts a generation as known
// once it has put its marker in a batch, and later batches carry none,
// so without this a generation could hold entries the next start does
// not load (and whose ids its dedup filter would lack).
func (x *index) rewriteMarkers(log *slog.Logger) {
	x.mu.Lock()
	gens := slices.Clone(x.gens)
	x.mu.Unlock()
	b := x.db.NewBatch()
	for _, g := range gens {
		_ = b.Set(binary.BigEndian.AppendUint64([]byte{'l'}, uint64(g)), nil, nil)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		log.Warn("index: generation markers not written; the next start reindexes from the streams' margin", "err", err)
	}
}

// live reports whether generation g has not expired.
func (x *index) live(g int64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, found := slices.BinarySearch(x.gens, g)
	return found
}

// liveGens returns the generations that may hold entries written at or
// after since, newest first.
func (x *index) liveGens(since time.Time) []int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []int64
	for i := len(x.gens) - 1; i >= 0; i-- {
		if x.gens[i]+x.width <= since.Unix() {
			break
		}
		out = append(out, x.gens[i])
	}
	return out
}

// eventHash is the index's id of an event id.
func eventHash(eventID string) [16]byte {
	sum := sha256.Sum256([]byte(eventID))
	return [16]byte(sum[:16])
}

// key builds a data key; extra may be nil.
func key(gen int64, id [16]byte, kind byte, route, dest string, extra []byte) []byte {
	k := make([]byte, 0, 1+8+16+1+len(route)+1+len(dest)+1+len(extra))
	k = append(k, 'g')
	k = binary.BigEndian.AppendUint64(k, uint64(gen))
	k = append(k, id[:]...)
	k = append(k, kind)
	k = append(k, route...)
	k = append(k, 0)
	k = append(k, dest...)
	k = append(k, 0)
	return append(k, extra...)
}

// prefix is the key prefix of every entry of one kind about one event in
// generation gen.
func prefix(gen int64, id [16]byte, kind byte) []byte {
	k := make([]byte, 0, 26)
	k = append(k, 'g')
	k = binary.BigEndian.AppendUint64(k, uint64(gen))
	k = append(k, id[:]...)
	return append(k, kind)
}

// entry is a decoded index value with the route and destination of its key.
type entry struct {
	Route, Dest string
	Seq         uint64
	Time        time.Time
	Ref         uint64 // original seq of a dead letter; dead letter seq of a replay
	Data        []byte // an attempt record
}

// putEvent writes the entry of webhook id stored at seq on route in
// generation g, after adding id to g's filter.
func (x *index) putEvent(b *pebble.Batch, g int64, id [16]byte, route string, seq uint64, t time.Time) {
	if x.seen.filter(g) != nil || x.live(g) {
		// Not for a generation expire dropped since gen: its filter
		// would be made again and never dropped.
		x.seen.add(g, id)
	}
	putEntry(b, key(g, id, kindEvent, route, "", nil), seq, t, 0)
}

func putEntry(b *pebble.Batch, k []byte, seq uint64, t time.Time, ref uint64) {
	v := make([]byte, 0, 24)
	v = binary.BigEndian.AppendUint64(v, seq)
	v = binary.BigEndian.AppendUint64(v, uint64(t.UnixNano()))
	v = binary.BigEndian.AppendUint64(v, ref)
	_ = b.Set(k, v, nil)
}

func decodeEntry(k, v []byte) (entry, bool) {
	var e entry
	rest := k[26:]
	r, rest, ok := bytes.Cut(rest, []byte{0})
	if !ok {
		return e, false
	}
	d, extra, ok := bytes.Cut(rest, []byte{0})
	if !ok {
		return e, false
	}
	e.Route, e.Dest = string(r), string(d)
	if k[25] == kindAttempt {
		e.Data = slices.Clone(v)
		if len(extra) >= 8 {
			e.Time = time.Unix(0, int64(binary.BigEndian.Uint64(extra)))
		}
		return e, true
	}
	if len(v) < 24 {
		return e, false
	}
	e.Seq = binary.BigEndian.Uint64(v)
	e.Time = time.Unix(0, int64(binary.BigEndian.Uint64(v[8:])))
	e.Ref = binary.BigEndian.Uint64(v[16:])
	return e, true
}

// latest returns the newest entry of kind about eventID for route and dest
// (dest "" for kindEvent; route "" matches any route) written at or after
// since.
func (x *index) latest(eventID string, kind byte, route, dest string, since time.Time) (entry, bool, error) {
	id := eventHash(eventID)
	var best entry
	found := false
	for _, g := range x.liveGens(since) {
		es, err := x.scan(prefix(g, id, kind), kind)
		if err != nil {
			return best, false, err
		}
		for _, e := range es {
			if (route != "" && e.Route != route) || e.Dest != dest || e.Time.Before(since) {
				continue
			}
			if !found || e.Seq > best.Seq {
				best, found = e, true
			}
		}
		if found {
			return best, true, nil // later generations hold only later entries
		}
	}
	return best, found, nil
}

// all returns every entry of kind about eventID, oldest generation first
// and in key order within one.
func (x *index) all(eventID string, kind byte) ([]entry, error) {
	id := eventHash(eventID)
	gens := x.liveGens(time.Time{})
	var out []entry
	for i := len(gens) - 1; i >= 0; i-- {
		es, err := x.scan(prefix(gens[i], id, kind), kind)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

func (x *index) scan(p []byte, kind byte) ([]entry, error) {
	upper := slices.Clone(p)
	upper[len(upper)-1]++
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("%w: index: %w", ErrUnavailable, err)
	}
	defer it.Close()
	var out []entry
	for it.First(); it.Valid(); it.Next() {
		if e, ok := decodeEntry(it.Key(), it.Value()); ok {
			out = append(out, e)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("%w: index: %w", ErrUnavailable, err)
	}
	return out, nil
}

// watermark is the last sequence of stream the index has taken in.
func (x *index) watermark(stream string) (uint64, error) {
	v, closer, err := x.db.Get(append([]byte{'m'}, stream...))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("index: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("index: bad watermark of %s", stream)
	}
	return binary.BigEndian.Uint64(v), nil
}

func setWatermark(b *pebble.Batch, stream string, seq uint64) {
	_ = b.Set(append([]byte{'m'}, stream...), binary.BigEndian.AppendUint64(nil, seq), nil)
}

// expire drops the generations that ended more than keep before now.
func (x *index) expire(now time.Time) error {
	x.mu.Lock()
	var old []int64
	for len(x.gens) > 0 && x.gens[0]+x.width < now.Add(-x.keep).Unix() {
		old = append(old, x.gens[0])
		x.gens = x.gens[1:]
	}
	x.mu.Unlock()
	for _, g := range old {
		start := binary.BigEndian.AppendUint64([]byte{'g'}, uint64(g))
		end := binary.BigEndian.AppendUint64([]byte{'g'}, uint64(g+1))
		b := x.db.NewBatch()
		_ = b.DeleteRange(start, end, nil)
		_ = b.DeleteRange(binary.BigEndian.AppendUint64([]byte{'v'}, uint64(g)), binary.BigEndian.AppendUint64([]byte{'v'}, uint64(g+1)), nil)
		_ = b.Delete(binary.BigEndian.AppendUint64([]byte{'l'}, uint64(g)), nil)
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("index: expire: %w", err)
		}
		x.seen.drop(g)
	}
	if err := x.expireWork(now.Add(-x.keep)); err != nil {
		return fmt.Errorf("index: expire work records: %w", err)
	}
	return nil
}

// pebbleLogger sends Pebble's messages to jethook's log at debug level
// (its fatal errors at error level).
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("index: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("index: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("index: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

// stored is a webhook (kindEvent, dest "") or replay (kindReplay) this
// process has stored, for the index's writer.
type stored struct {
	kind                 byte
	route, dest, eventID string
	seq, ref             uint64
	at                   time.Time
	values               *hashes // a webhook's body values (values.go), unhashed, told, or nil
}

// writer indexes what this process stores, in batches from one goroutine:
// a commit per webhook from every request at once costs far more. The
// index lags the stream by one batch (microseconds); sync waits it out.
type writer struct {
	x      *index
	stream string
	in     chan stored
	ended  chan struct{}

	queued  atomic.Uint64
	written *progress   // how many of queued are committed
	high    uint64      // highest sequence written: the watermark
	blocks  valueBlocks // the value filters being filled
}

// startWriter starts the writer of stream, created at created (the
// stream's own time, which the value filters are marked with).
func (x *index) startWriter(stream string, created time.Time, log *slog.Logger) *writer {
	w := &writer{x: x, stream: stream, in: make(chan stored, 4096), ended: make(chan struct{}), written: newProgress(0)}
	w.blocks.created = uint64(created.UnixNano())
	go w.run(log)
	return w
}

// add queues one stored message; it blocks while the writer is a whole
// queue behind.
func (w *writer) add(st stored) {
	w.queued.Add(1)
	w.in <- st
}

func (w *writer) run(log *slog.Logger) {
	defer close(w.ended)
	for st := range w.in {
		b := w.x.db.NewBatch()
		n := uint64(0)
		for more := true; more; {
			if st.kind != kindSeq { // a due record has no entry, only its sequence below
				if g, id := w.x.gen(b, st.at), eventHash(st.eventID); st.kind == kindEvent {
					w.x.putEvent(b, g, id, st.route, st.seq, st.at)
				} else {
					putEntry(b, key(g, id, st.kind, st.route, st.dest, nil), st.seq, st.at, st.ref)
				}
			}
			if blk, ob := w.blocks.add(st.seq, st.at, st.values); ob != nil {
				g := w.x.gen(b, ob.at)
				w.x.filters.keep(g, blk, w.blocks.put(b, g, blk, ob))
			}
			st.values.release()
			w.high = max(w.high, st.seq)
			n++
			select {
			case st, more = <-w.in:
			default:
				more = false
			}
		}
		setWatermark(b, w.stream, w.high)
		if err := b.Commit(pebble.NoSync); err != nil {
			log.Warn("index write failed; the next start indexes these", "stream", w.stream, "messages", n, "err", err)
			w.x.rewriteMarkers(log)
		}
		w.written.set(w.written.get() + n)
	}
}

// sync waits up to wait until everything queued before the call is
// written; it reports whether it was.
func (w *writer) sync(ctx context.Context, wait time.Duration) bool {
	return w.written.reach(ctx, w.queued.Load(), wait)
}

// close writes what is queued and stops. Nothing may be added after.
func (w *writer) close() {
	close(w.in)
	<-w.ended
}
