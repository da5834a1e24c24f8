package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// Value filters: a search for webhooks whose body has a field equal to a
// value (body.data.object.metadata.order_id == "1004", Scan.Values)
// passes over the stretches of the stream that hold no such value. For
// each block of valueBlock stream sequences, the index keeps a Bloom
// filter of the values of the block's webhook bodies (Options.BodyValues),
// written once every sequence of the block was stored by this process
// and taken in by its writer (the embedded store's: with an external
// server there is none, and no filters):
//
//	'v' gen(8) block(8) → created(8) and the filter's bits, little-endian words
//
// gen is the generation of the block's last message, so expire drops it
// with the entries of that generation. created is when the stream was
// created: a filter of a stream since deleted and created again (its
// sequences start again) is not taken for the new stream's. A block with
// a sequence the writer never saw (a publish whose ack was lost, what the
// catch-up at start indexes again, a body too large to hash) gets no
// filter, and a search reads it. A block being filled has its filter in
// the writer's memory alone: a search passes over the sequences of it
// the writer took in, when their values cannot be the ones it looks
// for, and reads the rest (openGaps).
const (
	valueBlock = 512 // stream sequences per block: a multiple of 64
	// valueBits is the size of a block's filter while it is filled; it is
	// folded in halves while that keeps at most a quarter of its bits
	// set, so that a block of short bodies keeps a small filter that
	// lets through few values it does not hold (one in 4,096 at a
	// quarter full; folded to half full, one in 64 let a day's search of
	// a million webhooks read a few blocks it did not need to).
	valueBits   = 1 << 19
	valueProbes = 6 // bits per value
	// valueOpen bounds the blocks the writer fills at once: publishes
	// are acked a little out of order, and a block one of whose
	// sequences never comes (a lost ack) is dropped, with no filter,
	// once this many later blocks are open.
	valueOpen = 4
)

// blockOf is the block of stream sequence seq (from 1).
func blockOf(seq uint64) uint64 { return (seq - 1) / valueBlock }

// hashes are the hashes of one webhook's string values.
type hashes struct{ h []uint64 }

var hashPool = sync.Pool{New: func() any { return &hashes{h: make([]uint64, 0, 64)} }}

// valueBodyMax is the largest body whose values are hashed: reading one
// costs about a microsecond per kilobyte. A larger body leaves its block
// without a filter (unhashed), so searches read that block.
const valueBodyMax = 64 << 10

// unhashed stands for the values of a body too large to hash, and told
// for those of a message the writer was told of already (a signed
// webhook's second entry, under its signed key): neither is taken into
// a block. Taking in the second entry of a body too large to hash would
// mark its sequence taken in, and one that comes after its block is
// whole would open the block again, holding that sequence and none of
// its values: either way a search for a value of the body would pass
// over it.
var unhashed, told = new(hashes), new(hashes)

// bodyValues hashes the values of body, as values lists them, for the
// writer. The caller gives the result to the writer, which puts it
// back in hashPool.
func bodyValues(values func([]byte, func([]byte)), body []byte) *hashes {
	if len(body) > valueBodyMax {
		return unhashed
	}
	v := hashPool.Get().(*hashes)
	v.h = v.h[:0]
	values(body, func(s []byte) { v.h = append(v.h, xxhash.Sum64(s)) })
	return v
}

// release puts v back in hashPool.
func (v *hashes) release() {
	if v != nil && v != unhashed && v != told {
		hashPool.Put(v)
	}
}

// probe is the i-th bit of hash h in a filter of m bits (a power of two):
// what a filter folded to m bits finds where the full one put it.
func probe(h uint64, i uint32, m uint64) uint64 {
	return uint64(uint32(h)+i*(uint32(h>>32)|1)) & (m - 1)
}

// openBlock is a block the writer is filling.
type openBlock struct {
	have [valueBlock / 64]uint64 // the sequences taken in
	n    int
	bits []uint64
	at   time.Time // the stored time of its last message
}

// valueBlocks are the writer's open blocks. The writer changes them;
// searches read them (openGaps) under mu.
type valueBlocks struct {
	created uint64 // the stream's creation time, Unix ns
	mu      sync.Mutex
	open    map[uint64]*openBlock
	free    [][]uint64 // the writer's alone
}

