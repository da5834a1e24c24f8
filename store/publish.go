package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stored is what the stream said about a publish.
type Stored struct {
	Seq       uint64 // stream sequence (of the first copy, for a duplicate)
	Duplicate bool   // the event id was already in the dedup window
}

// Publish writes e to its route's subject and waits for the stream's ack,
// so a nil error means the message is on disk (docs/durability.md). An
// event id (or signed key) the index holds from the last DedupWindow is a
// duplicate and is not written again; one stored a moment ago, not yet
// indexed, is caught by the stream itself (Nats-Msg-Id = msgID of the
// route and the signed key or else the event id, raceWindow). Publishes are sent
// asynchronously, so concurrent callers share the wire; each waits only
// for its own ack. While the store refuses writes (Health: disconnected,
// stalled, disk below its floor, a write error not yet cleared) it fails
// at once with a *NotReadyError. Any failure wraps ErrUnavailable.
func (s *Store) Publish(ctx context.Context, e *Envelope) (Stored, error) {
	since := time.Now().Add(-s.opts.DedupWindow)
	for _, key := range [...]string{e.EventID, e.SignedKey} {
		if key == "" {
			continue
		}
		if seq, ok, err := s.idx.eventSeq(e.Route, key, since); ok {
			return Stored{Seq: seq, Duplicate: true}, nil
		} else if err != nil {
			s.opts.Logger.Warn("dedup index unreadable; storing", "route", e.Route, "err", err)
			break
		}
	}
	if err := s.refusing(); err != nil {
		return Stored{}, err
	}
	start := time.Now()
	stored, err := s.publish(ctx, e)
	s.mon.published(start, err)
	s.ingest.stored(start)
	return stored, err
}

func (s *Store) publish(ctx context.Context, e *Envelope) (Stored, error) {
	// A timer, not a child context: this runs once per webhook, and a
	// child of the request's context costs a lock and allocations.
	timeout := time.NewTimer(s.opts.PublishTimeout)
	defer timeout.Stop()
	// The stream keeps one id per message: the signed key, when there is
	// one, so that copies under several ids stored at once are one. Two
	// copies of one id always share it, unless the sender signed them
	// apart (a new timestamp); the index tells those apart a moment later.
	fut, err := s.ingress.PublishMsgAsync(e.msg(Subject(e.Route)),
		jetstream.WithMsgID(msgID(e.Route, cmp.Or(e.SignedKey, e.EventID))),
		jetstream.WithExpectStream(StreamName),
		jetstream.WithStallWait(s.opts.PublishTimeout))
	if err != nil {
		return Stored{}, fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	// The body's values for the index's value filters (values.go), read
	// while the server stores the message.
	var values *hashes
	if s.writer != nil && s.opts.BodyValues != nil {
		values = bodyValues(s.opts.BodyValues, e.Body)
	}
	select {
	case ack := <-fut.Ok():
		if !ack.Duplicate {
			s.indexPublished(e, ack.Sequence, values)
			return Stored{Seq: ack.Sequence}, nil
		}
		values.release()
		return Stored{Seq: ack.Sequence, Duplicate: true}, nil
	case err := <-fut.Err():
		if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			err = errNoAck
		}
		return Stored{}, fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	case <-timeout.C:
		return Stored{}, fmt.Errorf("%w: %w within %s", ErrUnavailable, errNoAck, s.opts.PublishTimeout)
	case <-ctx.Done():
		return Stored{}, fmt.Errorf("%w: no ack from the stream: %w", ErrUnavailable, ctx.Err())
	}
}

// indexPublished indexes webhook e, stored at seq, with its body's
// values: under its event id, and under its signed key when it has one.
func (s *Store) indexPublished(e *Envelope, seq uint64, values *hashes) {
	s.indexStored(kindEvent, e.Route, "", e.EventID, seq, 0, values)
	if e.SignedKey != "" {
		s.indexStored(kindEvent, e.Route, "", e.SignedKey, seq, 0, told)
	}
}

// indexStored indexes a webhook or replay this process stored, with the
// values of a webhook's body (bodyValues; told for its second entry, nil
// for a replay), when the index does not follow WEBHOOKS (the embedded
// server). A failed write is logged: the message is stored, and the next
// start indexes it.
func (s *Store) indexStored(kind byte, route, dest, eventID string, seq, ref uint64, values *hashes) {
	if s.writer == nil {
		return
	}
	s.writer.add(stored{kind: kind, route: route, dest: dest, eventID: eventID, seq: seq, ref: ref, at: time.Now(), values: values})
}

// indexSeq tells the index's writer of a message this process stored in
// WEBHOOKS that is not a webhook or replay (a due record): it indexes
// nothing, but its block's value filter (values.go) waits for it.
func (s *Store) indexSeq(seq uint64) { s.indexStored(kindSeq, "", "", "", seq, 0, nil) }

// msgID is the dedup key (Nats-Msg-Id) of event eventID on route: the id
// within its route, since providers number their own events and two routes
// may see the same id. Route names hold no ':', so no key can equal a
// replay's (replay/<seq>).
func msgID(route, eventID string) string { return route + ":" + eventID }

// Stats counts what the streams hold.
type Stats struct {
	Messages    uint64 // webhooks retained in WEBHOOKS (delivered or not)
	DeadLetters uint64 // messages in WEBHOOKS_DLQ
}

// Stats reads the streams' message counts.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	mi, err := s.main.Info(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	di, err := s.dlq.Info(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return Stats{Messages: mi.State.Msgs, DeadLetters: di.State.Msgs}, nil
}
