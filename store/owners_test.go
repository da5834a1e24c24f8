package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// One lease per ordered destination among the stores that share a NATS
// server: the first to ask takes it (and must read the records of the
// owner before); the other does not get it until it is given up; a
// store reopened on the same index keeps its own lease without reading
// them again.
func TestOneStoreAtATimeHoldsAnOrderedDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.NATSServer(t)
	dirA := t.TempDir()
	a := storetest.Open(t, store.Options{URL: url, DataDir: dirA, WaitingEvery: time.Second})
	b := storetest.Open(t, store.Options{URL: url, DataDir: t.TempDir(), WaitingEvery: time.Second})
	keep := func(st *store.Store) bool {
		t.Helper()
		held, err := st.Ownership("shop", "app").Keep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	// Each store opens the bucket in the background and holds nothing
	// until it has: b is asked only once its own is open, which may be
	// after a has taken, renewed and given up the lease.
	testkit.Eventually(t, 10*time.Second, "a takes shop/app", func() bool { return keep(a) })
	if a.Ownership("shop", "app").Taken().IsZero() {
		t.Error("a took the lease without having to read the records of the owner before")
	}
	testkit.Eventually(t, 10*time.Second, "b opens the bucket of owners", b.Ownership("shop", "app").Ready)
	if keep(b) {
		t.Fatal("b holds shop/app while a does")
	}
	if !keep(a) || keep(b) {
		t.Fatal("a's renewal did not keep shop/app from b")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !keep(b) {
		t.Fatal("b does not take shop/app once a gave it up")
	}
	if b.Ownership("shop", "app").Taken().IsZero() {
		t.Error("b took the lease from a without having to read a's records")
	}
	if _, err := b.Ownership("shop", "app").TakeOver(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !b.Ownership("shop", "app").Taken().IsZero() {
		t.Error("the lease is still to be taken over after TakeOver")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// a again, on its own index: the lease was given up, so a takes it as
	// a new owner would.
	a = storetest.Open(t, store.Options{URL: url, DataDir: dirA, WaitingEvery: time.Second})
	testkit.Eventually(t, 10*time.Second, "a takes shop/app again", func() bool { return keep(a) })
	if a.Ownership("shop", "app").Taken().IsZero() {
		t.Error("a took back a lease b held without having to read b's records")
	}
}
