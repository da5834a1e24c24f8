package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// hdrReplayOf names, on a replayed message, the WEBHOOKS_DLQ sequence of the
// dead letter it came from.
const hdrReplayOf = "Jethook-Replay-Of"

// ReplayCounts counts what a replay did; the admin API reports it in
// admin.ReplayResult.
type ReplayCounts struct {
	Queued     int // republished for delivery
	Duplicates int // already replayed within the dedup window: not queued again
}

// Replay republishes each dead letter to its destination's replay subject,
// which only that destination's consumer reads, so the route's other
// destinations do not get the event again. The message is new to the
// consumer, so its attempts and max_age start afresh. Replaying a dead
// letter that was already replayed queues nothing: the index knows the
// latest replay of each event to each destination, and the replay's
// Nats-Msg-Id, derived from the dead letter's WEBHOOKS_DLQ sequence,
// covers two replays at the same moment. Dead letters stay in
// WEBHOOKS_DLQ until purged. Replay waits for every ack.
func (s *Store) Replay(ctx context.Context, dls []DeadLetter) (ReplayCounts, error) {
	return s.replay(ctx, dls, "")
}

// ReplayTo republishes each dead letter as Replay does, but to
// destination, another destination of the dead letter's route, whose
// consumer reads it as it reads its own replays: a production webhook can
// be sent to a developer's pull destination. Its dedup is per dead letter
// and destination, so a dead letter can be replayed once to each.
func (s *Store) ReplayTo(ctx context.Context, dls []DeadLetter, destination string) (ReplayCounts, error) {
	if destination == "" || !validToken(destination) {
		return ReplayCounts{}, fmt.Errorf("replay: %q: not a destination name", destination)
	}
	return s.replay(ctx, dls, destination)
}

// replay is Replay to destination, or to each dead letter's own
// destination when destination is "".
func (s *Store) replay(ctx context.Context, dls []DeadLetter, destination string) (ReplayCounts, error) {
	var r ReplayCounts
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	futs := make([]jetstream.PubAckFuture, 0, len(dls))
	for _, d := range dls {
		if d.DLQSeq == 0 || d.Envelope == nil || d.Destination == "" {
			return r, fmt.Errorf("replay: dead letter without sequence, envelope or destination")
		}
		e, to := d.Envelope, d.Destination
		if destination != "" {
			to = destination
		}
		last, err := s.LastReplay(ctx, e.Route, to, e.EventID)
		if err != nil {
			return r, err
		}
		if last.Exists && last.Of == d.DLQSeq {
			r.Duplicates++
			continue
		}
		m := e.msg(ReplaySubject(e.Route, to))
		m.Header.Set(hdrReplayOf, strconv.FormatUint(d.DLQSeq, 10))
		id := replayID(d.DLQSeq)
		if to != d.Destination {
			id += "/to/" + to
		}
		fut, err := s.js.PublishMsgAsync(m,
			jetstream.WithMsgID(id),
			jetstream.WithExpectStream(StreamName),
			jetstream.WithStallWait(s.opts.PublishTimeout))
		if err != nil {
			return r, fmt.Errorf("%w: replay dead letter %d: %w", ErrUnavailable, d.DLQSeq, err)
		}
		futs = append(futs, fut)
	}
	var errs []error
	for _, fut := range futs {
		select {
		case ack := <-fut.Ok():
			if ack.Duplicate {
				r.Duplicates++
			} else {
				r.Queued++
				m := fut.Msg()
				of, _ := strconv.ParseUint(m.Header.Get(hdrReplayOf), 10, 64)
				p := subjectParts(m.Subject)
				s.indexStored(kindReplay, p[1], p[2], m.Header.Get(hdrEventID), ack.Sequence, of, nil)
			}
		case err := <-fut.Err():
			errs = append(errs, fmt.Errorf("dead letter %s: %v", fut.Msg().Header.Get(hdrReplayOf), err))
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("dead letter %s: no ack from the stream: %v", fut.Msg().Header.Get(hdrReplayOf), ctx.Err()))
		}
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("%w: replay: %w", ErrUnavailable, errors.Join(errs...))
	}
	return r, nil
}

// IsReplay reports whether m, fetched from a destination's consumer, is a
// replay of a dead letter rather than a webhook or a due record.
func IsReplay(m jetstream.Msg) bool { return strings.HasPrefix(m.Subject(), "replay.") }

// replayID is the Nats-Msg-Id of the replay of dead letter dlqSeq.
func replayID(dlqSeq uint64) string { return "replay/" + strconv.FormatUint(dlqSeq, 10) }

// Replayed is the latest replay of an event to one destination.
type Replayed struct {
	Seq    uint64    // sequence of the replayed message in WEBHOOKS
	Of     uint64    // WEBHOOKS_DLQ sequence of the dead letter it replays
	At     time.Time // when it was queued
	Exists bool
}

// LastReplay finds the latest replay of eventID to route's destination,
// if the stream still holds one.
func (s *Store) LastReplay(ctx context.Context, route, destination, eventID string) (Replayed, error) {
	en, ok, err := s.idx.latest(eventID, kindReplay, route, destination, time.Time{})
	if err != nil || !ok {
		return Replayed{}, err
	}
	return Replayed{Seq: en.Seq, Of: en.Ref, At: en.Time, Exists: true}, nil
}
