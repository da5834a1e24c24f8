package store

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	celfilter "github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/internal/testkit"
)

// BenchmarkValueFilters measures what the value filters cost a stored
// webhook, against the check every JSON webhook already gets at ingress
// (filter.IsJSON), in the same run: hashing the body's string values on
// the request's goroutine (while the stream stores it), and the index's
// writer taking them into their block's filter.
//
//	go test -run '^$' -bench ValueFilters ./store/
func BenchmarkValueFilters(b *testing.B) {
	bodies := []struct{ name, file string }{
		{"bench 1 KiB", ""},
		{"GitHub push", "../filter/testdata/github-push.json"},
		{"Stripe invoice", "../filter/testdata/stripe-invoice-paid.json"},
	}
	for _, c := range bodies {
		body := []byte(fmt.Sprintf(`{"id":"evt_123456","type":"bench.event","pad":"%0990d"}`, 0))
		if c.file != "" {
			var err error
			if body, err = os.ReadFile(c.file); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name+"/baseline: the ingress's JSON check", func(b *testing.B) {
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				if !celfilter.IsJSON(body) {
					b.Fatal("not JSON")
				}
			}
		})
		b.Run(c.name+"/hash the values", func(b *testing.B) {
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				bodyValues(celfilter.BodyValues, body).release()
			}
		})
		b.Run(c.name+"/the writer takes them in", func(b *testing.B) {
			v := bodyValues(celfilter.BodyValues, body)
			b.ReportMetric(float64(len(v.h)), "values")
			var vb valueBlocks
			now := time.Now()
			seq := uint64(0)
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				seq++
				if blk, ob := vb.add(seq, now, v); ob != nil {
					_ = blk
					vb.free = append(vb.free[:0], ob.bits) // as put does, without the batch
				}
			}
		})
	}
}

func TestABlockFilterFindsEveryValueItTookInAndFewOthers(t *testing.T) {
	var vb valueBlocks
	now := time.Now()
	var f []byte
	for seq := uint64(1); seq <= valueBlock; seq++ {
		v := bodyValues(celfilter.BodyValues, []byte(fmt.Sprintf(`{"id":"evt_%d","type":"order.%d","k":["a%d","b%d"]}`, seq, seq%7, seq, seq)))
		blk, ob := vb.add(seq, now, v)
		if seq < valueBlock {
			if ob != nil {
				t.Fatalf("block whole after %d of %d sequences", seq, valueBlock)
			}
			continue
		}
		if ob == nil || blk != 0 {
			t.Fatalf("block %d not whole after its last sequence", blk)
		}
		for _, w := range fold(ob.bits) {
			for i := range 8 {
				f = append(f, byte(w>>(8*i)))
			}
		}
	}
	t.Logf("%d values in a filter of %d bytes", 4*valueBlock, len(f))
	hash := func(s string) []uint64 { return bodyValues(celfilter.BodyValues, []byte(fmt.Sprintf("%q", s))).h }
	for seq := 1; seq <= valueBlock; seq++ {
		for _, s := range []string{fmt.Sprintf("evt_%d", seq), fmt.Sprintf("order.%d", seq%7), fmt.Sprintf("b%d", seq)} {
			if !mayHold(f, [][]uint64{hash(s)}) {
				t.Fatalf("the filter lacks %q", s)
			}
		}
	}
	if !mayHold(f, [][]uint64{hash("evt_1"), hash("a1")}) {
		t.Fatal("the filter lacks one of two values it holds")
	}
	if !mayHold(f, [][]uint64{append(hash("other"), hash("a1")...)}) {
		t.Fatal("the filter lacks one of two values of which it holds one")
	}
	wrong := 0
	for i := range 10000 {
		if mayHold(f, [][]uint64{hash(fmt.Sprintf("other_%d", i))}) {
			wrong++
		}
	}
	// At most a quarter of the bits set: 1/4096 of values it does not
	// hold pass.
	if wrong > 25 {
		t.Fatalf("%d of 10000 values the block does not hold pass its filter", wrong)
	}
	t.Logf("%d of 10000 values it does not hold pass", wrong)
}

