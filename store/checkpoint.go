package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// checkpointBucket is the key-value bucket where jethook's background jobs
// (catch-up) keep how far they got, so that a restart resumes there; on a
// cluster every replica shares it.
const checkpointBucket = "JETHOOK_CHECKPOINTS"

// Checkpoint returns the value stored under key, ok false if none.
func (s *Store) Checkpoint(ctx context.Context, key string) (value string, ok bool, err error) {
	kv, err := s.js.KeyValue(ctx, checkpointBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: checkpoint %s: %w", ErrUnavailable, key, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: checkpoint %s: %w", ErrUnavailable, key, err)
	}
	return string(e.Value()), true, nil
}

// SetCheckpoint stores value under key, creating the bucket the first time.
// Keys hold letters, digits and "-_=./".
func (s *Store) SetCheckpoint(ctx context.Context, key, value string) error {
	kv, err := s.js.KeyValue(ctx, checkpointBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      checkpointBucket,
			Description: "How far jethook's catch-up got, per route",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    s.opts.Replicas,
		})
	}
	if err != nil {
		return fmt.Errorf("%w: checkpoint %s: %w", ErrUnavailable, key, err)
	}
	if _, err := kv.PutString(ctx, key, value); err != nil {
		return fmt.Errorf("%w: checkpoint %s: %w", ErrUnavailable, key, err)
	}
	return nil
}
