package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// Value filters: a search for webhooks whose body has a field equal to a
// string (body.data.object.metadata.order_id == "1004", Scan.Values)
// passes over the stretches of the stream that hold no such string. For
// each block of valueBlock stream sequences, the index keeps a Bloom
// filter of the string values of the block's webhook bodies
// (Options.StringValues), written once every sequence of the block was
// stored by this process and taken in by its writer:
//
//	'v' gen(8) block(8) → created(8) and the filter's bits, little-endian words
//
// gen is the generation of the block's last message, so expire drops it
// with the entries of that generation. created is when the stream was
// created: a filter of a stream since deleted and created again (its
// sequences start again) is not taken for the new stream's. A block with a sequence the writer
// never saw (written by another jethook, a publish whose ack was lost,
// whatever the catch-up at start indexes again) gets no filter, and a
// search reads it. The same goes for the block being filled.
const (
	valueBlock = 512 // stream sequences per block: a multiple of 64
	// valueBits is the size of a block's filter while it is filled; it is
	// folded in halves while that keeps at most half of its bits set, so
	// that a block of short bodies keeps a small filter.
	valueBits   = 1 << 19
	valueProbes = 6 // bits per value: 1.6 % false positives at half full
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

// bodyValues hashes the string values of body, as values lists them, for
// the writer. The caller gives the result to the writer, which puts it
// back in hashPool.
func bodyValues(values func([]byte, func([]byte)), body []byte) *hashes {
	v := hashPool.Get().(*hashes)
	v.h = v.h[:0]
	values(body, func(s []byte) { v.h = append(v.h, xxhash.Sum64(s)) })
	return v
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

// valueBlocks are the writer's open blocks.
type valueBlocks struct {
	created uint64 // the stream's creation time, Unix ns
	open    map[uint64]*openBlock
	free    [][]uint64
}

// add takes in the message stored at seq at t, with its body's values (nil
// for one that is not a webhook), and returns its block once the block is
// whole.
func (vb *valueBlocks) add(seq uint64, t time.Time, v *hashes) (uint64, *openBlock) {
	if seq == 0 {
		return 0, nil
	}
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
			vb.release(oldest)
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

// release lets go of block b's filter.
func (vb *valueBlocks) release(b uint64) {
	if ob := vb.open[b]; ob != nil {
		vb.free = append(vb.free[:min(len(vb.free), 1)], ob.bits)
		delete(vb.open, b)
	}
}

// put writes whole block b's filter, folded, to batch.
func (vb *valueBlocks) put(batch *pebble.Batch, g int64, b uint64, ob *openBlock) {
	f := fold(ob.bits)
	v := make([]byte, 0, 8+8*len(f))
	v = binary.BigEndian.AppendUint64(v, vb.created)
	for _, w := range f {
		v = binary.LittleEndian.AppendUint64(v, w)
	}
	_ = batch.Set(valueKey(g, b), v, nil)
	vb.free = append(vb.free[:min(len(vb.free), 1)], ob.bits)
}

// fold halves words in place while at most half of the halved filter's
// bits are set, and returns what is left.
func fold(words []uint64) []uint64 {
	for len(words) > 1 {
		half := len(words) / 2
		set := 0
		for i := range half {
			set += bits.OnesCount64(words[i] | words[i+half])
		}
		if set > half*32 {
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

// mayHold reports whether a filter (as put wrote it) may hold every one
// of the values hashed as hs.
func mayHold(f []byte, hs []uint64) bool {
	m := uint64(len(f)) * 8
	if m == 0 || m&(m-1) != 0 {
		return true // not a filter put wrote
	}
	for _, h := range hs {
		for i := range uint32(valueProbes) {
			p := probe(h, i, m)
			if f[p/8]&(1<<(p%8)) == 0 {
				return false
			}
		}
	}
	return true
}

// passOver is the blocks of sequences lo to hi-1 whose filters hold not
// every one of values: blocks no webhook stored at or after since that
// a search for them reads can be in.
type passOver struct {
	first uint64   // the block of bit 0
	bits  []uint64 // one bit per block from first: set to pass over
}

func (p *passOver) skips(b uint64) bool {
	if p == nil || b < p.first {
		return false
	}
	i := b - p.first
	return i/64 < uint64(len(p.bits)) && p.bits[i/64]&(1<<(i%64)) != 0
}

// valueGaps reads the filters of the blocks of sequences lo to hi-1 of
// the stream created at created that were whole at or after since (zero:
// ever), and returns the ones that cannot hold all of values.
func (x *index) valueGaps(values []string, created time.Time, since time.Time, lo, hi uint64) (*passOver, error) {
	if len(values) == 0 || lo >= hi {
		return nil, nil
	}
	hs := make([]uint64, len(values))
	for i, v := range values {
		hs[i] = xxhash.Sum64String(v)
	}
	p := &passOver{first: blockOf(lo)}
	last := blockOf(hi - 1)
	p.bits = make([]uint64, (last-p.first)/64+1)
	from := []byte{'v'}
	if !since.IsZero() {
		from = binary.BigEndian.AppendUint64(from, uint64(since.Unix()-since.Unix()%x.width))
	}
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: []byte{'v' + 1}})
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	defer it.Close()
	// Each generation holds a run of blocks: the scan seeks to the first
	// block of the window in each, and on to the next generation past
	// its last, so it reads the filters of the window's blocks alone,
	// not every filter since.
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) != 17 {
			ok = it.Next()
			continue
		}
		g, b := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])
		switch {
		case b < p.first:
			ok = it.SeekGE(valueKey(int64(g), p.first))
			continue
		case b > last && g == math.MaxUint64:
			ok = false
			continue
		case b > last:
			ok = it.SeekGE(valueKey(int64(g+1), p.first))
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		if len(v) >= 8 && binary.BigEndian.Uint64(v) == uint64(created.UnixNano()) && !mayHold(v[8:], hs) {
			i := b - p.first
			p.bits[i/64] |= 1 << (i % 64)
		}
		ok = it.Next()
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return p, nil
}
