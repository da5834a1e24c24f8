package forward

import (
	"cmp"
	"math"
	"testing"
	"time"
)

// second is one second of attempts, each latency long (10 ms if 0),
// ending evenly spread: good delivered, over answered 429/503/504 or timed
// out, other failed otherwise. The overload answers come last, as from a
// backend that takes so many a second and refuses the rest, unless mixed
// spreads them among the others, as from a backend that refuses some
// events whatever the load.
type second struct {
	good, over, other int
	mixed             bool
	latency           time.Duration
}

// answers lists s's answers in the order they end.
func (s second) answers() []answer {
	var out []answer
	for range s.good {
		out = append(out, answerGood)
	}
	for range s.other {
		out = append(out, answerOther)
	}
	if !s.mixed {
		for range s.over {
			out = append(out, answerOverload)
		}
		return out
	}
	mixed := make([]answer, 0, len(out)+s.over)
	n := len(out) + s.over
	for i, k := 0, 0; i < n; i++ {
		if (i+1)*s.over/n > i*s.over/n {
			mixed = append(mixed, answerOverload)
			continue
		}
		mixed = append(mixed, out[k])
		k++
	}
	return mixed
}

// play feeds l one second after another, starting at t0, and returns the
// limit at the end of each (0 while none is learned). The limit's seconds
// start at its first attempt, so a second judged on latency is judged
// during the next one.
func play(l *limit, t0 time.Time, seconds []second) []float64 {
	var got []float64
	for i, s := range seconds {
		start := t0.Add(time.Duration(i) * time.Second)
		as := s.answers()
		latency := cmp.Or(s.latency, 10*time.Millisecond)
		for j, a := range as {
			end := start.Add(time.Duration(j+1) * time.Second / time.Duration(len(as)+1))
			l.ended(end.Add(-latency), end, a, float64(s.good))
		}
		l.tick(start.Add(time.Second))
		r := l.rate
		if r >= noLimit {
			r = 0
		}
		got = append(got, math.Round(r*10)/10)
	}
	return got
}

func TestTheLearnedLimit(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name    string
		ceiling float64
		seconds []second
		want    []float64
	}{
		{"deliveries alone teach nothing", 0,
			[]second{{good: 100}, {good: 200}},
			[]float64{0, 0}},
		{"two seconds of overload cut it to 90 % of the goodput; once the trial confirms it, slow start doubles it back to the goodput, then it adds 5 % a second", 0,
			[]second{{good: 50, over: 50}, {good: 50, over: 50}, {good: 45}, {good: 45}, {good: 45}, {good: 50}, {good: 52}},
			[]float64{0, 45, 45, 45, 50, 52.5, 55.1}},
		{"a flood, thousands of refusals among the deliveries of one second, cuts it in that second", 0,
			[]second{{good: 50, over: 1950}, {good: 45}, {good: 45}},
			[]float64{45, 45, 45}},
		{"one second of overload is not enough: it may be an outage beginning", 0,
			[]second{{good: 50, over: 50}, {good: 50}, {good: 50}},
			[]float64{0, 0, 0}},
		{"a trial that halves the share of overload answers confirms the cut, even if some remain", 0,
			[]second{{good: 50, over: 110}, {good: 50, over: 110}, {good: 45, over: 20}, {good: 45, over: 20}, {good: 45}},
			[]float64{0, 45, 45, 45, 45}},
		{"503s whose share stays at the lower rate are the events', not the load's: the limit goes back", 0,
			[]second{{good: 40, over: 60, mixed: true}, {good: 40, over: 60, mixed: true}, {good: 16, over: 24, mixed: true},
				{good: 16, over: 24, mixed: true}, {good: 40, over: 60, mixed: true}},
			[]float64{0, 36, 36, 0, 0}},
		{"a backend that delivers nothing is down, the breaker's business: the limit stays", 0,
			[]second{{good: 40, over: 5}, {good: 40, over: 5}, {good: 36}, {good: 36}, {over: 36}, {over: 36}, {good: 36}, {good: 36}},
			[]float64{0, 36, 36, 36, 36, 36, 36, 40}},
		{"an outage that begins as the limit falls undoes the fall, even if the backend is back for the trial", 0,
			[]second{{good: 40, over: 5}, {good: 40, over: 5}, {over: 36}, {good: 40}, {good: 40}},
			[]float64{0, 36, 36, 0, 0}},
		{"500s and refused connections are no overload", 0,
			[]second{{good: 70, other: 30, mixed: true}, {other: 100}, {good: 10, other: 90}},
			[]float64{0, 0, 0}},
		{"a second that does not use the limit does not raise it", 0,
			[]second{{good: 20, over: 2}, {good: 20, over: 2}, {good: 18}, {good: 18}, {good: 5}, {good: 5}},
			[]float64{0, 18, 18, 18, 18, 18}},
		{"deliveries that take far longer than they did are overload: the limit falls, and stays when they are quick again at the lower rate", 0,
			[]second{{good: 40}, {good: 40, latency: 400 * time.Millisecond}, {good: 36}, {good: 36}, {good: 36}, {good: 36}},
			[]float64{0, 0, 35.9, 35.9, 35.9, 39.9}},
		{"deliveries that stay slow at the lower rate are the backend's new pace: the limit goes back", 0,
			[]second{{good: 40}, {good: 40, latency: 400 * time.Millisecond}, {good: 36, latency: 400 * time.Millisecond},
				{good: 36, latency: 400 * time.Millisecond}, {good: 40, latency: 400 * time.Millisecond}},
			[]float64{0, 0, 35.9, 35.9, 0}},
		{"a fast backend's jitter is no overload", 0,
			[]second{{good: 40, latency: 2 * time.Millisecond}, {good: 40, latency: 50 * time.Millisecond}, {good: 40, latency: 90 * time.Millisecond}},
			[]float64{0, 0, 0}},
		{"the configured rate is a ceiling growth never passes", 20,
			[]second{{good: 19, over: 1}, {good: 19, over: 1}, {good: 17}, {good: 17}, {good: 17}, {good: 19}, {good: 20}, {good: 20}},
			[]float64{0, 17.1, 17.1, 17.1, 19, 20, 20, 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLimit(tc.ceiling)
			got := play(&l, t0, tc.seconds)
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("limit after each second %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestAFlakyBackendLearnsABaselineAndOnlyOverloadAboveItCuts(t *testing.T) {
	t.Parallel()
	l := newLimit(0)
	t0 := time.Unix(1_700_000_000, 0)
	// 60 % of answers are 503 at any rate: the trial says so.
	play(&l, t0, []second{{good: 40, over: 60, mixed: true}, {good: 40, over: 60, mixed: true}, {good: 16, over: 24, mixed: true}, {good: 16, over: 24, mixed: true}})
	if l.learned() || l.baseline < 0.55 || l.baseline > 0.65 {
		t.Fatalf("after the trial: rate %g, baseline %.2f; want no limit and a baseline of 0.6", l.rate, l.baseline)
	}
	// The same share again is no overload; a far larger one is.
	play(&l, t0.Add(4*time.Second), []second{{good: 40, over: 60, mixed: true}, {good: 38, over: 62, mixed: true}})
	if l.learned() {
		t.Fatalf("the baseline share cut the limit to %g", l.rate)
	}
	play(&l, t0.Add(6*time.Second), []second{{good: 10, over: 90, mixed: true}, {good: 10, over: 90, mixed: true}})
	if !l.learned() {
		t.Fatal("90 % 503s over a baseline of 60 % did not cut the limit")
	}
}

func TestABreakerThatOpensTeachesWhatTheBackendDeliveredBefore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ceiling float64
		down    time.Duration
		goodput float64
		want    float64
	}{
		{"the goodput before the outage, if more than the start", 0, 10 * time.Second, 40, 40},
		{"at least the start", 0, 10 * time.Second, 1.7, limitStart},
		{"none if the backend never delivered and was down briefly", 0, 10 * time.Second, 0, noLimit},
		{"the start if the backend never delivered and was down long", 0, coldAfter, 0, limitStart},
		{"nothing under a configured rate: the backend takes it at once", 20, time.Hour, 1.7, noLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLimit(tc.ceiling)
			l.restart(time.Unix(0, 0), tc.down, tc.goodput)
			if l.rate != tc.want {
				t.Fatalf("limit %g, want %g", l.rate, tc.want)
			}
		})
	}
}

