package bench

import (
	"context"
	"slices"
	"testing"
)

func TestProtectionRowsDeliverEveryHealthyEventOnceAndCountConsistently(t *testing.T) {
	t.Parallel()
	res, err := Protection(context.Background(), ProtectionOptions{
		Rows:     []string{"overload", "blip-refused", "poison"},
		Size:     0.1,
		BodySize: 64,
		Dir:      t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(res.Rows))
	}
	for _, r := range res.Rows {
		t.Run(r.Name, func(t *testing.T) {
			if r.Events == 0 || r.Delivered != r.Healthy || !r.Drained() {
				t.Errorf("%d of %d healthy events delivered (%d posted), drain %s; want all", r.Delivered, r.Healthy, r.Events, r.Drain)
			}
			if r.Repeats > 8 {
				t.Errorf("%d repeated deliveries, more than the destination's concurrency (8) in flight", r.Repeats)
			}
			if r.Requests < r.Delivered || r.Attempts < r.Delivered {
				t.Errorf("backend saw %d requests, jethook counted %d attempts, for %d deliveries", r.Requests, r.Attempts, r.Delivered)
			}
			if sum(r.PerSecond) != r.Requests || sum(r.OKPerSecond) != r.Delivered+r.Repeats || sum(r.AttemptsPerSecond) != r.Attempts {
				t.Errorf("per second: %d requests, %d 200s, %d attempts; totals %d, %d and %d",
					sum(r.PerSecond), sum(r.OKPerSecond), sum(r.AttemptsPerSecond), r.Requests, r.Delivered+r.Repeats, r.Attempts)
			}
			if len(r.Delays) != r.Delivered || !slices.IsSorted(r.Delays) {
				t.Errorf("%d delays for %d deliveries, sorted %t", len(r.Delays), r.Delivered, slices.IsSorted(r.Delays))
			}
			if r.Verdict == "" {
				t.Error("no verdict")
			}
		})
	}
	blip := res.Rows[1]
	if !blip.Returned || blip.FirstAfter < 0 || blip.Attempts <= blip.Requests {
		t.Errorf("refused blip: returned %t, first 200 after it %s, %d attempts for %d requests; want a return, a 200 after it, and refused attempts the backend never saw",
			blip.Returned, blip.FirstAfter, blip.Attempts, blip.Requests)
	}
	if poison := res.Rows[2]; poison.Healthy >= poison.Events {
		t.Errorf("poison: %d healthy of %d events, want fewer", poison.Healthy, poison.Events)
	}
}

func TestPoisonedSpreadsTheShareEvenly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		share float64
		of    int
		want  int
	}{
		{"no share poisons nothing", 0, 100, 0},
		{"30 % of 200 poisons 60", 0.3, 200, 60},
		{"30 % of 10 poisons 3", 0.3, 10, 3},
		{"a share of 1 poisons every event", 1, 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newRowBackend(row{events: tc.of, poison: tc.share})
			n := 0
			for i := range tc.of {
				if b.poisoned(i) {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("%d poisoned, want %d", n, tc.want)
			}
		})
	}
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

func TestDrawFailsEachRequestWithTheShareIndependently(t *testing.T) {
	t.Parallel()
	// With a share of 0.5, an event fails its first k requests in a row
	// with probability 2^-k: of 1,000 events, about 500 pass at once and
	// none fails 20 in a row.
	first, long := 0, 0
	for seq := range 1000 {
		k := 0
		for k < 20 && draw(seq, k+1) < 0.5 {
			k++
		}
		if k == 0 {
			first++
		}
		if k == 20 {
			long++
		}
	}
	if first < 430 || first > 570 || long > 0 {
		t.Errorf("%d of 1000 events passed at once (want about 500), %d failed 20 in a row (want 0)", first, long)
	}
}
