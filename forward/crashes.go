package forward

import (
	"context"
	"errors"
	"fmt"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/store"
)

// MaxCrashes is how many times jethook may die while it evaluates a
// destination's filter on one webhook: the next time the webhook comes
// back it is dead-lettered with reason "crashed" instead of evaluated
// again, so that one webhook cannot keep a process in a crash loop
// (docs/durability.md, "A webhook that crashes jethook").
const MaxCrashes = 3

// match evaluates the destination's filter on the webhook held in h,
// marking the evaluation in the store (store.BeginWork) for as long as it
// runs. dead is true when the webhook was dead-lettered instead, because
// MaxCrashes earlier evaluations never ended.
func (d *destination) match(ctx context.Context, h held, e *store.Envelope) (ok, dead bool, err error) {
	route, dest := d.route.Name, d.dest.Name
	crashes, werr := d.f.Store.BeginWork(route, dest, h.seq, d.f.Now())
	if werr != nil {
		// Evaluate anyway: the guard is a safety net, not a gate.
		d.eventLog(e, h.n).Warn("filter evaluation not guarded against crashes", "err", werr)
	} else {
		defer d.f.Store.EndWork(route, dest, h.seq)
	}
	if crashes >= MaxCrashes {
		reason := fmt.Sprintf("jethook died %d times while filtering this event", crashes)
		o := Outcome{Kind: Permanent, Err: errors.New(reason), Reason: reason, Unsent: true}
		d.deadLetter(ctx, h, e, o, "crashed", d.eventLog(e, h.n))
		return false, true, nil
	}
	ok, err = d.filter.f.Match(&filter.Event{Route: e.Route, Method: e.Method, Header: e.Header, Body: e.Body})
	return ok, false, err
}
