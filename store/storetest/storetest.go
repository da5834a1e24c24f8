// Package storetest opens a real embedded store for tests: JetStream on a
// temporary directory, closed when the test ends, and waits for the
// states of its consumers. There is no fake store. Helpers that know
// nothing of the store are in internal/testkit.
package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/store"
)

// Open starts an embedded store in opts.DataDir (a new t.TempDir() when
// empty) and closes it at the end of the test.
func Open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.PublishTimeout == 0 {
		opts.PublishTimeout = 2 * time.Second
	}
	if opts.BodyValues == nil {
		opts.BodyValues = filter.BodyValues // as jethook runs it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Settled waits until every destination's consumer holds nothing: no
// message pending, none in flight or waiting in backoff, none parked. From
// then on no attempt is made until something new is stored, so a test
// that waited for it can assert that an unwanted delivery did not happen.
//
// It takes two readings in a row: one reading lists the consumers, then
// reads the parked counts, and a parked webhook that came due between the
// two (its due record stored after the listing, its parked record purged
// and uncounted before the count) is in neither; by the next reading its
// due record is pending, in flight, parked again (counted from its
// parking, store.ParkedCount) or settled.
func Settled(t testing.TB, st *store.Store) {
	t.Helper()
	backlogs(t, st, "every destination settled", 2, func(b store.Backlog) bool {
		return b.Pending == 0 && b.AckPending == 0 && b.Parked == 0
	})
}

// Backlog waits until every destination's backlog satisfies cond, such
// as "3 pending and none in flight" for a paused destination.
func Backlog(t testing.TB, st *store.Store, msg string, cond func(store.Backlog) bool) {
	t.Helper()
	backlogs(t, st, msg, 1, cond)
}

// backlogs waits until every destination's backlog satisfies cond in n
// readings in a row.
func backlogs(t testing.TB, st *store.Store, msg string, n int, cond func(store.Backlog) bool) {
	t.Helper()
	var last []store.Backlog
	deadline := time.Now().Add(10 * time.Second)
	for inARow := 0; ; {
		bs, err := st.Backlogs(context.Background())
		if err == nil && len(bs) > 0 && !slices.ContainsFunc(bs, func(b store.Backlog) bool { return !cond(b) }) {
			if inARow++; inARow == n {
				return
			}
			continue
		}
		inARow, last = 0, bs
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s: backlogs %+v, err %v", msg, last, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SkipJetStreamRestartUnderRace skips a test that stops and starts
// JetStream in a running nats-server when it runs under -race: re-enabling
// JetStream (nats-server v2.15.3, jetstream_api.go:1115) writes the API
// queues without a lock the client goroutines reading them (:1028) take,
// and the detector reports it in about a third of runs. e2e's
// TestAFullDiskAnswers503AndRecoversWithoutARestart covers the same
// recovery in a jethook built without -race.
func SkipJetStreamRestartUnderRace(t testing.TB) {
	t.Helper()
	if raceDetector {
		t.Skip("restarts JetStream, which nats-server does not synchronise for the race detector; run without -race")
	}
}
