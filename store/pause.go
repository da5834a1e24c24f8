package store

import (
	"context"
	"fmt"
	"time"
)

// pauseFor is how long a paused consumer stays paused: until resumed, in
// practice. JetStream takes a deadline, not "forever".
const pauseFor = 100 * 365 * 24 * time.Hour

// PauseConsumer pauses (or resumes) route's destination's consumer in
// JetStream: a paused consumer hands out no message, not even to a fetch
// already waiting, and the pause holds for every jethook replica sharing
// the consumer. Updating the consumer's configuration keeps the pause, so
// it outlives restarts until resumed.
func (s *Store) PauseConsumer(ctx context.Context, route, destination string, paused bool) error {
	name := ConsumerName(route, destination)
	var err error
	if paused {
		_, err = s.js.PauseConsumer(ctx, StreamName, name, time.Now().Add(pauseFor))
	} else {
		_, err = s.js.ResumeConsumer(ctx, StreamName, name)
	}
	if err != nil {
		return fmt.Errorf("%w: pause consumer %s: %w", ErrUnavailable, name, err)
	}
	return nil
}
