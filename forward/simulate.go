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
	m := newSim(s, r, d)
	for m.pending() && m.now <= m.s.Horizon {
		m.arrive()
		m.settle()
		m.reprobe()
		m.admit()
		m.now = nextTime(m.now, m.s.Step, m.arrivals, m.next, m.ready, m.inflight)
	}
	return m.result()
}

// sim is one run of Simulate: the scenario, the virtual clock, the events
// in each state, and the counts so far. Each step of the clock runs its
// phases in order: arrive, settle, reprobe, admit.
type sim struct {
	s         Scenario
	r         policy.Retry
	d         policy.Destination
	g         *gate
	base      time.Time
	now       time.Duration
	outageEnd time.Duration

	arrivals []time.Duration
	next     int // next arrival
	ready    readyHeap
	inflight []flight
	probing  *simEvent // a failed probe's event, to probe again

	res      SimResult
	delays   []time.Duration
	window   time.Duration
	inWindow int
	drained  time.Duration // when the last event from before the recovery was settled
}

// newSim fills in the scenario's defaults and lays out its arrivals: the
// burst at once, then Events at the Arrival rate.
func newSim(s Scenario, r policy.Retry, d policy.Destination) *sim {
	if s.Latency <= 0 {
		s.Latency = 50 * time.Millisecond
	}
	if s.Step <= 0 {
		s.Step = time.Millisecond
	}
	if s.Horizon <= 0 {
		s.Horizon = 7 * 24 * time.Hour
	}
	m := &sim{s: s, r: r, d: d, base: time.Unix(0, 0), window: -1, outageEnd: s.OutageStart + s.Outage}
	for range s.Burst {
		m.arrivals = append(m.arrivals, 0)
	}
	for i := range s.Events {
		m.arrivals = append(m.arrivals, time.Duration(float64(i)/s.Arrival*float64(time.Second)))
	}
	slices.Sort(m.arrivals)
	m.g = newGate(d, func() time.Time { return m.base.Add(m.now) })
	return m
}

// pending reports whether any event has yet to arrive or be settled.
func (m *sim) pending() bool {
	return m.next < len(m.arrivals) || m.ready.Len() > 0 || len(m.inflight) > 0 || m.probing != nil
}

// arrive makes the events whose time has come ready for a first attempt.
func (m *sim) arrive() {
	for m.next < len(m.arrivals) && m.arrivals[m.next] <= m.now {
		ev := &simEvent{arrive: m.arrivals[m.next], ready: m.arrivals[m.next], key: fmt.Sprintf("sim-%d/%s", m.next, m.d.Name),
			poison: int(float64(m.next+1)*m.s.Poison) > int(float64(m.next)*m.s.Poison), flaky: m.next % (m.s.Flaky + 1)}
		if !ev.poison {
			m.res.Healthy++
		}
		heap.Push(&m.ready, ev)
		m.next++
	}
}

// settle ends the attempts whose answer has come: each is delivered,
// dead-lettered, or scheduled for its retry, and the gate hears of it.
func (m *sim) settle() {
	kept := m.inflight[:0]
	for _, f := range m.inflight {
		if f.end > m.now {
			kept = append(kept, f)
			continue
		}
		v := m.g.record(f.o, f.ev.attempt == 1, m.base.Add(f.end-m.s.Latency), m.g.now())
		if v.recovered {
			release(&m.ready, m.now)
		}
		if f.o.Kind == Delivered {
			m.res.Delivered++
			m.delays = append(m.delays, f.end-f.ev.arrive)
			if f.ev.arrive < m.outageEnd {
				m.drained = max(m.drained, f.end)
			}
			continue
		}
		delay := m.r.Delay(f.ev.attempt, f.ev.key)
		if v.victim {
			delay = min(delay, victimDelay(m.r, f.ev.key, f.ev.attempt))
		}
		if exhausted(m.r, f.ev.attempt, f.end-f.ev.arrive, delay, v) {
			m.res.DeadLettered++
			if f.ev.arrive < m.outageEnd {
				m.drained = max(m.drained, f.end)
			}
			continue
		}
		f.ev.ready = f.end + delay
		if v.again {
			m.probing = f.ev // the breaker's probe: it probes again
			continue
		}
		heap.Push(&m.ready, f.ev)
	}
	m.inflight = kept
}

// reprobe sends the breaker's failed probe again when the gate lets it,
// or back to its own schedule when the gate no longer waits for it.
func (m *sim) reprobe() {
	if m.probing == nil {
		return
	}
	switch ok, wait := m.g.reprobe(); {
	case ok:
		m.start(m.probing)
		m.probing = nil
	case wait <= 0:
		heap.Push(&m.ready, m.probing) // back to its own schedule
		m.probing = nil
	}
}

// admit starts the ready events the gate admits.
func (m *sim) admit() {
	n, _, probe := m.g.admit(len(m.inflight))
	started := 0
	for ; n > 0 && m.ready.Len() > 0 && m.ready[0].ready <= m.now; n-- {
		if m.g.limiter != nil && !m.g.limiter.AllowN(m.base.Add(m.now), 1) {
			break
		}
		m.start(heap.Pop(&m.ready).(*simEvent))
		started++
	}
	if probe && started == 0 {
		m.g.unprobe()
	}
}

// start makes an attempt of ev now and counts it.
func (m *sim) start(ev *simEvent) {
	ev.attempt++
	if w := m.now / time.Second; w != m.window {
		m.window, m.inWindow = w, 0
	}
	m.inWindow++
	sec := int(m.now / time.Second)
	for len(m.res.PerSecond) <= sec {
		m.res.PerSecond = append(m.res.PerSecond, 0)
	}
	m.res.PerSecond[sec]++
	o := m.s.answer(ev, m.now, m.inWindow)
	if o.Kind != Delivered {
		m.res.Wasted++
	}
	if m.now >= m.s.OutageStart && m.now < m.outageEnd {
		m.res.InOutage++
	}
	m.res.Requests++
	m.inflight = append(m.inflight, flight{ev: ev, end: m.now + m.s.Latency, o: o})
}

// result adds up the run: what is left, the peaks, the drain and the
// delays' percentiles.
func (m *sim) result() SimResult {
	res := m.res
	res.Left = m.ready.Len() + len(m.inflight) + len(m.arrivals) - m.next
	if m.probing != nil {
		res.Left++
	}
	for sec, c := range res.PerSecond {
		res.PeakRPS = max(res.PeakRPS, c)
		if time.Duration(sec)*time.Second >= m.outageEnd {
			res.PeakAfter = max(res.PeakAfter, c)
		}
	}
	if m.drained > m.outageEnd {
		res.Drain = m.drained - m.outageEnd
	}
	if len(m.delays) > 0 {
		slices.Sort(m.delays)
		res.P95 = m.delays[min(len(m.delays)-1, len(m.delays)*95/100)]
		res.P99 = m.delays[min(len(m.delays)-1, len(m.delays)*99/100)]
		res.MaxDelay = m.delays[len(m.delays)-1]
	}
	res.Limit = m.g.status().Limit
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
