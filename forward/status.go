package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrUnknownDestination means no delivery loop runs for that route and
// destination.
var ErrUnknownDestination = errors.New("unknown route or destination")

// DestinationStatus is what the forwarder knows of one destination now.
type DestinationStatus struct {
	Route       string
	Destination string
	URL         string
	// InFlight counts attempts waiting for the backend's answer.
	InFlight int
	// Pull is true for a pull destination (URL is empty), and Leased
	// counts its webhooks leased to clients and not yet settled.
	Pull   bool
	Leased int
	// Paused is true while an operator has paused the destination.
	Paused bool
	// Gate holds the breaker, Retry-After pause and slow start.
	Gate GateStatus
	// LastSuccess is when the backend last accepted an attempt; zero if
	// never since the loop started.
	LastSuccess time.Time
	// LastFailure is when an attempt last failed, with its status (0 if
	// no response came) and reason, which never quotes the URL.
	LastFailure time.Time
	LastStatus  int
	LastError   string
	// Transform names the destination's transform script; empty when it
	// has none.
	Transform string
	// Ordered is true when the destination delivers in order per key
	// (`order:`).
	Ordered bool
	// DeliveredBy says, for an ordered destination that replicas share
	// (waiting records on), whether "this replica" or "another replica"
	// delivers it now; empty otherwise, or until this one knows.
	DeliveredBy string
}

// Status reports every running destination, in configuration order.
func (f *Forwarder) Status() []DestinationStatus {
	f.reg.mu.Lock()
	loops := append([]*loop(nil), f.reg.loops...)
	f.reg.mu.Unlock()
	out := make([]DestinationStatus, 0, len(loops))
	for _, l := range loops {
		d := l.d
		s := DestinationStatus{
			Route:       d.route.Name,
			Destination: d.dest.Name,
			URL:         d.dest.URL,
			InFlight:    int(d.inflight.Load()),
			Gate:        d.gate.status(),
			Ordered:     d.order != nil,
		}
		s.Paused = s.Gate.Held
		if d.transform != nil {
			s.Transform = d.transform.s.Name()
		}
		if d.owner != nil {
			s.DeliveredBy = d.owner.deliveredBy()
		}
		if d.leases != nil {
			s.Pull, s.Leased = true, d.leases.count()
		}
		d.last.mu.Lock()
		s.LastSuccess, s.LastFailure = d.last.success, d.last.failure
		s.LastStatus, s.LastError = d.last.status, d.last.err
		d.last.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// Pause stops new attempts to a destination until Resume: its consumer is
// paused in JetStream, so even a fetch already waiting gets nothing, and
// the loop stops fetching; attempts in flight finish, and messages wait in
// the consumer, so nothing is lost and no attempt is spent. The pause is
// kept in JetStream: it outlives restarts and reloads, and holds for every
// replica sharing the consumer, until Resume.
func (f *Forwarder) Pause(route, destination string) error {
	d, err := f.find(route, destination)
	if err != nil {
		return err
	}
	d.gate.hold(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Store.PauseConsumer(ctx, route, destination, true); err != nil {
		d.gate.hold(false)
		return err
	}
	return nil
}

// Resume lets a paused destination's attempts start again.
func (f *Forwarder) Resume(route, destination string) error {
	d, err := f.find(route, destination)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.Store.PauseConsumer(ctx, route, destination, false); err != nil {
		return err
	}
	d.gate.hold(false)
	d.wake()
	return nil
}

// Runs reports whether route's destination is in the running
// configuration: a removed destination's consumer, and its messages, are
// kept, but nothing delivers them.
func (f *Forwarder) Runs(route, destination string) bool {
	_, err := f.find(route, destination)
	return err == nil
}

func (f *Forwarder) find(route, destination string) (*destination, error) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	for _, l := range f.reg.loops {
		if l.d.route.Name == route && l.d.dest.Name == destination {
			return l.d, nil
		}
	}
	return nil, fmt.Errorf("%w: %s/%s", ErrUnknownDestination, route, destination)
}

// wake makes an idle loop look at its gate again.
func (d *destination) wake() {
	select {
	case d.ended <- struct{}{}:
	default:
	}
}

// lastAttempt remembers the latest success and failure of a destination.
type lastAttempt struct {
	mu      sync.Mutex
	success time.Time
	failure time.Time
	status  int
	err     string
}

func (l *lastAttempt) record(o Outcome, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.Kind == Delivered {
		l.success = at
		return
	}
	l.failure, l.status, l.err = at, o.Status, o.Reason
	if text := errText(o.Err); text != "" && o.Reason != text {
		l.err = o.Reason + ": " + text
	}
}

// carry copies what an operator and a status report need from the loop a
// reload replaces.
func (l *lastAttempt) carry(from *lastAttempt) {
	from.mu.Lock()
	defer from.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.success, l.failure, l.status, l.err = from.success, from.failure, from.status, from.err
}
