package store

import (
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// failure is one recorded write failure.
type failure struct {
	what string
	at   time.Time
}

func (f failure) set() bool { return f.what != "" }

// acked clears the failures recorded before a write that started at
// start was acked; it reports whether it cleared any.
func (m *monitor) acked(start time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cleared := false
	for _, f := range []*failure{&m.server, &m.noAck, &m.refused} {
		if f.set() && f.at.Before(start) {
			*f, cleared = failure{}, true
		}
	}
	if !m.server.set() {
		m.resetWait, m.nextReset = resetWait, time.Time{}
	}
	m.flagged.Store(m.server.set() || m.noAck.set() || m.refused.set())
	return cleared
}

// record keeps a write failure and has the check loop look at once.
func (m *monitor) record(f *failure, what string) {
	m.mu.Lock()
	*f = failure{what: what, at: time.Now()}
	m.mu.Unlock()
	m.flagged.Store(true)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// serverWriteError records a write error the embedded server logged.
func (m *monitor) serverWriteError(msg string) { m.record(&m.server, msg) }

// JetStream API error codes a publish can fail with (nats-server's
// jetstream_errors_generated.go).
const (
	codeInsufficientResources = 10023 // the server's or account's storage limit
	codeStoreFailed           = 10077 // the stream refused the message: its limits, or a write error
)

// published records what a publish started at start came to: an ack
// clears earlier failures; no ack while NATS answers, or a refusal for
// the store's limits, is recorded until a later write is acked.
func (m *monitor) published(start time.Time, err error) {
	if err == nil {
		if m.flagged.Load() {
			m.acked(start)
		}
		return
	}
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode == codeInsufficientResources:
		m.record(&m.refused, "the server refused a write: "+api.Description)
	case errors.As(err, &api) && api.ErrorCode == codeStoreFailed && strings.HasPrefix(api.Description, "maximum"):
		m.record(&m.refused, "the stream refused a write: "+api.Description) // a stream limit
	case errors.As(err, &api) && api.ErrorCode == codeStoreFailed:
		m.record(&m.noAck, "the stream failed to store a write: "+api.Description)
	case errors.Is(err, errNoAck) && m.connection() == nil:
		m.record(&m.noAck, err.Error())
	}
}

// errNoAck is a publish the stream did not answer in time.
var errNoAck = errors.New("no ack from the stream")
