package forward

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jethook/jethook/policy"
)

// Scenario is a backend's trouble to replay against a retry policy and a
// destination's limits, in virtual time: an outage, a capacity above which
// it answers 503, events that always fail, events that fail a few times.
type Scenario struct {
	Arrival     float64       // events per second arriving steadily, from time 0
	Events      int           // how many arrive steadily
	Burst       int           // events that all arrive at time 0, on top
	OutageStart time.Duration // when the backend goes down
	Outage      time.Duration // how long it stays down (every request fails)
	// OutageStatus is what the backend answers while down: 0 refuses
	// connections (the process is gone), another status answers it (a
	// proxy in front of it, or a backend that is up but failing).
	OutageStatus int
	Capacity     float64       // requests per second the backend can answer; more get 503; 0 is unlimited
	Poison       float64       // share of events that always get 500 (a handler bug), spread evenly
	Flaky        int           // each event gets 503 on its first 0…Flaky attempts, spread evenly
	FailFirst    int           // every event gets 503 on its first FailFirst attempts
	FailShare    float64       // each attempt gets 503 with this probability (a hash of the event and attempt decides)
	Latency      time.Duration // how long one request takes (default 50ms)
	Step         time.Duration // simulation resolution (default 1ms: the token bucket needs it to pace a limit of tens per second)
	Horizon      time.Duration // stop here even if events are left (default 7 days)
}

// SimResult is what the backend saw and what the events went through.
type SimResult struct {
	Requests     int           // attempts made
	Wasted       int           // attempts that failed (outage, overload, poison or flaky events)
	InOutage     int           // attempts started while the backend was down
	Delivered    int           // events delivered
	DeadLettered int           // events that ran out of attempts or age
	Left         int           // events still waiting at the horizon
	PeakRPS      int           // most requests started in any one second
	PeakAfter    int           // most requests started in any one second after the outage
	Drain        time.Duration // from the end of the outage until every event that arrived before it was settled
	P95          time.Duration // 95th percentile of arrival-to-delivery time
	P99          time.Duration // 99th percentile of arrival-to-delivery time
	MaxDelay     time.Duration // longest arrival-to-delivery time
	Healthy      int           // events that are not poison
	Limit        float64       // the learned limit at the end, requests per second; 0 if none
	PerSecond    []int         // requests started in each second, for charts
}

type simEvent struct {
	arrive  time.Duration
	ready   time.Duration
	attempt int
	key     string
	poison  bool
	flaky   int // attempts that fail before one can succeed
}

type readyHeap []*simEvent

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].ready != h[j].ready {
		return h[i].ready < h[j].ready
	}
	return h[i].arrive < h[j].arrive // a release makes many due at once: oldest first
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*simEvent)) }
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type flight struct {
	ev  *simEvent
	end time.Duration
	o   Outcome
}

// answer is what the simulated backend answers ev's attempt at now, given
// how many requests it has taken in the current second.
func (s Scenario) answer(ev *simEvent, now time.Duration, inSecond int) Outcome {
	switch {
	case now >= s.OutageStart && now < s.OutageStart+s.Outage && s.OutageStatus != 0:
		return Outcome{Kind: Transient, Status: s.OutageStatus, Reason: fmt.Sprintf("status %d", s.OutageStatus)}
	case now >= s.OutageStart && now < s.OutageStart+s.Outage:
		return Outcome{Kind: Transient, Reason: "network error"}
	case s.Capacity > 0 && float64(inSecond) > s.Capacity:
		return Outcome{Kind: Transient, Status: 503, Reason: "status 503"}
	case ev.poison:
		return Outcome{Kind: Transient, Status: 500, Reason: "status 500"}
	case ev.attempt <= ev.flaky || ev.attempt <= s.FailFirst || s.FailShare > 0 && chance(ev.key, ev.attempt) < s.FailShare:
		return Outcome{Kind: Transient, Status: 503, Reason: "status 503"}
	}
	return Outcome{Kind: Delivered, Status: 200, Reason: "delivered"}
}

