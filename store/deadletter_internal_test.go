package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Reads of the dead letters reach every one even when a fetch ends before
// the server answers, as nats.go ends a FetchNoWait a second after asking:
// here a proxy holds back the server's first delivery for longer than
// that, as a stalled server or process would. Taking the empty fetch for
// the end listed no dead letters, counted none, purged none, and gave a
// replay of the query nothing to replay and no next page.
func TestDeadLetterReadsReachEveryOneWhenAFetchEndsBeforeTheServerAnswers(t *testing.T) {
	t.Parallel()
	const exhausted, permanent = 3, 2
	for _, tc := range []struct {
		name string
		read func(*testing.T, *Store) (int, error)
		want int
	}{
		{"a listing of them all", func(t *testing.T, s *Store) (int, error) {
			dls, err := s.DeadLetters(t.Context(), "dlq.>", 10)
			return len(dls), err
		}, exhausted + permanent},
		{"a page of a query", func(t *testing.T, s *Store) (int, error) {
			p, err := s.QueryDeadLetters(t.Context(), DeadLetterQuery{Route: "shop"}, 0, 10)
			if p.Next != 0 {
				t.Errorf("next page at %d, want none", p.Next)
			}
			return len(p.DeadLetters), err
		}, exhausted + permanent},
		{"a count by reason", func(t *testing.T, s *Store) (int, error) {
			n, err := s.DeadLetterCount(t.Context(), DeadLetterQuery{Reason: "exhausted"})
			return int(n), err
		}, exhausted},
		{"a purge by reason", func(t *testing.T, s *Store) (int, error) {
			return s.PurgeDeadLetters(t.Context(), DeadLetterQuery{Reason: "permanent"})
		}, permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, s, px := storeBehindProxy(t)
			addDeadLetters(ctx, t, s, exhausted+permanent, func(i int) string {
				if i < exhausted {
					return "exhausted"
				}
				return "permanent"
			})
			px.HoldNext(1500 * time.Millisecond)
			got, err := tc.read(t, s)
			if err != nil || got != tc.want {
				t.Errorf("read %d dead letters (%v), want %d", got, err, tc.want)
			}
			if !px.Held() {
				t.Error("the proxy held back no delivery: the fetch was not cut short")
			}
		})
	}
}

// A page of dead letters has no gap when a fetch ends while the server
// sends its batch: nats.go keeps what arrived and drops the rest, and the
// next fetch must start after the last one read, not after the last one
// sent. Here a proxy lets the batch's first 100 through and holds the
// next back past the fetch's end. A consumer that counted what it sent as
// delivered went on after the dropped ones: the page missed dead letters
// in its middle, and a replay or a purge of the query passed them by.
func TestAPageOfDeadLettersHasNoGapWhenAFetchEndsMidBatch(t *testing.T) {
	t.Parallel()
	ctx, s, px := storeBehindProxy(t)
	const n = 300 // more than one batch
	addDeadLetters(ctx, t, s, n, func(int) string { return "exhausted" })
	px.HoldAfter(100, 1500*time.Millisecond)
	p, err := s.QueryDeadLetters(ctx, DeadLetterQuery{Route: "shop"}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.DeadLetters) != n {
		var gaps []string
		next := uint64(1)
		for _, d := range p.DeadLetters {
			if d.DLQSeq != next {
				gaps = append(gaps, fmt.Sprintf("%d-%d", next, d.DLQSeq-1))
			}
			next = d.DLQSeq + 1
		}
		t.Errorf("the page holds %d of %d dead letters; missing %v", len(p.DeadLetters), n, gaps)
	}
	if !px.Held() {
		t.Error("the proxy held back no delivery: the fetch was not cut short")
	}
}

// addDeadLetters stores n dead letters of route shop's destination app,
// with the reasons reason gives, and returns once the store's index has
// read them: it reads them through the proxy too, and its deliveries must
// have passed before the test holds one back.
func addDeadLetters(ctx context.Context, t *testing.T, s *Store, n int, reason func(int) string) {
	t.Helper()
	now := time.Now()
	for i := range n {
		e := &Envelope{Route: "shop", EventID: fmt.Sprintf("evt_%d", i), Method: "POST", ReceivedAt: now, Body: []byte(`{}`)}
		d := DeadLetter{Envelope: e, Destination: "app", Seq: uint64(i + 1), Reason: reason(i), Attempts: 1, FirstSeen: now, LastAttempt: now}
		if err := s.AddDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, ok, err := s.idx.latest(fmt.Sprintf("evt_%d", n-1), kindDeadLetter, "shop", "app", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the index did not read the dead letters")
		}
	}
}
