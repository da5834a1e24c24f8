package forward

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// destFilter is a destination's compiled filter and the kinds of run-time
// error it has logged (at most len(filter.Kinds)).
type destFilter struct {
	f *filter.Filter

	mu     sync.Mutex
	logged map[string]bool
}

// newFilter compiles d's filter; nil when it has none.
func newFilter(d policy.Destination) (*destFilter, error) {
	if d.Filter == "" {
		return nil, nil
	}
	f, err := filter.Compile(d.Filter)
	if err != nil {
		return nil, err
	}
	return &destFilter{f: f, logged: make(map[string]bool, len(filter.Kinds))}, nil
}

// firstOf reports whether kind is logged for the first time.
func (df *destFilter) firstOf(kind string) bool {
	df.mu.Lock()
	defer df.mu.Unlock()
	if df.logged[kind] {
		return false
	}
	df.logged[kind] = true
	return true
}

// filtered checks the webhook held in h against the destination's filter.
// When it does not match, the webhook is logged as filtered and acked, and
// filtered returns true: no attempt is made and nothing counts as a
// failure. A due record (a parked retry) and a replay are never checked:
// the first was checked before its first attempt, and an operator asked
// for the second. A webhook that comes back to the consumer (a short
// retry, or a redelivery after a crash) is checked again, which gives the
// same answer unless a reload changed the filter meanwhile. A webhook
// whose evaluation jethook died during MaxCrashes times is dead-lettered
// instead (crashes.go), and filtered returns true as well.
func (d *destination) filtered(ctx context.Context, h held, e *store.Envelope) bool {
	if d.filter == nil || h.due || store.IsReplay(h.m) {
		return false
	}
	ok, dead, err := d.match(ctx, h, e)
	if dead {
		return true
	}
	if ok {
		return false
	}
	route, dest := d.route.Name, d.dest.Name
	a := store.Attempt{Time: d.f.Now(), Route: route, Destination: dest, EventID: e.EventID, Attempt: h.n, Outcome: store.OutcomeFiltered}
	var fe *filter.Error
	if errors.As(err, &fe) {
		a.Error = fe.Error()
		d.f.Metrics.FilterFailed(route, dest, fe.Kind)
		if d.filter.firstOf(fe.Kind) {
			d.eventLog(e, h.n).Warn("filter failed on an event, which counts as no match; logged once per kind",
				"kind", fe.Kind)
		}
	}
	d.f.Store.LogAttempt(a)
	d.f.Metrics.Filtered(route, dest)
	d.traceFiltered(ctx, e, kindOf(fe))
	// If this was the breaker's probe, the next message probes instead;
	// its rate token goes to the next message too.
	d.gate.unprobe()
	d.gate.refund()
	if d.log.Enabled(ctx, slog.LevelDebug) {
		d.eventLog(e, h.n).Debug("filtered")
	}
	if err := h.m.Ack(); err != nil {
		d.eventLog(e, h.n).Warn("ack failed; the event comes back and is checked again", "err", err)
	}
	return true
}

// kindOf is fe's kind, or "" when the filter did not fail.
func kindOf(fe *filter.Error) string {
	if fe == nil {
		return ""
	}
	return fe.Kind
}
