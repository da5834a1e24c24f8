package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Destination records what the attempts to one route's destination do.
// It looks each of its series up once, on its first use, and keeps it:
// a lookup by label values (hashing them, a map under a lock) on every
// call cost, over the half-dozen calls of an attempt, about a microsecond
// of each delivery. Get one from Metrics.Destination and give it back
// with Remove. A nil *Destination records nothing.
type Destination struct {
	m                  *Metrics
	route, destination string
	refs               int      // holders (Metrics.Destination less Remove); under m.destMu
	spacing            *spacing // of its exemplars

	breakerOpen    series[prometheus.Gauge]
	limit          series[prometheus.Gauge]
	delivered      series[prometheus.Counter]
	attemptSeconds series[prometheus.Observer]
	deliveryAge    series[prometheus.Observer]
	// attempts holds the attempts_total series by outcome (attemptOutcomes)
	// and status class (classOf: error, 1xx to 5xx).
	attempts [len(attemptOutcomes)][6]series[prometheus.Counter]

	flight atomic.Int64 // attempts in flight: jethook_in_flight, and for in_backoff
	ring   *minuteRing  // its attempts per minute; under m.minutes.mu
}

// attemptOutcomes are the outcomes of an attempt whose attempts_total
// series a Destination keeps.
var attemptOutcomes = [...]string{"delivered", "transient", "permanent"}

// series is one series of a vector, looked up on first use and kept until
// reset.
type series[T any] struct{ p atomic.Pointer[T] }

// labeled is a metric vector: prometheus.CounterVec, GaugeVec and
// HistogramVec.
type labeled[T any] interface {
	WithLabelValues(lvs ...string) T
}

// get returns the series of vec with the labels route and destination,
// looking it up the first time.
func (s *series[T]) get(vec labeled[T], route, destination string) T {
	if p := s.p.Load(); p != nil {
		return *p
	}
	return s.lookup(vec, []string{route, destination})
}

// lookup looks the series of vec with labels lvs up and keeps it. The
// label values are a slice only here, where it is made once per series.
func (s *series[T]) lookup(vec labeled[T], lvs []string) T {
	v := vec.WithLabelValues(lvs...)
	s.p.Store(&v)
	return v
}

// reset makes the next get look the series up again: its vector deleted it.
func (s *series[T]) reset() { s.p.Store(nil) }

// dests holds the Destinations in use, one per route × destination. As a
// collector it makes jethook_in_flight of each at scrape time from its
// count, which the old and the new destination of a reload share: a gauge
// of its own, which Remove took from the new one while its attempts were
// under way, would count their ends below zero.
type dests struct {
	mu         sync.Mutex
	by         map[destKey]*Destination
	flightDesc *prometheus.Desc
}

func (ds *dests) Describe(ch chan<- *prometheus.Desc) { ch <- ds.flightDesc }

func (ds *dests) Collect(ch chan<- prometheus.Metric) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for k, d := range ds.by {
		ch <- prometheus.MustNewConstMetric(ds.flightDesc, prometheus.GaugeValue, float64(d.flight.Load()), k.route, k.destination)
	}
}

// Destination returns the metrics of route's destination. Each call must
// be matched by a call of Remove on the result when the destination stops.
// A reload starts a changed destination anew before it stops the old one:
// both hold the same Destination, so that the old one's Remove does not
// take the new one's series from under it (see Remove).
func (m *Metrics) Destination(route, destination string) *Destination {
	if m == nil {
		return nil
	}
	k := destKey{route, destination}
	m.dests.mu.Lock()
	defer m.dests.mu.Unlock()
	d := m.dests.by[k]
	if d == nil {
		d = &Destination{m: m, route: route, destination: destination, spacing: &spacing{
			attempt: make([]atomic.Int64, len(attemptBuckets)+1),
			age:     make([]atomic.Int64, len(ageBuckets)+1),
		}}
		m.dests.by[k] = d
	}
	d.refs++
	return d
}

