package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// DestinationStatus is one route × destination in GET /v1/status.
type DestinationStatus struct {
	Route       string `json:"route"`
	Destination string `json:"destination"`
	// URL is the destination's scheme, host and path: never its user
	// info or query, where credentials live (policy.RedactURL). It is
	// empty for a pull destination.
	URL string `json:"url"`
	// Pull is true for a pull destination (docs/pull.md), which clients
	// fetch from; Leased counts its webhooks leased to them and not yet
	// settled, its attempts in progress (InFlight stays 0).
	Pull   bool `json:"pull"`
	Leased int  `json:"leased"`
	// Pending counts stored messages not yet attempted.
	Pending uint64 `json:"pending"`
	// AckPending counts messages attempted and not settled: InFlight (or
	// Leased) plus InBackoff (JetStream counts nak-delayed messages as ack
	// pending).
	AckPending int `json:"ack_pending"`
	InFlight   int `json:"in_flight"`
	InBackoff  int `json:"in_backoff"`
	// DeadLetters counts the destination's dead letters still retained.
	DeadLetters uint64 `json:"dead_letters"`
	// Breaker is closed, open or half-open. BreakerFailures counts the
	// attempts of the last 10 s that said the backend is down, out of
	// BreakerAttempts.
	Breaker          string     `json:"breaker"`
	BreakerFailures  int        `json:"breaker_failures"`
	BreakerAttempts  int        `json:"breaker_attempts"`
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
	// Paused is true while an operator has paused the destination.
	Paused bool `json:"paused"`
	// RetryAfterUntil ends a pause the backend asked for with Retry-After.
	RetryAfterUntil *time.Time `json:"retry_after_until,omitempty"`
	// LimitPerSecond is the learned limit, absent until one is learned;
	// SlowStart is true while it holds the destination under its rate.
	LimitPerSecond float64 `json:"limit_per_second,omitempty"`
	SlowStart      bool    `json:"slow_start"`
	// OldestPendingAt is when the oldest unsettled message was stored.
	OldestPendingAt         *time.Time `json:"oldest_pending_at,omitempty"`
	OldestPendingAgeSeconds float64    `json:"oldest_pending_age_seconds,omitempty"`
	LastSuccessAt           *time.Time `json:"last_success_at,omitempty"`
	LastFailureAt           *time.Time `json:"last_failure_at,omitempty"`
	LastStatus              int        `json:"last_status,omitempty"`
	LastError               string     `json:"last_error,omitempty"`
	// BlockedKeys counts, for a destination with order:, the keys whose
	// head event keeps failing, the oldest failing since OldestBlockedAt;
	// WaitingBehindKeys counts the events waiting behind a key's head.
	BlockedKeys       int        `json:"blocked_keys,omitempty"`
	OldestBlockedAt   *time.Time `json:"oldest_blocked_at,omitempty"`
	WaitingBehindKeys int        `json:"waiting_behind_keys,omitempty"`
	// OldestBlockedKeys are up to 10 of the blocked keys, the longest
	// failing first.
	OldestBlockedKeys []BlockedKey `json:"oldest_blocked_keys,omitempty"`
	// DeliveredBy says, for an ordered destination that replicas share,
	// whether "this replica" or "another replica" delivers it now: one
	// replica at a time does. The blocked keys are those of this replica.
	DeliveredBy string `json:"delivered_by,omitempty"`
	// Error is set when the store could not say more about this destination.
	Error string `json:"error,omitempty"`
}

// BlockedKey is an ordering key whose head event keeps failing. Key comes
// from the head's payload; it is empty when the head cannot be read.
type BlockedKey struct {
	Key          string     `json:"key,omitempty"`
	KeyHash      string     `json:"key_hash"`
	HeadEventID  string     `json:"head_event_id"`
	HeadSeq      uint64     `json:"head_seq"`
	FailingSince *time.Time `json:"failing_since"`
	Waiting      int        `json:"waiting"` // events queued behind the head
}

// blockedShown is how many blocked keys a destination's status lists.
const blockedShown = 10

