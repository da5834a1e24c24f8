package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The embedded server closes a connection it cannot write to within its
// write deadline. A search's in-process connection has no buffer, and an
// expression may take its time over a webhook: the wire reads what the
// server sends while Match works, so a Match slower than the deadline
// ends no search.
func TestWireOutlastsTheServersWriteDeadlineWhileMatchIsSlow(t *testing.T) {
	t.Parallel()
	const deadline = 250 * time.Millisecond
	ctx := context.Background()
	st, err := Open(ctx, Options{DataDir: t.TempDir(), PublishTimeout: 2 * time.Second, writeDeadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	n := 3 * scanBatch
	for i := range n {
		e := &Envelope{Route: "github", EventID: fmt.Sprintf("evt_%04d", i), Method: "POST", ReceivedAt: time.Now(),
			Body: []byte(fmt.Sprintf(`{"id":"evt_%04d"}`, i))}
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	slow := true
	end, err := st.Search(ctx, Scan{Route: "github", Oldest: true, Limit: 1, Match: func(*Envelope, uint64) bool {
		if slow {
			// The server sends the batches asked for meanwhile.
			time.Sleep(4 * deadline)
			slow = false
		}
		return false
	}}, func(Hit) bool { return true }, nil)
	if err != nil || end.Scanned != n {
		t.Fatalf("search with a Match slower than the server's write deadline: scanned %d of %d, %v", end.Scanned, n, err)
	}
}

// A search's wire is kept for the next search: one connection for a run
// of searches, unless a search ended badly or the connection did.
func TestASearchKeepsItsWireForTheNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, Options{DataDir: t.TempDir(), PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for i := range 600 {
		e := &Envelope{Route: "github", EventID: fmt.Sprintf("evt_%04d", i), Method: "POST", ReceivedAt: time.Now(),
			Body: []byte(fmt.Sprintf(`{"id":"evt_%04d"}`, i))}
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	found := 0
	search := func(ctx context.Context) error {
		found = 0
		_, err := st.Search(ctx, Scan{Route: "github", Limit: 1000}, func(Hit) bool { found++; return true }, nil)
		return err
	}
	kept := func() *wire {
		st.wires.mu.Lock()
		defer st.wires.mu.Unlock()
		return st.wires.w
	}
	if err := search(ctx); err != nil || found != 600 {
		t.Fatalf("first search: %d found, %v", found, err)
	}
	first := kept()
	if first == nil {
		t.Fatal("no wire kept after a search")
	}
	clients := st.srv.NumClients()
	for range 3 {
		if err := search(ctx); err != nil || found != 600 {
			t.Fatalf("search again: %d found, %v", found, err)
		}
		if kept() != first || st.srv.NumClients() != clients {
			t.Fatalf("a search made a connection of its own: %d clients, %d before", st.srv.NumClients(), clients)
		}
	}

	// A page that ends at its first hit leaves the rest of what it asked
	// for on the wire: the next search reads past it.
	for _, oldest := range []bool{true, false} {
		if _, err := st.Search(ctx, Scan{Route: "github", Limit: 1, Oldest: oldest}, func(Hit) bool { return true }, nil); err != nil {
			t.Fatal(err)
		}
		if err := search(ctx); err != nil || found != 600 || kept() != first {
			t.Fatalf("search after a page of 1 (oldest first %v): %d found, %v", oldest, found, err)
		}
	}

	// A search whose context ends midway does not leave its wire.
	cut, cancel := context.WithCancel(ctx)
	_, err = st.Search(cut, Scan{Route: "github", Limit: 1000, Match: func(*Envelope, uint64) bool { cancel(); return false }},
		func(Hit) bool { return true }, nil)
	if err == nil || kept() != nil {
		t.Fatalf("a search cut short: %v, and its wire kept: %v", err, kept() != nil)
	}

	// A kept wire whose connection ended is not taken again.
	if err := search(ctx); err != nil || found != 600 {
		t.Fatalf("search after one cut short: %d found, %v", found, err)
	}
	w := kept()
	_ = w.conn.Close()
	<-w.in.ended
	if err := search(ctx); err != nil || found != 600 {
		t.Fatalf("search after its kept wire's connection ended: %d found, %v", found, err)
	}
	if kept() == w || kept() == nil {
		t.Fatal("the ended wire was taken again, or none kept")
	}
}
