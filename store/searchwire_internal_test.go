package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

// askLog is a link that notes each ask a pull makes: what it asked for,
// and how much was then asked for and not yet received, this ask included.
type askLog struct {
	link
	p    *pull
	asks []string
}

func (l *askLog) publish(subject, reply string, data []byte) error {
	l.asks = append(l.asks, fmt.Sprintf("%s with %d out", data, l.p.asked-l.p.got))
	return l.link.publish(subject, reply, data)
}

// While webhooks arrive, a search asks for one small batch at a time, with
// nothing else asked for, so that its rests stop the server's part too;
// with none arriving it keeps two large batches asked for.
func TestPaceAsksOneSmallBatchAtATimeWhileIngestIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, Options{DataDir: t.TempDir(), PublishTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	n := 2*scanBatch + 3*busyBatch
	for i := range n {
		e := &Envelope{Route: "github", EventID: fmt.Sprintf("evt_%04d", i), Method: "POST", ReceivedAt: time.Now(), Body: []byte(`{}`)}
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, busy bool, count int) []string {
		t.Helper()
		c, err := st.main.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
			FilterSubject: "webhooks.github.*", MemoryStorage: true, InactiveThreshold: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		w, err := dialWire(ctx, st.srv, "")
		if err != nil {
			t.Fatal(err)
		}
		defer w.close()
		l := &askLog{link: w}
		var ingest ingestSeen
		p, err := pullFrom(l, &ingest, c.CachedInfo().Name)
		if err != nil {
			t.Fatal(err)
		}
		l.p = p
		for range count {
			if busy {
				ingest.stored(time.Now())
			}
			if _, err := p.next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return l.asks
	}
	t.Run("busy", func(t *testing.T) {
		small := fmt.Sprintf(`{"batch":%d,"expires":%d} with %d out`, busyBatch, pullExpires, busyBatch)
		got := read(t, true, 3*busyBatch)
		if want := []string{small, small, small}; !slices.Equal(got, want) {
			t.Fatalf("asks while ingest is busy:\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("idle", func(t *testing.T) {
		large := fmt.Sprintf(`{"batch":%d,"expires":%d}`, scanBatch, pullExpires)
		got := read(t, false, scanBatch+1)
		if want := []string{large + fmt.Sprintf(" with %d out", scanBatch), large + fmt.Sprintf(" with %d out", 2*scanBatch),
			large + fmt.Sprintf(" with %d out", 2*scanBatch)}; !slices.Equal(got, want) {
			t.Fatalf("asks while ingest is idle:\n%q\nwant\n%q", got, want)
		}
	})
}
