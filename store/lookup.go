package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound means the stream holds no such event (never received, or
// older than the retention).
var ErrNotFound = errors.New("not found")

// Event finds a stored webhook by its event id, without a scan: the id's
// token is the last subject token. It returns the envelope and its stream
// sequence.
func (s *Store) Event(ctx context.Context, eventID string) (*Envelope, uint64, error) {
	m, err := s.main.GetLastMsgForSubject(ctx, "webhooks.*."+EventToken(eventID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: event lookup: %v", ErrUnavailable, err)
	}
	e, err := decodeEnvelope(m.Subject, m.Header, m.Data)
	if err != nil {
		return nil, 0, err
	}
	return e, m.Sequence, nil
}
