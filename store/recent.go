package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventSummary is one stored webhook in a list, as its headers tell it.
type EventSummary struct {
	Seq        uint64 // in WEBHOOKS
	EventID    string
	Route      string
	Method     string
	ReceivedAt time.Time
	Size       int // the body's length in bytes
}

// EventPage is a page of a route's webhooks, newest first. Before, when
// not 0, is what to pass to RecentEvents for the next, older page.
type EventPage struct {
	Events []EventSummary
	Before uint64
}

// One page of RecentEvents reads at most maxRecentScan messages, in at
// most maxRecentWindows windows of the stream.
const (
	maxRecentScan    = 10_000
	maxRecentWindows = 32
)

// RecentEvents returns up to limit of route's webhooks stored before
// stream sequence before (0: the newest), newest first. It reads headers
// only, in windows of the stream that grow backwards from before until the
// page is full, within maxRecentScan messages and maxRecentWindows windows:
// a route that is rare in a busy stream may get a short page, still with a
// Before to go on.
func (s *Store) RecentEvents(ctx context.Context, route string, before uint64, limit int) (EventPage, error) {
	var p EventPage
	if !validToken(route) {
		return p, fmt.Errorf("%q is not a route name: names hold only letters, digits, \"_\" and \"-\"", route)
	}
	if limit <= 0 {
		return p, nil
	}
	info, err := s.main.Info(ctx)
	if err != nil {
		return p, fmt.Errorf("%w: recent events: %w", ErrUnavailable, err)
	}
	first, end := max(info.State.FirstSeq, 1), info.State.LastSeq+1
	if before > 0 && before < end {
		end = before
	}
	window, read := uint64(4*limit), 0
	for i := 0; end > first && read < maxRecentScan && i < maxRecentWindows; i++ {
		// A window holds at most as many of the route's messages as it
		// spans, so reading it stays within the budget.
		start := end - min(window, end-first, uint64(maxRecentScan-read))
		got, err := s.eventsBetween(ctx, route, start, end)
		if err != nil {
			return p, err
		}
		read += len(got)
		for i := len(got) - 1; i >= 0; i-- {
			if len(p.Events) == limit {
				p.Before = p.Events[limit-1].Seq
				return p, nil
			}
			p.Events = append(p.Events, got[i])
		}
		end, window = start, window*4
	}
	if end > first {
		p.Before = end // stopped at a bound
	} else if len(p.Events) == limit {
		p.Before = p.Events[limit-1].Seq
	}
	return p, nil
}

// eventsBetween reads route's webhooks with sequences in [start, end),
// oldest first.
func (s *Store) eventsBetween(ctx context.Context, route string, start, end uint64) ([]EventSummary, error) {
	c, err := s.js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"webhooks." + route + ".*"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
		HeadersOnly:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: recent events: %w", ErrUnavailable, err)
	}
	var out []EventSummary
	for {
		batch, err := c.FetchNoWait(256)
		if err != nil {
			return nil, fmt.Errorf("%w: recent events: %w", ErrUnavailable, err)
		}
		got, done := 0, false
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil || done {
				continue
			}
			if md.Sequence.Stream >= end {
				done = true
				continue
			}
			if e, err := decodeEnvelope(m.Subject(), m.Headers(), nil); err == nil {
				size, _ := strconv.Atoi(m.Headers().Get(nats.MsgSize))
				out = append(out, EventSummary{Seq: md.Sequence.Stream, EventID: e.EventID, Route: e.Route,
					Method: e.Method, ReceivedAt: e.ReceivedAt, Size: size})
			}
			done = done || md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("%w: recent events: %w", ErrUnavailable, err)
		}
		if done || got == 0 {
			return out, nil
		}
	}
}
