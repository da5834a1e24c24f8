package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hdrResendOf names, on a resent message, the WEBHOOKS sequence of the
// webhook it sends again.
const hdrResendOf = "Jethook-Resend-Of"

// Resend queues the webhook e, stored at seq, for route's destination
// again, as Replay does a dead letter: on the destination's replay
// subject, which only its consumer reads, as a message new to it, so its
// attempts (X-Webhook-Attempt) and max_age start afresh. after is the
// sequence of the event's latest replay to the destination (0 if none):
// two resends that saw the same latest replay queue one message (its
// Nats-Msg-Id), within the stream's dedup window. It reports whether it
// queued one.
func (s *Store) Resend(ctx context.Context, e *Envelope, seq uint64, destination string, after uint64) (bool, error) {
	if !validToken(e.Route) || !validToken(destination) {
		return false, fmt.Errorf("resend: %q, %q: not a route and destination name", e.Route, destination)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	m := e.msg(ReplaySubject(e.Route, destination))
	m.Header.Set(hdrResendOf, strconv.FormatUint(seq, 10))
	ack, err := s.js.PublishMsg(ctx, m,
		jetstream.WithMsgID(fmt.Sprintf("resend/%s/%d/%d", destination, seq, after)),
		jetstream.WithExpectStream(StreamName))
	if err != nil {
		return false, fmt.Errorf("%w: resend: %w", ErrUnavailable, err)
	}
	if ack.Duplicate {
		return false, nil
	}
	s.indexStored(kindReplay, e.Route, destination, e.EventID, ack.Sequence, 0, nil)
	return true, nil
}

// ErrNotParked means a webhook has no parked retry to bring forward: it
// is in flight, or its next attempt is seconds away, or it came due.
var ErrNotParked = errors.New("not parked")

// RetryNow brings the parked retry of eventID at route's destination
// forward: due at once, as Release does for all of a destination's, with
// the attempts it has made so far (X-Webhook-Attempt goes on from them).
// It queues the due record the mover would have, under the same
// Nats-Msg-Id, then removes the parked record, so the retry is queued
// once whoever moves it. ErrNotParked when there is none.
func (s *Store) RetryNow(ctx context.Context, route, destination, eventID string) error {
	if !validToken(route) || !validToken(destination) {
		return fmt.Errorf("retry: %q, %q: not a route and destination name", route, destination)
	}
	var found jetstream.Msg
	var foundSeq uint64
	src := recordSource{s.parked, jetstream.OrderedConsumerConfig{HeadersOnly: true, FilterSubjects: []string{"parked." + route + "." + destination + ".*"}}}
	err := src.while(ctx, 1024, func(m jetstream.Msg) bool {
		if m.Headers().Get(hdrEventID) == eventID {
			if md, err := m.Metadata(); err == nil {
				found, foundSeq = m, md.Sequence.Stream
				return false // the first will do
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w: parked retries: %w", ErrUnavailable, err)
	}
	if found == nil {
		return ErrNotParked
	}
	p, err := parkedFrom(found.Headers())
	if err != nil {
		return err
	}
	h := p.header(eventID)
	h.Set(hdrDue, time.Now().UTC().Format(time.RFC3339Nano))
	pctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	ack, err := s.js.PublishMsg(pctx, &nats.Msg{Subject: DueSubject(route, destination), Header: h},
		jetstream.WithMsgID(fmt.Sprintf("due/%s/p%d", destination, foundSeq)),
		jetstream.WithExpectStream(StreamName))
	if err != nil {
		return fmt.Errorf("%w: retry now: %w", ErrUnavailable, err)
	}
	if !ack.Duplicate { // a duplicate's sequence is the record told before
		s.indexSeq(ack.Sequence)
	}
	err = s.parked.DeleteMsg(ctx, foundSeq)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return fmt.Errorf("%w: retry now: the due record is queued, the parked one stays: %w", ErrUnavailable, err)
	}
	return nil
}

// Redeliver has JetStream deliver a message its consumer holds nak'd with
// a delay at once: a nak without a delay on reply, the message's ack
// subject. The caller must know the message is not in flight (its delay
// has not ended): JetStream would deliver a message in flight again too.
func (s *Store) Redeliver(reply string) error {
	if !strings.HasPrefix(reply, "$JS.ACK.") {
		return fmt.Errorf("redeliver: %q is not an ack subject", reply)
	}
	if err := s.nc.Publish(reply, []byte("-NAK")); err != nil {
		return fmt.Errorf("%w: redeliver: %w", ErrUnavailable, err)
	}
	return nil
}