func TestABlockWithABodyTooLargeToHashGetsNoFilter(t *testing.T) {
	var vb valueBlocks
	now := time.Now()
	large := append(append([]byte(`{"id":"`), make([]byte, valueBodyMax)...), `"}`...)
	for seq := uint64(1); seq <= valueBlock; seq++ {
		body := []byte(`{"id":"small"}`)
		if seq == 7 {
			body = large
		}
		if _, ob := vb.add(seq, now, bodyValues(celfilter.BodyValues, body)); ob != nil {
			t.Fatalf("a block with a body of %d bytes got a filter", len(large))
		}
	}
}

// A block being filled is passed over from its first sequence up to the
// first the writer has not taken in, when the values taken in cannot be
// the ones searched for; never in a stream created since.
func TestABlockBeingFilledIsPassedOverUpToItsFirstSequenceNotTakenIn(t *testing.T) {
	vb := valueBlocks{created: 7}
	now := time.Now()
	hash := func(s string) []uint64 { return bodyValues(celfilter.BodyValues, []byte(fmt.Sprintf("%q", s))).h }
	for seq := uint64(valueBlock + 1); seq <= valueBlock+150; seq++ {
		if seq == valueBlock+101 {
			continue // its ack is late
		}
		vb.add(seq, now, bodyValues(celfilter.BodyValues, []byte(fmt.Sprintf(`{"id":"evt_%d"}`, seq))))
	}
	vb.add(3*valueBlock+1, now, bodyValues(celfilter.BodyValues, []byte(`{"id":"later"}`)))
	gaps := func(created uint64, first, last uint64, values ...string) map[uint64]uint64 {
		p := &passOver{first: first}
		var groups [][]uint64
		for _, v := range values {
			groups = append(groups, hash(v))
		}
		vb.openGaps(p, created, groups, last)
		return p.open
	}
	if got := gaps(7, 0, 3, "evt_none"); len(got) != 2 || got[1] != valueBlock+101 || got[3] != 3*valueBlock+2 {
		t.Errorf("a value no webhook holds: passes over %v, want block 1 up to %d and block 3 up to %d", got, valueBlock+101, 3*valueBlock+2)
	}
	if got := gaps(7, 0, 3, fmt.Sprintf("evt_%d", valueBlock+40)); len(got) != 1 || got[3] == 0 {
		t.Errorf("a value of block 1: passes over %v, want block 3 alone", got)
	}
	if got := gaps(7, 0, 3, fmt.Sprintf("evt_%d", valueBlock+140)); len(got) != 1 || got[3] == 0 {
		t.Errorf("a value taken in after the late sequence: passes over %v, want block 3 alone", got)
	}
	if got := gaps(7, 0, 2, "evt_none"); len(got) != 1 || got[1] == 0 {
		t.Errorf("blocks up to 2: passes over %v, want block 1 alone", got)
	}
	if got := gaps(7, 2, 3, "evt_none"); len(got) != 1 || got[3] == 0 {
		t.Errorf("blocks from 2: passes over %v, want block 3 alone", got)
	}
	if got := gaps(8, 0, 3, "evt_none"); len(got) != 0 {
		t.Errorf("a stream created since: passes over %v", got)
	}
}