// Remove ends the destination's breaker and learned limit gauges when a
// reload stops it (removed, or restarted with new settings): a breaker
// open at that moment must not stay 1 for good. Its counters and
// histograms stay, as counters do in Prometheus. When a destination
// restarted with new settings still holds d, those gauges come back as it
// sets them, and its in-flight gauge stays; otherwise d, with that gauge
// and the spacing of its exemplars, goes, so that destinations removed
// over many reloads leave nothing behind.
func (d *Destination) Remove() {
	if d == nil {
		return
	}
	m := d.m
	m.dests.mu.Lock()
	defer m.dests.mu.Unlock()
	m.breakerOpen.DeleteLabelValues(d.route, d.destination)
	m.limit.DeleteLabelValues(d.route, d.destination)
	d.breakerOpen.reset()
	d.limit.reset()
	if d.refs--; d.refs <= 0 {
		delete(m.dests.by, destKey{d.route, d.destination})
	}
}

// AttemptStarted and AttemptEnded bracket one attempt, for the in-flight
// gauge (and to tell in-flight messages from those waiting in backoff).
func (d *Destination) AttemptStarted() {
	if d == nil {
		return
	}
	d.flight.Add(1)
}

// AttemptEnded: see AttemptStarted.
func (d *Destination) AttemptEnded() {
	if d == nil {
		return
	}
	d.flight.Add(-1)
}

// Attempt records one classified attempt, which ended at end: outcome is
// "delivered", "transient" or "permanent"; status is the HTTP status, 0
// when no response arrived; span is the attempt's span, for the exemplar
// (empty with tracing off).
func (d *Destination) Attempt(outcome string, status int, took time.Duration, span trace.SpanContext, end time.Time) {
	if d == nil {
		return
	}
	d.attemptsOf(outcome, status).Inc()
	var next []atomic.Int64
	if span.IsSampled() {
		next = d.spacing.attempt
	}
	observe(d.attemptSeconds.get(d.m.attemptSeconds, d.route, d.destination), attemptBuckets, next, took.Seconds(), span)
	d.m.minutes.add(d, outcome == "delivered", end)
}

// attemptsOf returns the attempts_total series of outcome and status.
func (d *Destination) attemptsOf(outcome string, status int) prometheus.Counter {
	for i, o := range attemptOutcomes {
		if o == outcome {
			s := &d.attempts[i][classOf(status)]
			if p := s.p.Load(); p != nil {
				return *p
			}
			return s.lookup(d.m.attempts, []string{d.route, d.destination, outcome, Class(status)})
		}
	}
	return d.m.attempts.WithLabelValues(d.route, d.destination, outcome, Class(status))
}

// Delivered counts a delivery that succeeded; age is how long ago the event
// was stored; span is the delivering attempt's, as for Attempt.
func (d *Destination) Delivered(age time.Duration, span trace.SpanContext) {
	if d == nil {
		return
	}
	d.delivered.get(d.m.delivered, d.route, d.destination).Inc()
	var next []atomic.Int64
	if span.IsSampled() {
		next = d.spacing.age
	}
	observe(d.deliveryAge.get(d.m.deliveryAge, d.route, d.destination), ageBuckets, next, max(age, 0).Seconds(), span)
}

// Breaker sets the destination's breaker gauge.
func (d *Destination) Breaker(open bool) {
	if d == nil {
		return
	}
	v := 0.0
	if open {
		v = 1
	}
	d.breakerOpen.get(d.m.breakerOpen, d.route, d.destination).Set(v)
}

// Limit sets the destination's learned limit gauge, in requests per
// second; 0 (none learned) leaves it absent.
func (d *Destination) Limit(perSecond float64) {
	if d == nil || perSecond <= 0 {
		return
	}
	d.limit.get(d.m.limit, d.route, d.destination).Set(perSecond)
}

// inFlight returns the attempts in flight to route's destination.
func (ds *dests) inFlight(route, destination string) int64 {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d := ds.by[destKey{route, destination}]; d != nil {
		return d.flight.Load()
	}
	return 0
}
