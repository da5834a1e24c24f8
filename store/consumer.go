package store

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumerName is the durable consumer of one route × destination.
func ConsumerName(route, destination string) string { return route + "__" + destination }

// Consumer creates or updates the durable pull consumer that feeds one
// destination of a route and returns it. It filters on the route's subject
// and on the destination's replay subject. A new consumer starts with new
// messages, so a destination added to a busy route is not flooded with
// history.
//
// It also reads the destination's due subject, where parked webhooks come
// back when their next attempt is due (park.go).
//
// ackWait should cover one attempt (the destination's timeout plus a
// margin). The consumer has no BackOff and no MaxDeliver: the forwarder
// drives the schedule, with NakWithDelay for short waits and parking for
// long ones.
func (s *Store) Consumer(ctx context.Context, route, destination string, ackWait time.Duration) (jetstream.Consumer, error) {
	name := ConsumerName(route, destination)
	c, err := s.js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:        name,
		Description:    fmt.Sprintf("jethook: route %s to destination %s", route, destination),
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1,
		FilterSubjects: []string{"webhooks." + route + ".*", "replay." + route + "." + destination + ".*", "due." + route + "." + destination + ".*"},
		MaxAckPending:  s.opts.MaxAckPending,
		MaxWaiting:     512,
		Replicas:       s.opts.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return c, nil
}

// Decode reads the envelope of a message fetched from a consumer.
func Decode(m jetstream.Msg) (*Envelope, error) {
	return decodeEnvelope(m.Subject(), m.Headers(), m.Data())
}
