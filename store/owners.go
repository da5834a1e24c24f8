package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"
)

// Owners: with waiting records on (Options.WaitingEvery), an ordered
// destination is delivered by one jethook at a time, the owner of the
// destination. Ownership is a lease in the JETHOOK_INSTANCES bucket: key
// owner.<route>.<destination>, value the owner's instance name (when its
// index was made), forgotten by the bucket ownerTTL after its last write.
// The owner renews it every ownerRenew; it may fetch only while its last
// renewal was sent less than ownerTTL/2 ago (Ownership.Held). Another
// jethook takes the lease once it is gone (released, or forgotten after
// ownerTTL), so at least ownerTTL/2 after the last fetch of the owner
// before: the events that owner had in flight are back in the consumer
// or parked by then, and its ordering state is in the waiting and parked
// records (Store.TakeOver). So the events of one key are attempted one at
// a time across every replica, in order.
//
// Every ordered record carries its writer's name (Parked.By): a record an
// owner did not write itself is an event another owner knew, which it
// now takes on (admitDue).

const (
	instanceBucket = "JETHOOK_INSTANCES"
	// ownerTTL is how long the bucket keeps a lease after its last
	// write; a short WaitingEvery (tests) makes it 3 × WaitingEvery.
	ownerTTL = time.Minute
)

// instances names this jethook and holds the bucket, made in the
// background: a cluster slow to create it does not hold the start up.
// Until it is made, no ordered destination is owned here.
type instances struct {
	ttl  time.Duration // the bucket's TTL, once it is open (lease)
	self string
	stop chan struct{}
	done chan struct{}

	mu sync.Mutex
	kv jetstream.KeyValue // nil until made
}

// instanceName is the name of the instance whose index was made at born.
func instanceName(born time.Time) string { return strconv.FormatInt(born.UnixNano(), 36) }

func (s *Store) startInstances() {
	in := &instances{ttl: min(ownerTTL, 3*s.opts.WaitingEvery), self: instanceName(s.idx.born),
		stop: make(chan struct{}), done: make(chan struct{})}
	s.inst = in
	go in.make(s)
}

// make creates the bucket, trying again every ttl/6 until it is made. A
// bucket made before, by this jethook or another, is used as it is: its
// TTL, not this one's, says how long a lease lasts, so that every replica
// counts the same.
func (in *instances) make(s *Store) {
	defer close(in.done)
	t := time.NewTicker(in.ttl / 6)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.PublishTimeout)
		kv, ttl, err := in.open(ctx, s)
		cancel()
		if err == nil {
			in.mu.Lock()
			in.kv = kv
			if ttl > 0 {
				in.ttl = ttl
			}
			in.mu.Unlock()
			return
		}
		s.opts.Logger.Warn("the bucket of ordered destinations' owners cannot be made yet; they are not delivered here until it is", "bucket", instanceBucket, "err", err)
		select {
		case <-t.C:
		case <-in.stop:
			return
		}
	}
}

// open opens the bucket, or makes it, and returns it with its TTL.
func (in *instances) open(ctx context.Context, s *Store) (jetstream.KeyValue, time.Duration, error) {
	kv, err := s.js.KeyValue(ctx, instanceBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      instanceBucket,
			Description: "jethook: the owners of ordered destinations",
			TTL:         in.ttl,
			Replicas:    s.opts.Replicas,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, instanceBucket)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %s: %w", instanceBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %s: %w", instanceBucket, err)
	}
	return kv, st.TTL(), nil
}

// lease is how long the bucket keeps a lease after its last write.
func (in *instances) lease() time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.ttl
}

func (in *instances) bucket() jetstream.KeyValue {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.kv
}

func (in *instances) close() {
	if in == nil {
		return
	}
	close(in.stop)
	<-in.done
}

// Ownership is this jethook's lease on one ordered destination. Its
// methods are safe for concurrent use.
type Ownership struct {
	s           *Store
	key         string
	route, dest string

	mu    sync.Mutex
	rev   uint64    // the lease's revision in the bucket; 0 while not held
	valid time.Time // until when it is held: ttl/2 after its last write was sent
	taken time.Time // when it was taken, until TakeOver is done; zero after
}

// Ownership returns route's destination's lease, the same one each time
// (a reload keeps it); nil unless Waits.
func (s *Store) Ownership(route, dest string) *Ownership {
	if !s.Waits() {
		return nil
	}
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	k := "owner." + route + "." + dest
	o, ok := s.owned[k]
	if !ok {
		if s.owned == nil {
			s.owned = map[string]*Ownership{}
		}
		o = &Ownership{s: s, key: k, route: route, dest: dest}
		s.owned[k] = o
	}
	return o
}

// Every is how often Keep should be called while the destination runs.
func (o *Ownership) Every() time.Duration { return o.s.inst.lease() / 6 }

// Grace is how long a lease that is not renewed stays held here; another
// jethook can take it no sooner than twice that after its last renewal.
func (o *Ownership) Grace() time.Duration { return o.s.inst.lease() / 2 }