func TestTheFirstOverloadAfterARestartEndsTheClimb(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	l := newLimit(0)
	l.restart(t0, time.Minute, 0)
	// Slow start from limitStart: 10, 20, 40, 80. The backend takes
	// 50 a second; the first second above it ends the climb at once,
	// where two seconds of overload would be needed otherwise, at 90 %
	// of what the backend delivered (more than half of 80).
	got := play(&l, t0, []second{{good: 10}, {good: 20}, {good: 40}, {good: 50, over: 30}, {good: 45}})
	want := []float64{20, 40, 80, 45, 45}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("limit by second %v, want %v", got, want)
		}
	}
	if l.trial {
		t.Fatal("the climb's end started a trial: the backend has just delivered at the lower rate")
	}
}

func TestAFewAnswersThatHalveTheirShareDoNotConfirmACut(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	l := newLimit(0)
	// Right after an outage, every released event fails its own next
	// attempt or two: two seconds of 503s with a few deliveries look like a
	// backend that takes 2 a second. At the lower rate the share halves
	// in a handful of answers, as the events reach their passing attempt:
	// the cut is undone, and that share becomes the baseline.
	got := play(&l, t0, []second{{good: 2, over: 104, mixed: true}, {good: 3, over: 6, mixed: true},
		{good: 1, over: 1, mixed: true}, {good: 1, over: 1, mixed: true}, {good: 1, over: 1, mixed: true}, {good: 2}})
	if got[1] == 0 {
		t.Fatalf("limit by second %v: the two seconds did not cut it", got)
	}
	if l.learned() || l.baseline < 0.3 {
		t.Fatalf("limit by second %v, baseline %.2f: want the cut undone and a baseline", got, l.baseline)
	}
}

// A short outage fits in two of the limit's seconds: the one it begins in
// (deliveries, then 503s) and the one it ends in (503s, then deliveries).
// An attempt sent before the backend came back whose 503 is read after
// the first delivery belongs to the outage: it is no overload, and the
// limit learns nothing from it.
func TestAnOutageShorterThanTwoSecondsIsNoOverload(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := newLimit(150)
	// 40 a second, each attempt 5 ms long: 8 delivered in the first
	// 200 ms, then a second of 503s.
	ms := 10
	for ; ms < 200; ms += 25 {
		l.ended(at(ms-5), at(ms), answerGood, 8)
	}
	for ; ms < 1200; ms += 25 {
		l.ended(at(ms-5), at(ms), answerOverload, float64(max(0, 1000-ms))/1000*8)
	}
	// Back at 1.2 s. An attempt sent at 1.19 s, answered 503 while the
	// backend was still down, is read after the first delivery.
	l.ended(at(1201), at(1205), answerGood, 1)
	l.ended(at(1190), at(1206), answerOverload, 1)
	for ms = 1210; ms < 3000; ms += 25 {
		l.ended(at(ms-5), at(ms), answerGood, float64(min(40, (ms-1200)*40/1000)))
	}
	if l.learned() {
		t.Fatalf("an outage of a second taken for overload: the limit fell to %.1f/s, from no limit", l.rate)
	}
}