// The index holds the filters of a run of blocks in each generation, and
// a stream created again numbers its blocks from 0 again in a later one:
// valueGaps must find the window's blocks in each of them, whatever it
// passes over to reach them.
func TestValueGapsReadsTheWindowsBlocksInEveryGeneration(t *testing.T) {
	x, err := openIndex(t.TempDir(), time.Hour, 1<<20, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	old, created := time.Unix(1_700_000_000, 0), time.Unix(1_700_050_000, 0)
	gen := func(i int64) int64 { return old.Unix() - old.Unix()%x.width + i*x.width }
	hold := func(b uint64) bool { return b%3 == 0 } // the blocks that hold "x"
	batch := x.db.NewBatch()
	put := func(stream time.Time, g int64, b uint64) {
		vb := valueBlocks{created: uint64(stream.UnixNano())}
		ob := &openBlock{bits: make([]uint64, valueBits/64)}
		values := []string{fmt.Sprintf("in-%d", b)}
		if hold(b) {
			values = append(values, "x")
		}
		for _, v := range values {
			h := xxhash.Sum64String(v)
			for i := range uint32(valueProbes) {
				p := probe(h, i, valueBits)
				ob.bits[p/64] |= 1 << (p % 64)
			}
		}
		vb.put(batch, g, b, ob)
	}
	// The old stream: blocks 0 to 29, ten in each of three generations;
	// the stream created again: blocks 0 to 19 in the fourth and fifth.
	for b := range uint64(30) {
		put(old, gen(int64(b/10)), b)
	}
	for b := range uint64(20) {
		put(created, gen(3+int64(b/10)), b)
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	seqs := func(b uint64) uint64 { return b*valueBlock + 1 } // the first sequence of block b
	for _, c := range []struct {
		name    string
		stream  time.Time
		since   time.Time
		lo, hi  uint64 // blocks
		written uint64 // the stream's blocks with a filter
	}{
		{"the old stream, its whole", old, time.Time{}, 0, 30, 30},
		{"the old stream, a window within one generation", old, time.Time{}, 12, 17, 30},
		{"the old stream, a window across generations", old, time.Time{}, 7, 24, 30},
		{"the old stream, since its second generation", old, time.Unix(gen(1), 0), 3, 28, 30},
		{"the old stream, past its last filter", old, time.Time{}, 25, 40, 30},
		{"the stream created again, its whole", created, time.Time{}, 0, 20, 20},
		{"the stream created again, a window across generations", created, time.Time{}, 8, 13, 20},
		{"the stream created again, since its own first generation", created, time.Unix(gen(3), 0), 2, 19, 20},
	} {
		// The first reading keeps what it reads in memory; the second
		// finds it there, the third after the other stream's were read.
		for _, reading := range []string{"read", "read again", "read a third time"} {
			t.Run(c.name+", "+reading, func(t *testing.T) {
				p, err := x.valueGaps([][]string{{"x"}}, c.stream, c.since, seqs(c.lo), seqs(c.hi), nil)
				if err != nil {
					t.Fatal(err)
				}
				for b := c.lo; b < c.hi; b++ {
					want := b < c.written && !hold(b)
					if c.stream.Equal(old) && !c.since.IsZero() && int64(b/10) < 1 {
						want = false // its generation is before since
					}
					if got := p.skips(b); got != want {
						t.Errorf("block %d: passed over %v, want %v", b, got, want)
					}
				}
			})
			if reading == "read again" {
				other := old
				if c.stream.Equal(old) {
					other = created
				}
				if _, err := x.valueGaps([][]string{{"x"}}, other, time.Time{}, 1, seqs(30), nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestTheFiltersKeptInMemoryStayWithinTheirBound(t *testing.T) {
	var c filterCache
	f := make([]byte, 8+1024)
	n := uint64(2 * filterCacheBytes / len(f))
	for b := range n {
		c.keep(1, b, f)
		if b == 3 {
			c.keep(1, 1, f) // kept again
		}
	}
	if c.bytes > filterCacheBytes || c.bytes != len(c.byBlk)*len(f) {
		t.Fatalf("%d bytes kept for %d filters of %d bytes (bound %d)", c.bytes, len(c.byBlk), len(f), filterCacheBytes)
	}
	if _, ok := c.get(0, 0, 0); ok {
		t.Error("the oldest filter is kept")
	}
	if _, ok := c.get(n-1, 0, 0); !ok {
		t.Error("the newest filter is not kept")
	}
	if _, ok := c.get(n-1, 0, 2); ok {
		t.Error("a filter of a generation before since is found")
	}
}
