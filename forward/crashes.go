package forward

import (
	"context"
	"errors"
	"fmt"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/store"
)

// MaxCrashes is how many times jethook may die while it evaluates a
// destination's filter, or runs its transform, on one webhook: the next
// time the webhook comes back that work does not run again and the
// webhook is dead-lettered, so that one webhook cannot keep a process in a
// crash loop (docs/durability.md, "A webhook that crashes jethook").
const MaxCrashes = 3

// guard marks the work that is about to run on webhook seq of the
// destination (store.BeginWork), and returns how many earlier runs of it
// never ended: the times jethook died during it. end clears the mark once
// the work is over; the caller must not run the work, nor call end, when
// crashes reaches MaxCrashes, so that the mark stays and a webhook whose
// dead letter could not be stored is dead-lettered again when it comes
// back.
func (d *destination) guard(e *store.Envelope, seq uint64, n int, doing string) (end func(), crashes int) {
	route, dest := d.route.Name, d.dest.Name
	crashes, err := d.f.Store.BeginWork(route, dest, seq, d.f.Now())
	if err != nil {
		// Run anyway: the guard is a safety net, not a gate.
		d.eventLog(e, n).Warn("work on the event not guarded against crashes", "work", doing, "err", err)
		return func() {}, 0
	}
	return func() { d.f.Store.EndWork(route, dest, seq) }, crashes
}

// crashedText is the error of a webhook whose work killed jethook
// MaxCrashes times.
func crashedText(crashes int, doing string) string {
	return fmt.Sprintf("jethook died %d times while %s this event", crashes, doing)
}

// match evaluates the destination's filter on the webhook held in h, under
// guard. dead is true when the webhook was dead-lettered instead, with
// reason "crashed".
func (d *destination) match(ctx context.Context, h held, e *store.Envelope) (ok, dead bool, err error) {
	end, crashes := d.guard(e, h.seq, h.n, "filtering")
	if crashes >= MaxCrashes {
		reason := crashedText(crashes, "filtering")
		o := Outcome{Kind: Permanent, Err: errors.New(reason), Reason: reason, Unsent: true}
		d.deadLetter(ctx, h, e, o, "crashed", d.eventLog(e, h.n))
		return false, true, nil
	}
	defer end()
	ok, err = d.filter.f.Match(&filter.Event{Route: e.Route, Method: e.Method, Header: e.Header, Body: e.Body, JSON: e.JSON})
	return ok, false, err
}