// add takes in the message stored at seq at t, with its body's values (nil
// for one that is not a webhook), and returns its block once the block is
// whole.
func (vb *valueBlocks) add(seq uint64, t time.Time, v *hashes) (uint64, *openBlock) {
	if seq == 0 || v == unhashed || v == told {
		return 0, nil // its block stays without a filter, or knows it already
	}
	vb.mu.Lock()
	defer vb.mu.Unlock()
	b := blockOf(seq)
	ob := vb.open[b]
	if ob == nil {
		if vb.open == nil {
			vb.open = make(map[uint64]*openBlock)
		}
		if len(vb.open) == valueOpen {
			oldest := b
			for k := range vb.open {
				oldest = min(oldest, k)
			}
			if oldest == b {
				return 0, nil // older than every open block: its block was dropped
			}
			vb.recycle(vb.open[oldest].bits)
			delete(vb.open, oldest)
		}
		ob = &openBlock{}
		if n := len(vb.free); n > 0 {
			ob.bits, vb.free = vb.free[n-1], vb.free[:n-1]
			clear(ob.bits)
		} else {
			ob.bits = make([]uint64, valueBits/64)
		}
		vb.open[b] = ob
	}
	if v != nil {
		for _, h := range v.h {
			for i := range uint32(valueProbes) {
				p := probe(h, i, valueBits)
				ob.bits[p/64] |= 1 << (p % 64)
			}
		}
	}
	i := (seq - 1) % valueBlock
	if ob.have[i/64]&(1<<(i%64)) == 0 {
		ob.have[i/64] |= 1 << (i % 64)
		ob.n++
	}
	ob.at = t
	if ob.n < valueBlock {
		return 0, nil
	}
	delete(vb.open, b)
	return b, ob
}

// recycle keeps bits, a filter written or let go of, for the next block
// to fill, with at most one other.
func (vb *valueBlocks) recycle(bits []uint64) {
	vb.free = append(vb.free[:min(len(vb.free), 1)], bits)
}

// put writes whole block b's filter, folded, to batch, and returns the
// value it wrote.
func (vb *valueBlocks) put(batch *pebble.Batch, g int64, b uint64, ob *openBlock) []byte {
	f := fold(ob.bits)
	v := make([]byte, 0, 8+8*len(f))
	v = binary.BigEndian.AppendUint64(v, vb.created)
	for _, w := range f {
		v = binary.LittleEndian.AppendUint64(v, w)
	}
	_ = batch.Set(valueKey(g, b), v, nil)
	vb.recycle(ob.bits)
	return v
}

// fold halves words in place while at most a quarter of the halved
// filter's bits are set, and returns what is left.
func fold(words []uint64) []uint64 {
	for len(words) > 1 {
		half := len(words) / 2
		set := 0
		for i := range half {
			set += bits.OnesCount64(words[i] | words[i+half])
		}
		if set > half*16 {
			break
		}
		for i := range half {
			words[i] |= words[i+half]
		}
		words = words[:half]
	}
	return words
}

func valueKey(g int64, b uint64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, 'v')
	k = binary.BigEndian.AppendUint64(k, uint64(g))
	return binary.BigEndian.AppendUint64(k, b)
}

// mayHold reports whether a filter (as put wrote it) may hold, of each
// group of values hashed, one at least.
func mayHold(f []byte, groups [][]uint64) bool {
	m := uint64(len(f)) * 8
	if m == 0 || m&(m-1) != 0 {
		return true // not a filter put wrote
	}
	return holdsGroups(groups, m, func(p uint64) bool { return f[p/8]&(1<<(p%8)) != 0 })
}

// mayHoldWords is mayHold for a filter of valueBits being filled.
func mayHoldWords(words []uint64, groups [][]uint64) bool {
	return holdsGroups(groups, valueBits, func(p uint64) bool { return words[p/64]&(1<<(p%64)) != 0 })
}

// holdsGroups reports whether a filter of m bits, whose bit p is set
// when set(p), may hold one value at least of each group of values
// hashed.
func holdsGroups(groups [][]uint64, m uint64, set func(p uint64) bool) bool {
	for _, g := range groups {
		if !slices.ContainsFunc(g, func(h uint64) bool {
			for i := range uint32(valueProbes) {
				if !set(probe(h, i, m)) {
					return false
				}
			}
			return true
		}) {
			return false
		}
	}
	return true
}

// openGaps adds to p what a search for the values hashed as groups can
// pass over of the blocks being filled, up to block last, in the stream
// created at created: of each block whose filter cannot hold them, the
// sequences from the block's first that the writer took in, up to the
// first it has not (published later, or whose ack it has not seen yet).
// The search reads the rest of the block.
func (vb *valueBlocks) openGaps(p *passOver, created uint64, groups [][]uint64, last uint64) {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if vb.created != created {
		return
	}
	for b, ob := range vb.open {
		if b < p.first || b > last || mayHoldWords(ob.bits, groups) {
			continue
		}
		n := uint64(0)
		for _, w := range ob.have {
			n += uint64(bits.TrailingZeros64(^w))
			if w != math.MaxUint64 {
				break
			}
		}
		if n > 0 {
			if p.open == nil {
				p.open = make(map[uint64]uint64)
			}
			p.open[b] = b*valueBlock + 1 + n
		}
	}
}

// passOver is the blocks of sequences lo to hi-1 whose filters hold not
// every one of values: blocks no webhook stored at or after since that
// a search for them reads can be in.
type passOver struct {
	first uint64   // the block of bit 0
	bits  []uint64 // one bit per block from first: set to pass over
	// open is, for a block being filled, the sequence up to which (from
	// the block's first) the search passes over it (openGaps).
	open map[uint64]uint64
}

