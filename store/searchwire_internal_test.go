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
