package store

import (
	"context"
	"fmt"
	"strings"
)

// Backlog is what one destination's consumer holds.
type Backlog struct {
	Route, Destination string
	Pending            uint64 // stored and not yet sent to the destination
	AckPending         uint64 // sent and not settled: in flight or waiting in backoff
	// Parked are waiting for a later attempt outside the consumer
	// (park.go), as of the mover's last look and counting those this
	// store parked since (ParkedCount).
	Parked uint64
	// Blocked are the ordering keys whose head keeps failing and the
	// events waiting behind heads (order.go); zero when unordered.
	Blocked Blocked
	// ackFloor is the consumer's: every message on its subjects up to
	// this stream sequence is settled (Oldest).
	ackFloor uint64
}

// Backlogs reads the backlog of every destination's consumer in one listing
// of WEBHOOKS' consumers (one request per 256 consumers), cheap enough for
// every metrics scrape.
func (s *Store) Backlogs(ctx context.Context) ([]Backlog, error) {
	l := s.main.ListConsumers(ctx)
	var out []Backlog
	for ci := range l.Info() {
		route, dest, ok := consumerTarget(ci.Config.FilterSubjects)
		if !ok {
			continue
		}
		b := Backlog{Route: route, Destination: dest,
			Pending: ci.NumPending, AckPending: uint64(ci.NumAckPending), Parked: s.ParkedCount(route, dest), ackFloor: ci.AckFloor.Stream}
		if s.idx != nil {
			var err error
			if b.Blocked, err = s.Blocked(route, dest); err != nil {
				return nil, fmt.Errorf("ordering keys: %w", err)
			}
		}
		out = append(out, b)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: consumers: %w", ErrUnavailable, err)
	}
	return out, nil
}

// consumerTarget reads route and destination from a destination consumer's
// replay filter, replay.<route>.<destination>.*; names hold no '.', so it
// is unambiguous where the durable name route__destination is not.
func consumerTarget(filters []string) (route, dest string, ok bool) {
	for _, f := range filters {
		p := strings.Split(f, ".")
		if len(p) == 4 && p[0] == "replay" && p[3] == "*" {
			return p[1], p[2], true
		}
	}
	return "", "", false
}