// Ready reports whether the bucket is open: until it is, no one can be
// known to hold the lease.
func (o *Ownership) Ready() bool { return o.s.inst.bucket() != nil }

// Held reports whether this jethook may fetch for the destination now.
func (o *Ownership) Held() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rev != 0 && time.Now().Before(o.valid)
}

// Keep renews the lease if this jethook holds it, or takes it if no one
// does, and reports whether it is held. An error leaves the lease as it
// was, held until Held says otherwise.
func (o *Ownership) Keep(ctx context.Context) (held bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.s.opts.PublishTimeout)
	defer cancel()
	held, took, err := o.keep(ctx)
	if took {
		o.mu.Lock()
		o.taken = time.Now()
		o.mu.Unlock()
	}
	return held, err
}

// markPending marks in the index, before the lease is taken, that its
// TakeOver is to be done: a jethook that stops before it is done, and
// finds the lease still its own at its next start, takes over then. A
// mark left by a take that failed only costs a TakeOver more.
func (o *Ownership) markPending() error {
	if err := o.s.idx.db.Set(pendingKey(o.route, o.dest), nil, pebble.Sync); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	return nil
}

// pendingKey is the index's mark of a lease taken whose TakeOver is not
// done: 't' route 0x00 dest.
func pendingKey(route, dest string) []byte {
	return append([]byte{'t'}, route+"\x00"+dest...)
}

// Taken is when the lease was taken, while the ordering of the owner
// before is still to be read (TakeOver), and zero otherwise. The records
// are read, and anything fetched, only once that owner cannot have an
// event in flight any more.
func (o *Ownership) Taken() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.taken
}

// TakeOver is Store.TakeOver for the lease's destination, once it is
// taken: afterwards Keep no longer reports it taken.
func (o *Ownership) TakeOver(ctx context.Context, now time.Time) (int, error) {
	n, err := o.s.TakeOver(ctx, o.route, o.dest, now)
	if err == nil {
		o.mu.Lock()
		o.taken = time.Time{}
		o.mu.Unlock()
	}
	return n, err
}

func (o *Ownership) keep(ctx context.Context) (held, taken bool, err error) {
	kv := o.s.inst.bucket()
	if kv == nil {
		return false, false, nil // not made yet (instances.make says why)
	}
	self := []byte(o.s.inst.self)
	sent := time.Now()
	o.mu.Lock()
	rev := o.rev
	o.mu.Unlock()
	if rev != 0 {
		next, err := kv.Update(ctx, o.key, self, rev)
		if err == nil {
			o.hold(next, sent)
			return true, false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return o.Held(), false, err
		}
		// Forgotten by the bucket (not renewed in time), and maybe taken
		// by another since: whatever comes next starts anew.
		o.hold(0, time.Time{})
	}
	e, err := kv.Get(ctx, o.key)
	switch {
	case err == nil && string(e.Value()) == o.s.inst.self:
		// This instance's, from before a restart on the same index (or a
		// write whose answer was lost): no one held it since, and its
		// ordering state here is the owner's, unless it stopped before
		// its TakeOver was done.
		next, err := kv.Update(ctx, o.key, self, e.Revision())
		if err != nil {
			return false, false, ignoreTaken(err)
		}
		o.hold(next, sent)
		_, closer, err := o.s.idx.db.Get(pendingKey(o.route, o.dest))
		if err == nil {
			closer.Close()
		}
		// A mark that cannot be read counts as there: one TakeOver more.
		return true, !errors.Is(err, pebble.ErrNotFound), nil
	case err == nil:
		return false, false, nil // another's
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return false, false, err
	}
	if err := o.markPending(); err != nil {
		return false, false, err
	}
	next, err := kv.Create(ctx, o.key, self)
	if err != nil {
		return false, false, ignoreTaken(err)
	}
	o.hold(next, sent)
	return true, true, nil
}

// ignoreTaken is nil for the error of a write that found the lease taken.
func ignoreTaken(err error) error {
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return err
}

func (o *Ownership) hold(rev uint64, sent time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rev = rev
	if rev != 0 {
		o.valid = sent.Add(o.Grace())
	}
}

// Release gives the lease up, so that another jethook takes it at once
// (a stop, or the destination removed or no longer ordered). Only the
// revision this jethook wrote is deleted.
func (o *Ownership) Release(ctx context.Context) error {
	o.mu.Lock()
	rev := o.rev
	o.rev, o.taken = 0, time.Time{}
	o.mu.Unlock()
	kv := o.s.inst.bucket()
	if rev == 0 || kv == nil {
		return nil
	}
	return ignoreTaken(kv.Delete(ctx, o.key, jetstream.LastRevision(rev)))
}

// releaseOwned gives up the leases still held when the store closes.
func (s *Store) releaseOwned() {
	s.ownMu.Lock()
	owned := make([]*Ownership, 0, len(s.owned))
	for _, o := range s.owned {
		owned = append(owned, o)
	}
	s.ownMu.Unlock()
	for _, o := range owned {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.PublishTimeout)
		_ = o.Release(ctx)
		cancel()
	}
}
