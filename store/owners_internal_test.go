package store

import (
	"context"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// A store killed while it holds a lease (so the lease stays in the
// bucket) and started again on the same index holds it again at once, as
// the owner it was: its index knows the destination's ordering, so there
// is nothing to take over; unless it was killed before its TakeOver was
// done, which it then does.
func TestAStoreStartedAgainOnItsIndexKeepsItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := Options{URL: testkit.NATSServer(t), DataDir: t.TempDir(), WaitingEvery: time.Second, PublishTimeout: 2 * time.Second}
	open := func() *Store {
		st, err := Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	a := open()
	testkit.Eventually(t, 10*time.Second, "a takes shop/app", func() bool {
		held, err := a.Ownership("shop", "app").Keep(ctx)
		return err == nil && held
	})
	kill := func() {
		a.ownMu.Lock()
		a.owned = nil // killed: nothing gives the lease up
		a.ownMu.Unlock()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		a = open()
		testkit.Eventually(t, 10*time.Second, "a holds shop/app again", func() bool {
			held, err := a.Ownership("shop", "app").Keep(ctx)
			return err == nil && held
		})
	}
	kill() // before its TakeOver
	if a.Ownership("shop", "app").Taken().IsZero() {
		t.Fatal("a, killed before its TakeOver was done, does not take over at its next start")
	}
	if _, err := a.Ownership("shop", "app").TakeOver(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	kill() // after it
	defer a.Close()
	if taken := a.Ownership("shop", "app").Taken(); !taken.IsZero() {
		t.Errorf("a, on its own index, took its own lease as a new owner (at %s)", taken)
	}
}
