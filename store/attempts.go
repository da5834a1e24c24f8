package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AttemptStreamName is the stream of the attempt log: one small JSON
// message per HTTP attempt, kept for Options.AttemptLogAge.
const AttemptStreamName = "WEBHOOKS_ATTEMPTS"

// Attempt is one HTTP attempt to one destination, as the attempt log keeps
// it: no payload, no headers.
type Attempt struct {
	Time        time.Time // when the attempt ended
	Route       string
	Destination string
	EventID     string
	Attempt     int           // 1 for the first attempt
	Status      int           // HTTP status, 0 if no response arrived
	Error       string        // network or timeout error, if any
	Latency     time.Duration // until the response headers or the error
	Outcome     string        // "delivered", "transient" or "permanent"
	// Next is the delay before the next attempt; 0 when there is none
	// (delivered, or dead-lettered).
	Next time.Duration
}

// attemptRecord is an Attempt on the wire.
type attemptRecord struct {
	Time        time.Time `json:"time"`
	Route       string    `json:"route"`
	Destination string    `json:"destination"`
	EventID     string    `json:"event_id"`
	Attempt     int       `json:"attempt"`
	Status      int       `json:"status,omitempty"`
	Error       string    `json:"error,omitempty"`
	LatencyNS   int64     `json:"latency_ns"`
	Outcome     string    `json:"outcome"`
	NextNS      int64     `json:"next_ns,omitempty"`
}

// AttemptSubject is the subject of one attempt:
// attempts.<route>.<destination>.<event token>.
func AttemptSubject(route, destination, eventID string) string {
	return "attempts." + route + "." + destination + "." + EventToken(eventID)
}

// attemptLog publishes to the attempt log on a JetStream context of its
// own, whose error handler counts what was lost.
type attemptLog struct {
	js      jetstream.JetStream
	dropped atomic.Uint64
}

// attemptStallWait bounds how long LogAttempt may wait when too many log
// publishes are unacknowledged; past it the record is dropped.
const attemptStallWait = time.Millisecond

func (s *Store) ensureAttempts(ctx context.Context) error {
	_, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        AttemptStreamName,
		Description: "jethook: one record per delivery attempt, no payloads",
		Subjects:    []string{"attempts.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      s.opts.AttemptLogAge,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", AttemptStreamName, err)
	}
	log := &attemptLog{}
	log.js, err = jetstream.New(s.nc,
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(s.opts.PublishTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			log.drop(s, m.Subject, err)
		}))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	s.attempts = log
	return nil
}

func (l *attemptLog) drop(s *Store, subject string, err error) {
	n := l.dropped.Add(1)
	s.opts.Logger.Debug("attempt not logged", "subject", subject, "err", err, "dropped", n)
}

// LogAttempt records a in the attempt log without waiting for the store:
// a delivery never waits on its own log. A record the store cannot take is
// dropped and counted (logged at debug).
func (s *Store) LogAttempt(a Attempt) {
	if s == nil || s.attempts == nil {
		return
	}
	data, err := json.Marshal(attemptRecord{
		Time: a.Time.UTC(), Route: a.Route, Destination: a.Destination, EventID: a.EventID,
		Attempt: a.Attempt, Status: a.Status, Error: a.Error, LatencyNS: int64(a.Latency),
		Outcome: a.Outcome, NextNS: int64(a.Next),
	})
	if err != nil {
		s.attempts.drop(s, "", err)
		return
	}
	subject := AttemptSubject(a.Route, a.Destination, a.EventID)
	_, err = s.attempts.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data},
		jetstream.WithExpectStream(AttemptStreamName), jetstream.WithStallWait(attemptStallWait))
	if err != nil {
		s.attempts.drop(s, subject, err)
	}
}

// Attempts reads the logged attempts of one event, to every destination of
// every route that received it, in the order they were logged (per
// destination, the order they were made).
func (s *Store) Attempts(ctx context.Context, eventID string) ([]Attempt, error) {
	c, err := s.js.OrderedConsumer(ctx, AttemptStreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"attempts.*.*." + EventToken(eventID)},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: attempts: %v", ErrUnavailable, err)
	}
	var out []Attempt
	for {
		batch, err := c.FetchNoWait(256)
		if err != nil {
			return nil, fmt.Errorf("%w: attempts: %v", ErrUnavailable, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var r attemptRecord
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				return nil, fmt.Errorf("attempt record %s: %w", m.Subject(), err)
			}
			if r.EventID != eventID {
				continue
			}
			out = append(out, Attempt{
				Time: r.Time, Route: r.Route, Destination: r.Destination, EventID: r.EventID,
				Attempt: r.Attempt, Status: r.Status, Error: r.Error, Latency: time.Duration(r.LatencyNS),
				Outcome: r.Outcome, Next: time.Duration(r.NextNS),
			})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("%w: attempts: %v", ErrUnavailable, err)
		}
		if n == 0 {
			return out, nil
		}
	}
}
