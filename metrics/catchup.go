package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// catchUp holds the jethook_catch_up_* metrics (docs/catch-up.md).
type catchUp struct {
	recovered, requested, errors, calls *prometheus.CounterVec
	lastSuccess                         *prometheus.GaugeVec
}

func newCatchUp(reg prometheus.Registerer) *catchUp {
	rp := []string{"route", "provider"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "catch_up", Name: name, Help: help}, rp)
	}
	c := &catchUp{
		recovered: counter("recovered_total", "Missed events catch-up brought into the store: Stripe events stored, GitHub deliveries redelivered and then stored."),
		requested: counter("redeliveries_requested_total", "Redeliveries catch-up asked the provider for (GitHub)."),
		errors:    counter("errors_total", "Catch-up passes that ended with an error (provider unreachable, refused, rate limited too long, or the store refusing writes)."),
		calls:     counter("api_calls_total", "Requests catch-up made to the provider's API, rate-limited ones and retries included."),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "catch_up", Name: "last_success_timestamp_seconds",
			Help: "When the route's last catch-up pass completed without error (Unix seconds)."}, rp),
	}
	reg.MustRegister(c.recovered, c.requested, c.errors, c.calls, c.lastSuccess)
	return c
}

// CatchUpPass records one catch-up pass of route's provider: how many
// events it recovered and redeliveries it requested, and whether it
// failed.
func (m *Metrics) CatchUpPass(route, provider string, recovered, requested int, err error, at time.Time) {
	if m == nil {
		return
	}
	m.catchUp.recovered.WithLabelValues(route, provider).Add(float64(recovered))
	m.catchUp.requested.WithLabelValues(route, provider).Add(float64(requested))
	if err != nil {
		m.catchUp.errors.WithLabelValues(route, provider).Inc()
		return
	}
	m.catchUp.lastSuccess.WithLabelValues(route, provider).Set(float64(at.Unix()))
}

// CatchUpCall counts one request to route's provider API.
func (m *Metrics) CatchUpCall(route, provider string) {
	if m == nil {
		return
	}
	m.catchUp.calls.WithLabelValues(route, provider).Inc()
}

// CatchUpRemoved drops the series of a route whose catch-up was removed
// by a reload.
func (m *Metrics) CatchUpRemoved(route, provider string) {
	if m == nil {
		return
	}
	for _, v := range []*prometheus.CounterVec{m.catchUp.recovered, m.catchUp.requested, m.catchUp.errors, m.catchUp.calls} {
		v.DeleteLabelValues(route, provider)
	}
	m.catchUp.lastSuccess.DeleteLabelValues(route, provider)
}
