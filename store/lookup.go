package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound means the stream holds no such event (never received, or
// older than the retention).
var ErrNotFound = errors.New("not found")

// Event finds a stored webhook by its event id through the index. Ids are
// unique per route, so route picks the route; empty, it finds the latest
// webhook with that id on any route. It returns the envelope and its
// stream sequence.
func (s *Store) Event(ctx context.Context, eventID, route string) (*Envelope, uint64, error) {
	if route != "" && !validToken(route) {
		return nil, 0, ErrNotFound // no route has such a name
	}
	en, ok, err := s.idx.latest(eventID, kindEvent, route, "", time.Time{})
	if err == nil && !ok {
		// Stored a moment ago and not indexed yet?
		if ok, err = s.tails[0].sync(ctx, time.Second); ok {
			en, ok, err = s.idx.latest(eventID, kindEvent, route, "", time.Time{})
		}
	}
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, ErrNotFound
	}
	m, err := s.main.GetMsg(ctx, en.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, ErrNotFound // past the retention; the index forgets it soon
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: event lookup: %w", ErrUnavailable, err)
	}
	e, err := decodeEnvelope(m.Subject, m.Header, m.Data)
	if err != nil {
		return nil, 0, err
	}
	if e.EventID != eventID || e.Route != en.Route {
		return nil, 0, ErrNotFound // the index is older than the stream
	}
	return e, m.Sequence, nil
}

// validToken reports whether s can stand as one subject token as it is:
// route names are [A-Za-z0-9_-]+.
func validToken(s string) bool {
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return s != ""
}
