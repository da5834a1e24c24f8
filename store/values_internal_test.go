package store

import (
	"fmt"
	"os"
	"testing"
	"time"

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
			if !mayHold(f, hash(s)) {
				t.Fatalf("the filter lacks %q", s)
			}
		}
	}
	if !mayHold(f, append(hash("evt_1"), hash("a1")...)) {
		t.Fatal("the filter lacks one of two values it holds")
	}
	wrong := 0
	for i := range 10000 {
		if mayHold(f, hash(fmt.Sprintf("other_%d", i))) {
			wrong++
		}
	}
	// At most half of the bits set: 1/64 of values it does not hold pass.
	if wrong > 400 {
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
