package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/jethook/jethook/store"
)

// ResendRequest is the body of POST /v1/events/{id}/resend.
type ResendRequest struct {
	// Route picks the route when the same id came in on several; empty,
	// the latest.
	Route string `json:"route,omitempty"`
	// Destination resends to one destination; empty, to every destination
	// of the route but those whose filter did not match the event.
	Destination string `json:"destination,omitempty"`
}

// What a resend did at one destination.
const (
	ResendQueued    = "queued"    // delivered (or filtered, named): queued to be delivered again now
	ResendReplayed  = "replayed"  // dead-lettered: its dead letter replayed
	ResendRetrying  = "retrying"  // in backoff: its next attempt brought forward to now
	ResendDuplicate = "duplicate" // the same resend or replay is already queued
	ResendWaiting   = "waiting"   // pending, or in flight: it is on its way; nothing done
	ResendSkipped   = "skipped"   // filtered (not named) or unknown: nothing done
)

// ResendResult is the answer of POST /v1/events/{id}/resend: per
// destination, the state the event was in and what the resend did.
type ResendResult struct {
	EventID      string          `json:"event_id"`
	Route        string          `json:"route"`
	Destinations []ResendOutcome `json:"destinations"`
}

// ResendOutcome is what a resend did at one destination.
type ResendOutcome struct {
	Destination string `json:"destination"`
	State       string `json:"state"`
	Action      string `json:"action"`
}

func (h *Handler) resend(w http.ResponseWriter, r *http.Request) {
	var req ResendRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out, err := h.Service.Resend(r.Context(), r.PathValue("id"), req)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Resend sends an event again, whatever its state, with the rules of a
// replay: at a destination where it was delivered (or, named, filtered),
// it queues a copy for that destination only, whose attempts start again
// at 1; where it was dead-lettered, it replays the dead letter; where it
// waits in backoff, it brings its next attempt forward to now, its
// attempts going on: a parked retry (store.RetryNow), or one nak'd for a
// short backoff by this jethook's forwarder (forward.Forwarder.RetryNow).
// Where the event is on its way (pending, in flight, waiting behind its
// ordering key, or a copy already queued), it does nothing. Each
// destination's outcome is logged as an operator's act, and a copy queued
// or an attempt brought forward is a "resend" span of the event's trace.
func (svc *Service) Resend(ctx context.Context, id string, req ResendRequest) (ResendResult, error) {
	svc.setup()
	e, seq, err := svc.Store.Event(ctx, id, req.Route)
	if err != nil {
		return ResendResult{}, err
	}
	var dests []string
	for _, f := range svc.Forwarder.Status() {
		if f.Route == e.Route {
			dests = append(dests, f.Destination)
		}
	}
	if req.Destination != "" {
		if !slices.Contains(dests, req.Destination) {
			return ResendResult{}, badRequest("route %q has no destination %q", e.Route, req.Destination)
		}
		dests = []string{req.Destination}
	}
	out := ResendResult{EventID: e.EventID, Route: e.Route, Destinations: []ResendOutcome{}}
	for _, dest := range dests {
		d, err := svc.Store.Delivery(ctx, e, seq, dest)
		if err == nil {
			_, err = svc.order(e, seq, dest, &d)
		}
		if err != nil {
			return out, err
		}
		o := ResendOutcome{Destination: dest, State: d.State}
		switch d.State {
		case store.StateDelivered:
			o.Action, err = svc.queue(ctx, e, seq, dest, d)
		case store.StateFiltered:
			o.Action = ResendSkipped
			if req.Destination != "" {
				o.Action, err = svc.queue(ctx, e, seq, dest, d)
			}
		case store.StateDeadLettered:
			var res store.ReplayCounts
			res, err = svc.Store.Replay(ctx, []store.DeadLetter{*d.DeadLetter})
			o.Action = ResendReplayed
			if res.Queued == 0 {
				o.Action = ResendDuplicate
			} else if err == nil {
				svc.traceReplays(ctx, []store.DeadLetter{*d.DeadLetter}, "")
			}
		case store.StateInBackoff, store.StateInFlight:
			o.Action = ResendRetrying
			if err = svc.Store.RetryNow(ctx, e.Route, dest, e.EventID); errors.Is(err, store.ErrNotParked) {
				var now bool
				if now, err = svc.Forwarder.RetryNow(e.Route, dest, e.EventID); !now && err == nil {
					o.Action = ResendWaiting
				}
			}
		case store.StatePending, StateWaiting:
			o.Action = ResendWaiting
		default:
			o.Action = ResendSkipped
		}
		if err != nil {
			return out, err
		}
		if o.Action == ResendQueued || o.Action == ResendRetrying {
			svc.traceResend(ctx, e, dest, o.Action)
		}
		svc.Logger.Info("event resent by operator", "route", e.Route, "destination", dest, "event_id", e.EventID,
			"state", o.State, "action", o.Action)
		out.Destinations = append(out.Destinations, o)
	}
	return out, nil
}

// queue queues a copy of the event for dest, once per latest replay.
func (svc *Service) queue(ctx context.Context, e *store.Envelope, seq uint64, dest string, d store.Delivery) (string, error) {
	queued, err := svc.Store.Resend(ctx, e, seq, dest, d.Replay.Seq)
	if !queued {
		return ResendDuplicate, err
	}
	return ResendQueued, err
}
