package store

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestTheDedupFilterNeverForgetsAnIDAndTurnsMostNewOnesAway(t *testing.T) {
	t.Parallel()
	const ids = 50_000
	s := newSeen(64 << 10) // 10.5 bits per id
	s.open(1, true)
	for i := range ids {
		s.add(1, eventHash(fmt.Sprint("evt-", i)))
	}
	for i := range ids {
		if !s.mayContain(1, eventHash(fmt.Sprint("evt-", i))) {
			t.Fatalf("evt-%d was added but the filter says it was not", i)
		}
	}
	maybe := 0
	for i := range ids {
		if s.mayContain(1, eventHash(fmt.Sprint("new-", i))) {
			maybe++
		}
	}
	// A blocked filter with 4 probes at 10.5 bits per id: about 1.5 %.
	if rate := float64(maybe) / ids; rate > 0.04 {
		t.Errorf("%.1f %% of new ids answered maybe; want under 4 %%", 100*rate)
	}
	t.Logf("false positives: %.2f %%", 100*float64(maybe)/ids)
}

func TestAGenerationWithoutACompleteFilterIsAlwaysReadFromDisk(t *testing.T) {
	t.Parallel()
	s := newSeen(4096)
	id := eventHash("evt-1")
	if !s.mayContain(7, id) {
		t.Error("a generation with no filter must answer maybe")
	}
	f := s.open(7, false)
	if !s.mayContain(7, id) {
		t.Error("a filter still being filled must answer maybe")
	}
	f.complete.Store(true)
	if s.mayContain(7, id) {
		t.Error("a complete, empty filter must turn the id away")
	}
	s.add(7, id)
	s.drop(7)
	if !s.mayContain(7, id) {
		t.Error("a dropped generation must answer maybe")
	}
}

// After a restart, the generations on disk are read into their filters:
// every stored id is still a duplicate, before and after, and once filled
// a new id no longer reads the disk.
func TestTheDedupFiltersAreFilledFromTheIndexAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	x, err := openIndex(dir, time.Hour, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	w := x.startWriter(StreamName, time.Time{}, log)
	now := time.Now()
	for i := range 1000 {
		w.add(stored{kind: kindEvent, route: "r", eventID: fmt.Sprint("evt-", i), seq: uint64(i + 1), at: now})
		// Other kinds share the generation and are skipped by the fill.
		w.add(stored{kind: kindReplay, route: "r", dest: "d", eventID: fmt.Sprint("rep-", i), seq: uint64(i + 1), at: now})
	}
	w.close()
	if err := x.close(); err != nil {
		t.Fatal(err)
	}

	x, err = openIndex(dir, time.Hour, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	since := now.Add(-time.Hour)
	check := func(when string) {
		for i := range 1000 {
			if seq, ok, err := x.eventSeq("r", fmt.Sprint("evt-", i), since); err != nil || !ok || seq != uint64(i+1) {
				t.Fatalf("%s: evt-%d: seq %d, found %v, %v; want seq %d", when, i, seq, ok, err, i+1)
			}
		}
	}
	check("while the filters fill")
	select {
	case <-x.filled:
	case <-time.After(10 * time.Second):
		t.Fatal("the filters were not filled within 10s")
	}
	check("once filled")
	gens := x.liveGens(since)
	if len(gens) != 1 {
		t.Fatalf("generations %v; want one", gens)
	}
	turned := 0
	for i := range 1000 {
		if !x.seen.mayContain(gens[0], eventHash(fmt.Sprint("new-", i))) {
			turned++
		}
	}
	if turned < 950 {
		t.Errorf("the filled filter turned away %d of 1000 new ids; want nearly all", turned)
	}
	for i := range 1000 {
		if !x.seen.mayContain(gens[0], eventHash(fmt.Sprint("evt-", i))) {
			t.Fatalf("evt-%d is in the index but not in its filled filter", i)
		}
	}
}

// BenchmarkDedupCheckOfANewWebhook times the index's dedup check of an id
// it has never seen, against the same check read from disk (the filter
// left incomplete, as while it is being filled at start).
func BenchmarkDedupCheckOfANewWebhook(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	x, err := openIndex(b.TempDir(), 72*time.Hour, 16<<20, log)
	if err != nil {
		b.Fatal(err)
	}
	defer x.close()
	w := x.startWriter(StreamName, time.Time{}, log)
	now := time.Now()
	for i := range 200_000 {
		w.add(stored{kind: kindEvent, route: "r", eventID: fmt.Sprint("evt_", i), seq: uint64(i + 1), at: now})
	}
	w.close()
	if err := x.db.Compact(b.Context(), []byte{'g'}, []byte{'h'}, true); err != nil {
		b.Fatal(err)
	}
	since := now.Add(-72 * time.Hour)
	g := x.liveGens(since)[0]
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprint("new_", i)
	}
	var disk, mem float64
	for _, c := range []struct {
		name     string
		complete bool
		ns       *float64
	}{{"disk", false, &disk}, {"filter", true, &mem}} {
		b.Run(c.name, func(b *testing.B) {
			x.seen.filter(g).complete.Store(c.complete)
			i := 0
			for b.Loop() {
				if _, ok, _ := x.eventSeq("r", ids[i%len(ids)], since); ok {
					b.Fatal("a new id was found")
				}
				i++
			}
			*c.ns = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
	}
	if disk > 0 && mem > 0 {
		b.Logf("filter ÷ disk: %.3f (%.0f ns vs %.0f ns)", mem/disk, mem, disk)
	}
}
