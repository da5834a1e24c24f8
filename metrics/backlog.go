package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BacklogRow is one destination's consumer as the store sees it.
type BacklogRow struct {
	Route, Destination string
	// Pending are messages the destination has not been sent yet
	// (the consumer's NumPending).
	Pending uint64
	// AckPending are messages sent and not yet settled: attempts in flight
	// plus messages waiting in backoff (the consumer's NumAckPending).
	AckPending uint64
	// Parked are messages waiting for a later attempt outside the
	// consumer; they count as in backoff.
	Parked uint64
	// BlockedKeys are the ordering keys whose head keeps failing, the
	// oldest of them failing since BlockedSince (zero when none);
	// WaitingBehindKeys are the events queued behind a key's head.
	BlockedKeys       uint64
	BlockedSince      time.Time
	WaitingBehindKeys uint64
	// Oldest is when the oldest webhook the destination has not settled
	// yet was stored; zero when none waits. OldestKnown is false when it
	// was not read: its gauge is then left out.
	Oldest      time.Time
	OldestKnown bool
}

// Backlog reads every destination's backlog. It runs at scrape time, so it
// must be cheap: a request to the store for the consumers, not one per
// destination, and a bounded time for what each destination needs more.
type Backlog func(ctx context.Context) ([]BacklogRow, error)

// backlogTimeout bounds one Backlog call during a scrape.
const backlogTimeout = 2 * time.Second

// SetBacklog sets (or, on reload, replaces) what the pending and in-backoff
// gauges are read from. Until it is called they are absent.
func (m *Metrics) SetBacklog(b Backlog) {
	if m == nil {
		return
	}
	m.backlog.source.Store(&b)
}

// backlogCollector makes jethook_pending and jethook_in_backoff at scrape
// time. In backoff is AckPending less the attempts in flight, plus the
// parked messages.
type backlogCollector struct {
	source    atomic.Pointer[Backlog]
	pending   *prometheus.Desc
	inBackoff *prometheus.Desc
	blocked   *prometheus.Desc
	oldest    *prometheus.Desc
	waiting   *prometheus.Desc
	age       *prometheus.Desc
	dests     *dests // their attempts in flight
}

func newBacklogCollector(ds *dests) *backlogCollector {
	rd := []string{"route", "destination"}
	return &backlogCollector{
		pending: prometheus.NewDesc(namespace+"_pending",
			"Messages stored for a destination and not yet sent to it (read at scrape time).", rd, nil),
		inBackoff: prometheus.NewDesc(namespace+"_in_backoff",
			"Messages that failed at a destination and wait for their next attempt (read at scrape time).", rd, nil),
		blocked: prometheus.NewDesc(namespace+"_blocked_keys",
			"Ordering keys of a destination with order: whose head event keeps failing, holding back the events of its key (read at scrape time).", rd, nil),
		oldest: prometheus.NewDesc(namespace+"_blocked_key_oldest_seconds",
			"How long the longest-blocked ordering key's head has been failing; 0 when none is (read at scrape time).", rd, nil),
		waiting: prometheus.NewDesc(namespace+"_waiting_behind_key",
			"Events waiting behind an earlier event of their ordering key (read at scrape time).", rd, nil),
		age: prometheus.NewDesc(namespace+"_oldest_pending_seconds",
			"How long the oldest webhook a destination has not settled yet (delivered or dead-lettered), in backoff and parked ones included, has waited since it was stored; 0 when none waits (read at scrape time).", rd, nil),
		dests: ds,
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.inBackoff
	ch <- c.blocked
	ch <- c.oldest
	ch <- c.waiting
	ch <- c.age
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	rows, err := (*src)(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	for _, r := range rows {
		backoff := int64(r.AckPending) - c.dests.inFlight(r.Route, r.Destination) + int64(r.Parked)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(r.Pending), r.Route, r.Destination)
		ch <- prometheus.MustNewConstMetric(c.inBackoff, prometheus.GaugeValue, float64(max(backoff, 0)), r.Route, r.Destination)
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(r.BlockedKeys), r.Route, r.Destination)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, ageOf(r.BlockedSince), r.Route, r.Destination)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(r.WaitingBehindKeys), r.Route, r.Destination)
		if r.OldestKnown {
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, ageOf(r.Oldest), r.Route, r.Destination)
		}
	}
}

// ageOf is the seconds since t; 0 for a zero t.
func ageOf(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return max(0, time.Since(t).Seconds())
}
