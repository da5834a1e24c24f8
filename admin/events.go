package admin

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/jethook/jethook/store"
)

// Event is the answer of GET /v1/events/{id}: when the event came in and
// where it stands at each destination of its route.
type Event struct {
	EventID      string             `json:"event_id"`
	Route        string             `json:"route"`
	Seq          uint64             `json:"seq"`
	ReceivedAt   *time.Time         `json:"received_at,omitempty"`
	Method       string             `json:"method"`
	RemoteAddr   string             `json:"remote_addr"`
	Size         int                `json:"size"`
	CaughtUp     string             `json:"caught_up,omitempty"` // the provider catch-up fetched it from; empty if received
	Destinations []EventDestination `json:"destinations"`
}

// EventDestination is one destination's view of an event. State is
// delivered, pending (not attempted yet), in_flight (an attempt under
// way), in_backoff (waiting for its next attempt), waiting (behind an earlier event of its ordering
// key: see Order), dead_lettered, filtered (the destination's filter did
// not match: never attempted), or unknown (no consumer).
type EventDestination struct {
	Destination string      `json:"destination"`
	State       string      `json:"state"`
	Order       *EventOrder `json:"order,omitempty"`
	DeadLetter  *DeadLetter `json:"dead_letter,omitempty"`
	Replay      *Replay     `json:"replay,omitempty"`
	// Attempts come from the attempt log, oldest first.
	Attempts []Attempt `json:"attempts"`
	Error    string    `json:"error,omitempty"`
	// Transform names the destination's transform script, empty when it
	// has none: POST /v1/events/{id}/preview shows the request it makes.
	Transform string `json:"transform,omitempty"`
}

// StateWaiting is the state of an event queued behind an earlier event of
// its ordering key (docs/ordering.md): its message is settled in its
// consumer, and it goes once the events before it are settled.
const StateWaiting = "waiting"

// EventOrder is where an event stands in its ordering key's queue, at a
// destination with `order:`: it holds its key (Head), or waits behind the
// event that does. Key comes from the event's payload.
type EventOrder struct {
	Key     string `json:"key"`
	KeyHash string `json:"key_hash"`
	Head    bool   `json:"head"`
	// Since is when the event became its key's head, or was queued.
	Since  *time.Time `json:"since,omitempty"`
	Ahead  int        `json:"ahead"`  // events queued before it, behind the head
	Behind int        `json:"behind"` // events queued after it
	// The head: the event that holds the key, and when its first attempt
	// failed (absent while none did).
	HeadEventID      string     `json:"head_event_id"`
	HeadSeq          uint64     `json:"head_seq"`
	HeadSince        *time.Time `json:"head_since,omitempty"`
	HeadFailingSince *time.Time `json:"head_failing_since,omitempty"`
}

// order reads where e, stored at seq, stands in its key's queue at dest
// (following d's latest replay); nil when dest is not ordered, the key
// fails on e, or e neither holds its key nor waits behind it. A waiting
// event's state becomes StateWaiting: its consumer sees it settled.
func (svc *Service) order(e *store.Envelope, seq uint64, dest string, d *store.Delivery) (*EventOrder, error) {
	value, k, ok := svc.Forwarder.KeyOf(e.Route, dest, e)
	if !ok {
		return nil, nil
	}
	if d.Replay.Exists && d.Replay.Seq > seq {
		seq = d.Replay.Seq
	}
	p, ok, err := svc.Store.PlaceOf(e.Route, dest, k, seq)
	if err != nil || !ok {
		return nil, err
	}
	if p.Waiting {
		d.State = StateWaiting
	}
	return &EventOrder{Key: value, KeyHash: k.String(), Head: p.Head, Since: at(p.Since), Ahead: p.Ahead, Behind: p.Behind,
		HeadEventID: p.HeadID, HeadSeq: p.HeadSeq, HeadSince: at(p.HeadSince), HeadFailingSince: at(p.HeadFailing)}, nil
}

// Attempt is one HTTP attempt from the attempt log.
type Attempt struct {
	At             *time.Time `json:"at,omitempty"`
	Attempt        int        `json:"attempt"`
	Outcome        string     `json:"outcome"`
	Status         int        `json:"status,omitempty"`
	Error          string     `json:"error,omitempty"`
	LatencySeconds float64    `json:"latency_seconds"`
	NextSeconds    float64    `json:"next_seconds,omitempty"`
	// Sent is what the attempt sent when the destination has a
	// transform: the body's SHA-256 and size, the script's digest and
	// what it changed.
	Sent *store.Sent `json:"sent,omitempty"`
}

// Replay is the latest replay of an event to one destination.
type Replay struct {
	Seq        uint64     `json:"seq"`
	DeadLetter uint64     `json:"dead_letter_seq"`
	At         *time.Time `json:"at,omitempty"`
}

func (h *Handler) event(w http.ResponseWriter, r *http.Request) {
	out, err := h.Service.Event(r.Context(), r.PathValue("id"), r.URL.Query().Get("route"))
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Event finds an event by its id (on route, or the latest on any route when
// route is empty) and tells where it stands at each destination of its
// route, with every logged attempt.
func (svc *Service) Event(ctx context.Context, id, route string) (Event, error) {
	svc.setup()
	e, seq, err := svc.Store.Event(ctx, id, route)
	if err != nil {
		return Event{}, err
	}
	out := Event{
		EventID:      e.EventID,
		Route:        e.Route,
		Seq:          seq,
		ReceivedAt:   at(e.ReceivedAt),
		Method:       e.Method,
		RemoteAddr:   e.RemoteAddr,
		Size:         len(e.Body),
		CaughtUp:     e.CaughtUp,
		Destinations: []EventDestination{},
	}
	// Each destination's state first, its attempts after: a state read
	// from the attempt log (filtered, waiting to retry) then always has
	// the attempt that made it among the rows, however an attempt ends
	// between the two reads.
	for _, f := range svc.Forwarder.Status() {
		if f.Route != e.Route {
			continue
		}
		ed := EventDestination{Destination: f.Destination, Attempts: []Attempt{}, Transform: f.Transform}
		d, err := svc.Store.Delivery(ctx, e, seq, f.Destination)
		if err == nil {
			ed.Order, err = svc.order(e, seq, f.Destination, &d)
		}
		if err != nil {
			ed.State, ed.Error = store.StateUnknown, err.Error()
		} else {
			ed.State = d.State
			if d.DeadLetter != nil {
				dl := summary(*d.DeadLetter)
				ed.DeadLetter = &dl
			}
			if d.Replay.Exists {
				ed.Replay = &Replay{Seq: d.Replay.Seq, DeadLetter: d.Replay.Of, At: at(d.Replay.At)}
			}
		}
		out.Destinations = append(out.Destinations, ed)
	}
	attempts, aerr := svc.Store.Attempts(ctx, e.EventID)
	for i := range out.Destinations {
		ed := &out.Destinations[i]
		for _, a := range attempts {
			if a.Route == e.Route && a.Destination == ed.Destination {
				ed.Attempts = append(ed.Attempts, Attempt{At: at(a.Time), Attempt: a.Attempt, Outcome: a.Outcome,
					Status: a.Status, Error: a.Error, LatencySeconds: a.Latency.Seconds(), NextSeconds: a.Next.Seconds(), Sent: a.Sent})
			}
		}
		if aerr != nil {
			ed.Error = cmp.Or(ed.Error, "attempt log: "+aerr.Error())
		}
	}
	return out, nil
}