// Simulate replays s against retry r and destination d with the code the
// forwarder runs: policy.Retry for delays and exhaustion, and the same
// gate for concurrency, rate, breaker and learned limit — on a virtual clock.
func Simulate(s Scenario, r policy.Retry, d policy.Destination) SimResult {
	if s.Latency <= 0 {
		s.Latency = 50 * time.Millisecond
	}
	if s.Step <= 0 {
		s.Step = time.Millisecond
	}
	if s.Horizon <= 0 {
		s.Horizon = 7 * 24 * time.Hour
	}
	var arrivals []time.Duration
	for range s.Burst {
		arrivals = append(arrivals, 0)
	}
	for i := range s.Events {
		arrivals = append(arrivals, time.Duration(float64(i)/s.Arrival*float64(time.Second)))
	}
	slices.Sort(arrivals)

	base := time.Unix(0, 0)
	var now time.Duration
	g := newGate(d, func() time.Time { return base.Add(now) })
	var (
		res      SimResult
		ready    readyHeap
		inflight []flight
		next     int // next arrival
		delays   []time.Duration
		window   = time.Duration(-1)
		inWindow int
		drained  time.Duration // when the last event from before the recovery was settled
		probing  *simEvent     // a failed probe's event, to probe again
	)
	outageEnd := s.OutageStart + s.Outage
	pending := func() bool { return next < len(arrivals) || ready.Len() > 0 || len(inflight) > 0 || probing != nil }
	for pending() && now <= s.Horizon {
		for next < len(arrivals) && arrivals[next] <= now {
			ev := &simEvent{arrive: arrivals[next], ready: arrivals[next], key: fmt.Sprintf("sim-%d/%s", next, d.Name),
				poison: int(float64(next+1)*s.Poison) > int(float64(next)*s.Poison), flaky: next % (s.Flaky + 1)}
			if !ev.poison {
				res.Healthy++
			}
			heap.Push(&ready, ev)
			next++
		}
		// Settle attempts that ended.
		kept := inflight[:0]
		for _, f := range inflight {
			if f.end > now {
				kept = append(kept, f)
				continue
			}
			v := g.record(f.o, f.ev.attempt == 1, base.Add(f.end-s.Latency))
			if v.recovered {
				release(&ready, now)
			}
			if f.o.Kind == Delivered {
				res.Delivered++
				delays = append(delays, f.end-f.ev.arrive)
				if f.ev.arrive < outageEnd {
					drained = max(drained, f.end)
				}
				continue
			}
			delay := r.Delay(f.ev.attempt, f.ev.key)
			if v.victim {
				delay = min(delay, victimDelay(r, f.ev.key, f.ev.attempt))
			}
			if exhausted(r, f.ev.attempt, f.end-f.ev.arrive, delay, v) {
				res.DeadLettered++
				if f.ev.arrive < outageEnd {
					drained = max(drained, f.end)
				}
				continue
			}
			f.ev.ready = f.end + delay
			if v.again {
				probing = f.ev // the breaker's probe: it probes again
				continue
			}
			heap.Push(&ready, f.ev)
		}
		inflight = kept
		start := func(ev *simEvent) {
			ev.attempt++
			if w := now / time.Second; w != window {
				window, inWindow = w, 0
			}
			inWindow++
			sec := int(now / time.Second)
			for len(res.PerSecond) <= sec {
				res.PerSecond = append(res.PerSecond, 0)
			}
			res.PerSecond[sec]++
			o := s.answer(ev, now, inWindow)
			if o.Kind != Delivered {
				res.Wasted++
			}
			if now >= s.OutageStart && now < outageEnd {
				res.InOutage++
			}
			res.Requests++
			inflight = append(inflight, flight{ev: ev, end: now + s.Latency, o: o})
		}
		if probing != nil {
			switch ok, wait := g.reprobe(); {
			case ok:
				start(probing)
				probing = nil
			case wait <= 0:
				heap.Push(&ready, probing) // back to its own schedule
				probing = nil
			}
		}
		// Start what the gate admits.
		n, _, probe := g.admit(len(inflight))
		started := 0
		for ; n > 0 && ready.Len() > 0 && ready[0].ready <= now; n-- {
			if g.limiter != nil && !g.limiter.AllowN(base.Add(now), 1) {
				break
			}
			start(heap.Pop(&ready).(*simEvent))
			started++
		}
		if probe && started == 0 {
			g.unprobe()
		}
		now = nextTime(now, s.Step, arrivals, next, ready, inflight)
	}
	res.Left = ready.Len() + len(inflight) + len(arrivals) - next
	if probing != nil {
		res.Left++
	}
	for sec, c := range res.PerSecond {
		res.PeakRPS = max(res.PeakRPS, c)
		if time.Duration(sec)*time.Second >= outageEnd {
			res.PeakAfter = max(res.PeakAfter, c)
		}
	}
	if drained > outageEnd {
		res.Drain = drained - outageEnd
	}
	if len(delays) > 0 {
		slices.Sort(delays)
		res.P95 = delays[min(len(delays)-1, len(delays)*95/100)]
		res.P99 = delays[min(len(delays)-1, len(delays)*99/100)]
		res.MaxDelay = delays[len(delays)-1]
	}
	res.Limit = g.status().Limit
	return res
}

// chance is a number in [0, 1) fixed by key and attempt, so that a run
// prints the same on any machine.
func chance(key string, attempt int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#%d", key, attempt)
	x := h.Sum64() // splitmix64's finalizer: FNV alone leaves the high bits of near keys alike
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// release brings every event waiting for a retry forward to now, as the
// store's Release does for parked webhooks when a destination comes back.
func release(ready *readyHeap, now time.Duration) {
	for _, ev := range *ready {
		if ev.attempt > 0 && ev.ready > now {
			ev.ready = now
		}
	}
	heap.Init(ready)
}

// nextTime advances one step, or jumps over an idle stretch to the next
// arrival or retry.
func nextTime(now, step time.Duration, arrivals []time.Duration, next int, ready readyHeap, inflight []flight) time.Duration {
	t := now + step
	if len(inflight) > 0 {
		return t
	}
	soonest := time.Duration(-1)
	if next < len(arrivals) {
		soonest = arrivals[next]
	}
	if ready.Len() > 0 && (soonest < 0 || ready[0].ready < soonest) {
		soonest = ready[0].ready
	}
	if soonest > t {
		return soonest - soonest%step
	}
	return t
}
