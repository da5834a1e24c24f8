package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxNewestScan bounds the messages Newest reads back past those received
// at or after its limit.
const maxNewestScan = 10_000

// Newest returns route's newest stored webhook received before before,
// nil if there is none. It reads back from the stream's end, past at most
// maxNewestScan messages received since, and then gives up (nil, nil).
func (s *Store) Newest(ctx context.Context, route string, before time.Time) (*Envelope, error) {
	if !validToken(route) {
		return nil, nil
	}
	subject := Subject(route)
	m, err := s.main.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	for i := 0; ; i++ {
		if err != nil {
			return nil, fmt.Errorf("%w: newest webhook of route %q: %w", ErrUnavailable, route, err)
		}
		if m.Subject == subject {
			e, err := decodeEnvelope(m.Subject, m.Header, m.Data)
			if err == nil && e.ReceivedAt.Before(before) {
				return e, nil
			}
		}
		if m.Sequence <= 1 || i == maxNewestScan {
			return nil, nil
		}
		seq := m.Sequence - 1
		m, err = s.main.GetMsg(ctx, seq)
		for errors.Is(err, jetstream.ErrMsgNotFound) && seq > 1 && i < maxNewestScan {
			seq, i = seq-1, i+1 // deleted: acked and purged, or expired
			m, err = s.main.GetMsg(ctx, seq)
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
	}
}
