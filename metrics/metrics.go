// Package metrics holds jethook's Prometheus metrics: what ingress received,
// rejected and stored, what each attempt to each destination did, dead
// letters, breaker state, the backlog, and the store's health and room;
// and, for the dashboard, each destination's attempts per minute over the
// last hour (LastHour).
// Route and destination are labels; event ids never are. A nil *Metrics
// records nothing, so callers and tests need no setup.
package metrics

import (
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

const namespace = "jethook"

// Metrics records jethook's metrics in one registry. Create it with New.
type Metrics struct {
	gatherer prometheus.Gatherer

	received        *prometheus.CounterVec
	rejected        *prometheus.CounterVec
	stored          *prometheus.CounterVec
	duplicates      *prometheus.CounterVec
	publishSeconds  prometheus.Histogram
	attempts        *prometheus.CounterVec
	delivered       *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	filtered        *prometheus.CounterVec
	filterFailed    *prometheus.CounterVec
	transformFailed *prometheus.CounterVec
	queued          *prometheus.CounterVec
	unordered       *prometheus.CounterVec
	attemptSeconds  *prometheus.HistogramVec
	deliveryAge     *prometheus.HistogramVec
	breakerOpen     *prometheus.GaugeVec
	limit           *prometheus.GaugeVec

	backlog *backlogCollector
	store   *storeCollector
	minutes *minutes
	catchUp *catchUp

	// publishNext holds, per bucket of publishSeconds, when (Unix ns) it
	// may next take an exemplar (exemplarEvery); each Destination holds
	// the same for its attemptSeconds and deliveryAge series.
	publishNext []atomic.Int64
	dests       dests // the destinations' metrics (destination.go)
}

// The buckets of the latency histograms, which observe needs to space
// their exemplars bucket by bucket.
var (
	publishBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	attemptBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	ageBuckets     = []float64{.01, .05, .1, .5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 72 * 3600}
)

// New creates the metrics and registers them with reg. A nil reg gets a new
// registry of its own. Handler serves reg when it is also a Gatherer (a
// *prometheus.Registry is), else the default gatherer.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		g = prometheus.DefaultGatherer
	}
	rd := []string{"route", "destination"}
	m := &Metrics{
		gatherer: g,
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "received_total",
			Help: "Webhook requests that arrived on a route, whatever came of them."}, []string{"route"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "rejected_total",
			Help: "Webhook requests answered with an error, by reason (route is empty for no_route)."}, []string{"route", "reason"}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "stored_total",
			Help: "Webhooks written to the store (duplicates not included)."}, []string{"route"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "duplicates_total",
			Help: "Webhooks whose event id the store already had within its dedup window; answered 200, not stored again."}, []string{"route"}),
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "store_publish_seconds",
			Help:    "Time from publish to the store's ack (or failure), as ingress waits for it.",
			Buckets: publishBuckets}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "attempts_total",
			Help: "HTTP attempts to destinations, by outcome (delivered, transient, permanent) and status class (2xx, 3xx, 4xx, 5xx, error)."},
			[]string{"route", "destination", "outcome", "class"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "delivered_total",
			Help: "Deliveries that ended with a 2xx from the destination."}, rd),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "dead_lettered_total",
			Help: "Deliveries given up and stored as dead letters, by reason (permanent, exhausted, crashed, max_blocked)."},
			[]string{"route", "destination", "reason"}),
		filtered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "filtered_total",
			Help: "Webhooks a destination's filter did not match (run-time errors included): acked, not attempted."}, rd),
		filterFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "filter_errors_total",
			Help: "Webhooks on which a destination's filter failed at run time (counted as no match), by kind of error."},
			[]string{"route", "destination", "kind"}),
		transformFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "transform_errors_total",
			Help: "Deliveries a destination's transform failed on (each dead-lettered), by kind of error."},
			[]string{"route", "destination", "kind"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "attempt_seconds",
			Help:    "Duration of one HTTP attempt to a destination, until the response headers (or the error).",
			Buckets: attemptBuckets}, rd),
		deliveryAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "delivery_age_seconds",
			Help:    "End-to-end age of an event when delivered: from being stored to the destination's 2xx, retries included.",
			Buckets: ageBuckets}, rd),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "breaker_open",
			Help: "1 while a destination's circuit breaker is open or half-open, else 0."}, rd),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "learned_limit",
			Help: "A destination's learned limit in requests per second; absent until one is learned."}, rd),
	}
	m.queued = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "order_queued_total",
		Help: "Events of a destination with order: that waited behind an earlier event of their key."}, rd)
	m.unordered = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "order_key_errors_total",
		Help: "Events of a destination with order: whose key failed or was empty, delivered unordered, by kind of error."},
		[]string{"route", "destination", "kind"})
	reg.MustRegister(m.filtered, m.filterFailed, m.transformFailed, m.queued, m.unordered)
	m.publishNext = make([]atomic.Int64, len(publishBuckets)+1)
	m.dests.by = make(map[destKey]*Destination)
	m.dests.flightDesc = prometheus.NewDesc(namespace+"_in_flight", "Attempts to a destination in progress now.", rd, nil)
	m.backlog = newBacklogCollector(&m.dests)
	m.store = newStoreCollector()
	m.minutes = newMinutes()
	m.catchUp = newCatchUp(reg)
	reg.MustRegister(m.received, m.rejected, m.stored, m.duplicates, m.publishSeconds, m.attempts,
		m.delivered, m.deadLettered, m.attemptSeconds, m.deliveryAge, m.breakerOpen, m.limit, &m.dests, m.backlog, m.store)
	return m
}