func (p *passOver) skips(b uint64) bool {
	if p == nil || b < p.first {
		return false
	}
	i := b - p.first
	return i/64 < uint64(len(p.bits)) && p.bits[i/64]&(1<<(i%64)) != 0
}

// filterCacheBytes bounds the value filters kept in memory, as written
// and as searches read them: a search run again (a page after page, a
// dashboard's refresh) then reads no filter from the index. Read from
// the index, a filter takes the index's block cache (indexCache) from
// the lookups every stored webhook makes, and, without cgo, garbage for
// each block read: beside ingest, both slow it down.
const filterCacheBytes = 8 << 20

// filterCache is the value filters last written or read, by block: each
// as put wrote it (the stream's creation time, then the bits), with its
// generation.
type filterCache struct {
	mu    sync.Mutex
	byBlk map[uint64]cachedFilter
	order []uint64 // blocks, oldest kept first, from head
	head  int
	bytes int
}

type cachedFilter struct {
	gen int64
	v   []byte
}

// keep keeps block b's filter v, of generation g, letting go of the
// oldest kept while they hold more than filterCacheBytes. v is not
// changed after.
func (c *filterCache) keep(g int64, b uint64, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byBlk == nil {
		c.byBlk = make(map[uint64]cachedFilter)
	}
	if old, ok := c.byBlk[b]; ok {
		c.bytes -= len(old.v)
	} else {
		c.order = append(c.order, b)
	}
	c.byBlk[b] = cachedFilter{g, v}
	c.bytes += len(v)
	for c.bytes > filterCacheBytes && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		c.bytes -= len(c.byBlk[old].v)
		delete(c.byBlk, old)
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// get is block b's kept filter of the stream created at created, if it
// is kept and of generation since or later.
func (c *filterCache) get(b uint64, created uint64, since int64) ([]byte, bool) {
	c.mu.Lock()
	f, ok := c.byBlk[b]
	c.mu.Unlock()
	if !ok || f.gen < since || binary.BigEndian.Uint64(f.v) != created {
		return nil, false
	}
	return f.v, true
}

// valueGaps reads the filters of the blocks of sequences lo to hi-1 of
// the stream created at created that were whole at or after since (zero:
// ever), and returns the ones that cannot hold one value of each group of
// values, and, with open (the writer's blocks being filled), what it can
// pass over of those. It reads from the index only the blocks whose
// filters are not kept in memory.
func (x *index) valueGaps(values [][]string, created time.Time, since time.Time, lo, hi uint64, open *valueBlocks) (*passOver, error) {
	if len(values) == 0 || lo >= hi {
		return nil, nil
	}
	hs := make([][]uint64, len(values))
	for i, g := range values {
		for _, v := range g {
			hs[i] = append(hs[i], xxhash.Sum64String(v))
		}
	}
	p := &passOver{first: blockOf(lo)}
	last := blockOf(hi - 1)
	p.bits = make([]uint64, (last-p.first)/64+1)
	sinceGen := int64(math.MinInt64)
	from := []byte{'v'}
	if !since.IsZero() {
		sinceGen = since.Unix() - since.Unix()%x.width
		from = binary.BigEndian.AppendUint64(from, uint64(sinceGen))
	}
	stream := uint64(created.UnixNano())
	// check judges block b's filter v, of this stream.
	check := func(b uint64, v []byte) {
		if !mayHold(v[8:], hs) {
			i := b - p.first
			p.bits[i/64] |= 1 << (i % 64)
		}
	}
	// The blocks from first to last that are not kept are read from the
	// index; those kept on either side of them are not.
	first, end := last+1, p.first
	for b := p.first; b <= last; b++ {
		if v, ok := x.filters.get(b, stream, sinceGen); ok {
			check(b, v)
			continue
		}
		first, end = min(first, b), b+1
	}
	if open != nil {
		open.openGaps(p, stream, hs, last)
	}
	if first >= end {
		return p, nil
	}
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: []byte{'v' + 1}})
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	defer it.Close()
	// Each generation holds a run of blocks: the scan seeks to the first
	// block to read in each, and on to the next generation past the last,
	// so it reads the filters of those blocks alone, not every filter
	// since.
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) != 17 {
			ok = it.Next()
			continue
		}
		g, b := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])
		switch {
		case b < first:
			ok = it.SeekGE(valueKey(int64(g), first))
			continue
		case b >= end && g == math.MaxUint64:
			ok = false
			continue
		case b >= end:
			ok = it.SeekGE(valueKey(int64(g+1), first))
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		if len(v) >= 8 && binary.BigEndian.Uint64(v) == stream {
			check(b, v)
			x.filters.keep(int64(g), b, bytes.Clone(v))
		}
		ok = it.Next()
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return p, nil
}
