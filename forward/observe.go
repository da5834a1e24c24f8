package forward

import (
	"errors"
	"net/url"
	"time"

	"github.com/jethook/jethook/store"
)

// Alerts is told what an operator should hear about through another
// channel (alert.Notifier implements it). Calls must not block.
type Alerts interface {
	// DeadLettered reports a delivery stored as a dead letter; reason is
	// "permanent" or "exhausted".
	DeadLettered(route, destination, eventID, reason string)
	// Breaker reports a destination's breaker state after each attempt.
	Breaker(route, destination string, open bool)
	// Removed reports a destination a reload stopped: removed, or
	// restarted with new settings (and a closed breaker).
	Removed(route, destination string)
}

// observe reports one classified attempt, which ended at end, to the
// metrics and the attempt log; next is the delay before the next attempt,
// 0 when there is none, and parked says whether the event waits for it
// parked in the store.
func (d *destination) observe(e *store.Envelope, stored time.Time, n int, o Outcome, latency time.Duration, end time.Time, next time.Duration, parked bool) {
	route, dest := d.route.Name, d.dest.Name
	d.metrics.Attempt(o.Kind.String(), o.Status, latency, o.Span, end)
	if o.Kind == Delivered {
		d.metrics.Delivered(end.Sub(stored), o.Span)
	}
	d.f.Store.LogAttempt(store.Attempt{
		Time: end, Route: route, Destination: dest, EventID: e.EventID, Attempt: n,
		Status: o.Status, Error: errText(o.Err), Latency: latency, Outcome: o.Kind.String(), Next: next, Parked: parked, Sent: o.Sent,
	})
	open, limit := d.gate.gauges()
	d.metrics.Breaker(open)
	d.metrics.Limit(limit)
	if d.f.Alerts != nil {
		d.f.Alerts.Breaker(route, dest, open)
	}
}

// deadLettered reports a dead letter once it is stored.
func (d *destination) deadLettered(e *store.Envelope, reason string) {
	d.f.Metrics.DeadLettered(d.route.Name, d.dest.Name, reason)
	if d.f.Alerts != nil {
		d.f.Alerts.DeadLettered(d.route.Name, d.dest.Name, e.EventID, reason)
	}
}

// errText is err's message without the request URL a *url.Error quotes:
// a destination URL may carry a token.
func errText(err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
