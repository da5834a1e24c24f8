package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Instances: with waiting records on (Options.WaitingEvery), each jethook
// names itself by when its index was made, stamps that name on the
// ordering records it parks (waiting records, an ordered head's parked
// record, a released event's due record: Parked.By), and keeps it in the
// JETHOOK_INSTANCES bucket, written every beat (20 s, or WaitingEvery if
// shorter) and forgotten three beats after the last write. Replicas that share an ordered
// destination read each other's records: a record whose writer is alive
// is passed on to it (PassOn), and only one whose writer is gone, with the
// index that knew its event, brings that event back to its key here.

const (
	instanceBucket = "JETHOOK_INSTANCES"
	instanceBeat   = 20 * time.Second
	// aliveFor is how long an answer about another instance is kept.
	aliveFor = 5 * time.Second
)

type instances struct {
	beat time.Duration
	self string
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	kv    jetstream.KeyValue // nil until made
	known map[string]alive
}

type alive struct {
	yes bool
	at  time.Time
}

// instanceName is the name of the instance whose index was made at born.
func instanceName(born time.Time) string { return strconv.FormatInt(born.UnixNano(), 36) }

// startInstances names this instance and starts its beat. The bucket is
// made, and the first beat written, in the background: a cluster slow to
// create it does not hold the start up. Until then every other instance
// counts as alive (alive), so that nothing is taken from one that is.
func (s *Store) startInstances() {
	in := &instances{beat: min(instanceBeat, s.opts.WaitingEvery), self: instanceName(s.idx.born),
		stop: make(chan struct{}), done: make(chan struct{}), known: map[string]alive{}}
	s.inst = in
	go in.run(s)
}

func (in *instances) run(s *Store) {
	defer close(in.done)
	t := time.NewTicker(in.beat)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.PublishTimeout)
		err := in.write(ctx, s.js, s.opts.Replicas)
		cancel()
		if err != nil {
			s.opts.Logger.Warn("this instance cannot say it is alive; other replicas may take the events waiting here for lost", "err", err)
		}
		select {
		case <-t.C:
		case <-in.stop:
			return
		}
	}
}

// write makes the bucket if it is not there yet, and writes this
// instance's beat.
func (in *instances) write(ctx context.Context, js jetstream.JetStream, replicas int) error {
	kv := in.bucket()
	if kv == nil {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      instanceBucket,
			Description: "jethook: the instances alive, for the ordering's waiting records",
			TTL:         3 * in.beat,
			Replicas:    replicas,
			Storage:     jetstream.FileStorage,
		})
		if err != nil {
			return fmt.Errorf("bucket %s: %w", instanceBucket, err)
		}
		in.mu.Lock()
		in.kv = kv
		in.mu.Unlock()
	}
	_, err := kv.Put(ctx, in.self, nil)
	return err
}

func (in *instances) bucket() jetstream.KeyValue {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.kv
}

func (in *instances) close(wait time.Duration) {
	if in == nil {
		return
	}
	close(in.stop)
	<-in.done
	if kv := in.bucket(); kv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = kv.Delete(ctx, in.self)
	}
}

// alive reports whether instance name wrote within three beats. An error
// reading the bucket counts as alive: the record is passed on, not taken.
func (in *instances) alive(name string, wait time.Duration) bool {
	in.mu.Lock()
	a, ok := in.known[name]
	in.mu.Unlock()
	if ok && time.Since(a.at) < min(aliveFor, in.beat) {
		return a.yes
	}
	kv := in.bucket()
	if kv == nil {
		return true // not known yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := kv.Get(ctx, name)
	yes := !errors.Is(err, jetstream.ErrKeyNotFound)
	in.mu.Lock()
	defer in.mu.Unlock()
	for n, a := range in.known { // a few names at most: forget the old
		if time.Since(a.at) > min(aliveFor, in.beat) {
			delete(in.known, n)
		}
	}
	in.known[name] = alive{yes: yes, at: time.Now()}
	return yes
}
