package forward

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/store"
)

// owner keeps an ordered destination's lease (store.Ownership) for its
// loop: only the replica that holds it fetches, so the events of a key are
// attempted one at a time across replicas. A reload's new loop keeps the
// same lease.
type owner struct {
	d     *destination
	lease *store.Ownership
	kept  time.Time    // when Keep last ran
	state atomic.Int32 // what Keep last said: 0 nothing yet, here or elsewhere
	fault string       // the last error logged, to log each cause once
}

const (
	here      = 1 // this replica holds the lease
	elsewhere = 2 // another does
)

// deliveredBy says which replica delivers the destination, for Status:
// "this replica", "another replica", or "" while that cannot be known
// (before the first Keep, or while the lease bucket is not open).
func (o *owner) deliveredBy() string {
	switch o.state.Load() {
	case here:
		return "this replica"
	case elsewhere:
		return "another replica"
	}
	return ""
}

func newOwner(d *destination, lease *store.Ownership) *owner {
	if lease == nil {
		return nil
	}
	return &owner{d: d, lease: lease}
}

// every is how often the lease is renewed.
func (o *owner) every() time.Duration { return o.lease.Every() }

// own reports whether the loop may fetch now. It renews the lease every
// every(), or tries to take it while another replica holds it, and then
// waits. Once it is taken, nothing is fetched until the owner before has
// nothing in flight (its consumer has no message out, or takeoverWait
// has passed since) and its records are read (store.TakeOver).
func (o *owner) own(ctx context.Context) bool {
	d := o.d
	if time.Since(o.kept) >= o.every() || !o.lease.Held() {
		o.kept = time.Now()
		held, err := o.lease.Keep(ctx)
		switch {
		case err == nil:
			o.fault = ""
		case ctx.Err() == nil && err.Error() != o.fault:
			o.fault = err.Error()
			d.log.Warn("the lease of this ordered destination cannot be kept; it is not delivered here while it is not", "err", err)
		}
		state := int32(elsewhere)
		switch {
		case held:
			state = here
		case !o.lease.Ready():
			state = 0 // no one can be known to hold it yet
		}
		if o.state.Swap(state) != state && state != 0 {
			d.log.Info("ordered destination: delivered by " + o.deliveredBy())
		}
	}
	if !o.lease.Held() {
		d.idle(ctx, o.every())
		return false
	}
	taken := o.lease.Taken()
	if taken.IsZero() {
		return true
	}
	if wait := time.Until(taken.Add(o.takeoverWait())); wait > 0 && !o.quiet(ctx) {
		d.idle(ctx, min(wait, o.every()))
		return false
	}
	n, err := o.lease.TakeOver(ctx, d.f.Now())
	if err != nil {
		d.log.Warn("the ordered destination's waiting events cannot be read yet; nothing is delivered until they are", "err", err)
		d.idle(ctx, o.every())
		return false
	}
	d.expectReturns() // what the owner before was sent and never attempted is back by now
	if n > 0 {
		d.log.Warn("the events that waited behind their ordering keys go back behind them here, in the order they were stored",
			"events", n, "after", d.headlessGrace().String())
	}
	return true
}

// quiet reports whether the destination's consumer has no message out
// for an attempt: the owner before has nothing in flight, and what it
// held is in the records already.
func (o *owner) quiet(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := o.d.cons.Info(ctx)
	return err == nil && info.NumAckPending == 0
}

// takeoverWait is how long after taking the lease this replica waits,
// unless the consumer has no message out, before it reads the records and
// fetches. The owner before may have given the lease up (a stop, a reload)
// a moment ago, or lost it while its attempts ran: what its last fetch
// brought came within FetchWait; each attempt ended within the timeout,
// and its message went back to the consumer at once, after a short
// backoff (ParkAfter at most), after its ack wait, or was parked. By then,
// all of it is in the consumer or in a record.
func (o *owner) takeoverWait() time.Duration {
	d := o.d
	return d.f.FetchWait + d.dest.Timeout + ackMargin + max(d.f.ParkAfter, settleRetry)
}

// release gives the lease up, so that another replica takes the
// destination at once.
func (o *owner) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := o.lease.Release(ctx); err != nil {
		o.d.log.Warn("the lease of this ordered destination cannot be given up; another replica takes it once it runs out", "err", err)
	}
}