// Status is the answer of GET /v1/status.
type Status struct {
	Destinations []DestinationStatus `json:"destinations"`
	// CatchUp lists the routes with a catch_up block (docs/catch-up.md).
	CatchUp []catchup.Status `json:"catch_up,omitempty"`
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	out, err := h.Service.Status(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Status reports every route × destination: what the forwarder knows of it
// now and what the store holds for it.
func (svc *Service) Status(ctx context.Context) (Status, error) {
	svc.setup()
	now := svc.Now()
	out := Status{Destinations: []DestinationStatus{}, CatchUp: svc.CatchUp.Status()}
	backlogs, err := svc.Store.Backlogs(ctx)
	if err != nil {
		return out, err
	}
	for _, f := range svc.Forwarder.Status() {
		s := DestinationStatus{
			Route:            f.Route,
			Destination:      f.Destination,
			URL:              policy.RedactURL(f.URL),
			InFlight:         f.InFlight,
			Pull:             f.Pull,
			Leased:           f.Leased,
			Breaker:          string(f.Gate.Breaker),
			BreakerFailures:  f.Gate.Failures,
			BreakerAttempts:  f.Gate.Attempts,
			LimitPerSecond:   f.Gate.Limit,
			Paused:           f.Paused,
			RetryAfterUntil:  at(f.Gate.PausedUntil),
			BreakerOpenUntil: at(f.Gate.OpenUntil),
			SlowStart:        f.Gate.SlowStart,
			LastSuccessAt:    at(f.LastSuccess),
			LastFailureAt:    at(f.LastFailure),
			LastStatus:       f.LastStatus,
			LastError:        f.LastError,
			DeliveredBy:      f.DeliveredBy,
		}
		if err := svc.backlog(ctx, &s, backlogs, now); err != nil {
			s.Error = err.Error()
		}
		out.Destinations = append(out.Destinations, s)
	}
	return out, nil
}

// backlog fills in what the store knows of s's destination.
func (svc *Service) backlog(ctx context.Context, s *DestinationStatus, backlogs []store.Backlog, now time.Time) error {
	var oldest time.Time
	for _, b := range backlogs {
		if b.Route == s.Route && b.Destination == s.Destination {
			s.Pending, s.AckPending = b.Pending, int(b.AckPending)
			s.InBackoff = max(0, s.AckPending-s.InFlight-s.Leased) + int(b.Parked)
			s.BlockedKeys, s.OldestBlockedAt, s.WaitingBehindKeys = b.Blocked.Keys, at(b.Blocked.Oldest), b.Blocked.Waiting
			var err error
			if oldest, err = svc.Store.Oldest(ctx, b); err != nil {
				return err
			}
		}
	}
	if s.BlockedKeys > 0 {
		if err := svc.blockedKeys(ctx, s); err != nil {
			return err
		}
	}
	n, err := svc.Store.DeadLetterCount(ctx, store.DeadLetterQuery{Route: s.Route, Destination: s.Destination})
	if err != nil {
		return err
	}
	s.DeadLetters = n
	if !oldest.IsZero() {
		s.OldestPendingAt = at(oldest)
		s.OldestPendingAgeSeconds = max(0, now.Sub(oldest).Seconds())
	}
	return nil
}

// blockedKeys lists the oldest of s's blocked keys, each with its value
// read from its head event.
func (svc *Service) blockedKeys(ctx context.Context, s *DestinationStatus) error {
	bs, err := svc.Store.OldestBlocked(s.Route, s.Destination, blockedShown)
	if err != nil {
		return err
	}
	for _, b := range bs {
		k := BlockedKey{KeyHash: b.Key.String(), HeadEventID: b.HeadID, HeadSeq: b.HeadSeq, FailingSince: at(b.Failing), Waiting: b.Waiting}
		if e, _, err := svc.Store.Event(ctx, b.HeadID, s.Route); err == nil {
			k.Key, _, _ = svc.Forwarder.KeyOf(s.Route, s.Destination, e)
		}
		s.OldestBlockedKeys = append(s.OldestBlockedKeys, k)
	}
	return nil
}
