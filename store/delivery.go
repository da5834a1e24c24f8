package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumerInfo reads route's destination's consumer; nil if it has none.
func (s *Store) consumerInfo(ctx context.Context, route, destination string) (*jetstream.ConsumerInfo, error) {
	name := ConsumerName(route, destination)
	c, err := s.main.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %s: %w", ErrUnavailable, name, err)
	}
	return c.CachedInfo(), nil
}

// Oldest returns when the oldest message b's destination has not settled
// yet (delivered or dead-lettered) was stored, from b as Backlogs read it;
// zero if none. For a parked webhook, and a due record, that is when the
// webhook was stored; among parked ones it reads the longest parked,
// which is the oldest but for webhooks parked again after a later
// attempt. It costs a request to the store for the parked ones and up to
// three for the consumer's, none for a destination with nothing waiting.
func (s *Store) Oldest(ctx context.Context, b Backlog) (time.Time, error) {
	var oldest time.Time
	older := func(t time.Time) {
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	route, destination := b.Route, b.Destination
	if b.Parked > 0 {
		m, err := s.parked.GetMsg(ctx, 1, jetstream.WithGetMsgSubject("parked."+route+"."+destination+".*"))
		switch {
		case err == nil:
			p, _ := parkedFrom(m.Header)
			older(p.FirstSeen)
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return time.Time{}, fmt.Errorf("%w: oldest parked webhook: %w", ErrUnavailable, err)
		}
	}
	if b.Pending == 0 && b.AckPending == 0 {
		return oldest, nil
	}
	// The first message past the ack floor on the consumer's subjects is
	// unsettled, or the floor would have moved past it.
	for _, subj := range []string{"webhooks." + route + ".*", "replay." + route + "." + destination + ".*", "due." + route + "." + destination + ".*"} {
		m, err := s.main.GetMsg(ctx, b.ackFloor+1, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: oldest message: %w", ErrUnavailable, err)
		}
		if p, err := parkedFrom(m.Header); err == nil {
			older(p.FirstSeen) // a due record: when its webhook was stored
		} else {
			older(m.Time)
		}
	}
	return oldest, nil
}

// Delivery states of one event at one destination.
const (
	StateDelivered    = "delivered"     // settled by the forwarder and not dead-lettered
	StatePending      = "pending"       // stored, not attempted yet
	StateInFlight     = "in_flight"     // an attempt is under way: its consumer delivered it and no outcome is logged since
	StateInBackoff    = "in_backoff"    // an attempt failed and it waits for its next one (in its consumer, or parked)
	StateDeadLettered = "dead_lettered" // in WEBHOOKS_DLQ
	StateFiltered     = "filtered"      // the destination's filter did not match; acked, never attempted
	StateUnknown      = "unknown"       // the destination has no consumer
	// StateAttempting is not a state a delivery is in: a search for it
	// matches both StateInFlight and StateInBackoff ([StateMatches]).
	StateAttempting = "attempting"
)

// StateMatches reports whether a delivery in state is in the state want,
// where want may be StateAttempting.
func StateMatches(want, state string) bool {
	if want == StateAttempting {
		return state == StateInFlight || state == StateInBackoff
	}
	return state == want
}

// waitsInBackoff reports whether the latest logged attempt a, at now,
// left its event waiting for a next attempt that is not due yet.
func waitsInBackoff(a *Attempt, now time.Time) bool {
	return a != nil && a.Outcome == "transient" && a.Next > 0 && now.Before(a.Time.Add(a.Next))
}

// Delivery is where one event stands at one destination.
type Delivery struct {
	Destination string
	State       string
	// DeadLetter is set when State is StateDeadLettered.
	DeadLetter *DeadLetter
	// Replay is the latest replay of the event to this destination, if any.
	Replay Replayed
}

// lastAttempt is the latest logged attempt of e to route's destination;
// nil if none is logged.
func (s *Store) lastAttempt(ctx context.Context, e *Envelope, destination string) (*Attempt, error) {
	as, err := s.Attempts(ctx, e.EventID)
	if err != nil {
		return nil, err
	}
	for i := len(as) - 1; i >= 0; i-- {
		if as[i].Route == e.Route && as[i].Destination == destination {
			return &as[i], nil
		}
	}
	return nil, nil
}

// Delivery says where the event stored at seq in WEBHOOKS stands at route's
// destination, following its latest replay if there is one. The consumer
// keeps no per-message history: "delivered" means the consumer's ack floor
// has passed the message, no dead letter names it and its latest logged
// attempt did not park it for a later one. Above the floor, the latest
// logged attempt tells: delivered, filtered, parked or waiting for its
// next attempt (in backoff), else in flight.
func (s *Store) Delivery(ctx context.Context, e *Envelope, seq uint64, destination string) (Delivery, error) {
	for _, t := range s.tails[:2] {
		if _, err := t.sync(ctx, time.Second); err != nil {
			return Delivery{Destination: destination}, err
		}
	}
	info, err := s.consumerInfo(ctx, e.Route, destination)
	if err != nil {
		return Delivery{Destination: destination}, err
	}
	return s.delivery(ctx, e, seq, destination, info)
}

// delivery is Delivery with the destination's consumer as info read it.
func (s *Store) delivery(ctx context.Context, e *Envelope, seq uint64, destination string, info *jetstream.ConsumerInfo) (Delivery, error) {
	d := Delivery{Destination: destination}
	dl, err := s.lastDeadLetter(ctx, e.Route, destination, e.EventID)
	if err != nil {
		return d, err
	}
	if d.Replay, err = s.LastReplay(ctx, e.Route, destination, e.EventID); err != nil {
		return d, err
	}
	target := seq
	if d.Replay.Exists && d.Replay.Seq > target {
		target = d.Replay.Seq
	}
	if dl != nil && dl.Seq == target {
		d.State, d.DeadLetter = StateDeadLettered, dl
		return d, nil
	}
	switch {
	case info == nil:
		d.State = StateUnknown
	case target <= info.AckFloor.Stream:
		// Acked: delivered, parked for a later attempt (park.go), or
		// filtered out, which the attempt log tells apart.
		d.State = StateDelivered
		if last, err := s.lastAttempt(ctx, e, destination); err != nil {
			return d, err
		} else if last != nil && last.Outcome == "transient" && last.Next > 0 {
			d.State = StateInBackoff // parked (park.go), even once its next attempt is due
		} else if last != nil && last.Outcome == OutcomeFiltered {
			d.State = StateFiltered
		}
	case target > info.Delivered.Stream:
		d.State = StatePending
	default:
		// Delivered to the consumer, above its ack floor: an attempt
		// under way or waiting for its next, or settled out of order (the
		// floor waits for an older message: an attempt of another event,
		// or an ordered destination's failing head), which the attempt
		// log tells, from an attempt made since target was stored.
		last, err := s.lastAttempt(ctx, e, destination)
		if err != nil {
			return d, err
		}
		if last != nil && target != seq && last.Time.Before(d.Replay.At) {
			last = nil // the event's own attempts, before its replay
		}
		switch {
		case last != nil && last.Outcome == "delivered":
			d.State = StateDelivered
		case last != nil && last.Outcome == OutcomeFiltered:
			d.State = StateFiltered
		case last != nil && last.Parked, waitsInBackoff(last, time.Now()):
			d.State = StateInBackoff
		default:
			d.State = StateInFlight
		}
	}
	return d, nil
}