// Handler serves the metrics in the Prometheus text format, or in
// OpenMetrics, with the histograms' exemplars, to a scraper that asks for
// it (Prometheus does). A scrape that cannot read the backlog still serves
// every other metric.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

// exemplarEvery spaces the exemplars of each bucket of each histogram
// series. Making one costs about ten allocations, near a microsecond,
// which on every webhook and every attempt was about 1 % of their CPU;
// Prometheus keeps one per bucket and scrape, so ten a second per bucket
// serve as well, and a rare slow bucket still gets the first that falls
// in it.
const exemplarEvery = 100 * time.Millisecond

// destKey is a destination of a route.
type destKey struct{ route, destination string }

// spacing holds, per bucket of a destination's attemptSeconds and
// deliveryAge series, when (Unix ns) it may next take an exemplar.
type spacing struct{ attempt, age []atomic.Int64 }

// observe records v in the series o of a histogram with the given buckets,
// with span's trace id as its exemplar when span is sampled and v's
// bucket, whose next exemplar time next holds, has not had one for
// exemplarEvery, so that a latency bucket links to a trace the tracing
// backend holds. With tracing off span is empty and v is recorded alone;
// next may then be nil.
func observe(o prometheus.Observer, buckets []float64, next []atomic.Int64, v float64, span trace.SpanContext) {
	if span.IsSampled() && exemplarDue(&next[sort.SearchFloat64s(buckets, v)]) {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": span.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}

// exemplarDue reports whether a bucket whose next exemplar time next
// holds may take an exemplar now, and if so makes the next one wait
// exemplarEvery.
func exemplarDue(next *atomic.Int64) bool {
	now, due := time.Now().UnixNano(), next.Load()
	return now >= due && next.CompareAndSwap(due, now+int64(exemplarEvery))
}

// Received counts a request that arrived on route.
func (m *Metrics) Received(route string) {
	if m == nil {
		return
	}
	m.received.WithLabelValues(route).Inc()
}

// Rejected counts a request answered with an error; reason is ingress's
// stable error code (no_route, bad_signature, store_unavailable, ...).
func (m *Metrics) Rejected(route, reason string) {
	if m == nil {
		return
	}
	m.rejected.WithLabelValues(route, reason).Inc()
}

// Published records one publish to the store: how long it took and, when
// it succeeded, whether the webhook was new or a duplicate. span is the
// ingress span's, for the exemplar (empty with tracing off).
func (m *Metrics) Published(route string, took time.Duration, duplicate bool, err error, span trace.SpanContext) {
	if m == nil {
		return
	}
	observe(m.publishSeconds, publishBuckets, m.publishNext, took.Seconds(), span)
	switch {
	case err != nil:
	case duplicate:
		m.duplicates.WithLabelValues(route).Inc()
	default:
		m.stored.WithLabelValues(route).Inc()
	}
}

// DeadLettered counts a stored dead letter; reason is "permanent" or
// "exhausted".
func (m *Metrics) DeadLettered(route, destination, reason string) {
	if m == nil {
		return
	}
	m.deadLettered.WithLabelValues(route, destination, reason).Inc()
}

// Filtered counts a webhook a destination's filter did not match.
func (m *Metrics) Filtered(route, destination string) {
	if m == nil {
		return
	}
	m.filtered.WithLabelValues(route, destination).Inc()
}

// FilterFailed counts a filter that failed at run time; kind is one of
// filter.Kinds.
func (m *Metrics) FilterFailed(route, destination, kind string) {
	if m == nil {
		return
	}
	m.filterFailed.WithLabelValues(route, destination, kind).Inc()
}

// TransformFailed counts a delivery a destination's transform failed on;
// kind is one of transform.Kinds.
func (m *Metrics) TransformFailed(route, destination, kind string) {
	if m == nil {
		return
	}
	m.transformFailed.WithLabelValues(route, destination, kind).Inc()
}

// Queued counts an event that waits behind an earlier event of its
// ordering key.
func (m *Metrics) Queued(route, destination string) {
	if m == nil {
		return
	}
	m.queued.WithLabelValues(route, destination).Inc()
}

// Unordered counts an event delivered unordered because its ordering key
// failed; kind is one of filter.KeyKinds.
func (m *Metrics) Unordered(route, destination, kind string) {
	if m == nil {
		return
	}
	m.unordered.WithLabelValues(route, destination, kind).Inc()
}

// Class is the status class label of an HTTP status: "2xx" to "5xx", or
// "error" when no response arrived.
func Class(status int) string {
	c := classOf(status)
	if c == 0 {
		return "error"
	}
	return strconv.Itoa(c) + "xx"
}

// classOf is Class as a number: 1 to 5, or 0 for "error".
func classOf(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}
