package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	celfilter "github.com/jethook/jethook/filter"
)

// openBlockStore opens an embedded store whose writer fills value
// filters, stores the envelopes es in WEBHOOKS (sequences 1 on) without
// telling its writer, and returns it: the test then tells the writer of
// them, as publish does, in the order their acks come back.
func openBlockStore(t *testing.T, es []*Envelope) (context.Context, *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := Open(ctx, Options{DataDir: t.TempDir(), PublishTimeout: 2 * time.Second, BodyValues: celfilter.BodyValues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i, e := range es {
		ack, err := s.js.PublishMsg(ctx, e.msg(Subject(e.Route)))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != uint64(i+1) {
			t.Fatalf("envelope %d stored at %d", i, ack.Sequence)
		}
	}
	return ctx, s
}

// indexAsPublished tells s's writer of e, stored at seq, as publish
// does once the stream acked it.
func indexAsPublished(s *Store, e *Envelope, seq uint64) {
	s.indexPublished(e, seq, bodyValues(s.opts.BodyValues, e.Body))
}

func shopEnvelope(i int, body string, signed bool) *Envelope {
	e := &Envelope{Route: "shop", EventID: fmt.Sprintf("evt-%d", i), Method: "POST", JSON: true,
		ReceivedAt: time.Now(), Body: []byte(body)}
	if signed {
		e.SignedKey = fmt.Sprintf("signed:%d", i)
	}
	return e
}

// searchWanted searches route shop for webhooks whose body holds the
// value "wanted", oldest first, and returns the sequences found.
func searchWanted(t *testing.T, ctx context.Context, s *Store) []uint64 {
	t.Helper()
	var found []uint64
	q := Scan{Route: "shop", Oldest: true, Limit: 100, Values: [][]string{{"wanted"}},
		Match: func(e *Envelope, _ uint64) bool { return bytes.Contains(e.Body, []byte(`"wanted"`)) }}
	end, err := s.Search(ctx, q, func(h Hit) bool { found = append(found, h.Seq); return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scanned %d, skipped %d", end.Scanned, end.Skipped)
	return found
}

// wantedFirst is n webhooks of route shop, the first with the body
// first, the others with bodies that hold no "wanted".
func wantedFirst(n int, first string, signed bool) []*Envelope {
	es := make([]*Envelope, n)
	for i := range es {
		body := fmt.Sprintf(`{"id":"other-%d"}`, i)
		if i == 0 {
			body = first
		}
		es[i] = shopEnvelope(i, body, signed)
	}
	return es
}

// findsTheFirst waits for s's writer to take in what it was told, then
// checks that a search for "wanted" finds the webhook at 1 alone.
func findsTheFirst(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	if !s.writer.sync(ctx, 10*time.Second) {
		t.Fatal("the writer did not take in the webhooks")
	}
	if found := searchWanted(t, ctx, s); len(found) != 1 || found[0] != 1 {
		t.Errorf("found %v, want the webhook at 1", found)
	}
}

// A signed webhook is told to the writer twice: with its values, then
// under its signed key. When the first completes its block (the block's
// first sequence acked last), the second must not open the block again,
// holding that sequence and none of its values: a search would then pass
// over the webhook it looks for.
func TestASignedWebhookThatCompletesItsBlockIsFound(t *testing.T) {
	t.Parallel()
	for _, signed := range []bool{false, true} {
		t.Run(fmt.Sprintf("signed %v", signed), func(t *testing.T) {
			t.Parallel()
			es := wantedFirst(valueBlock, `{"id":"wanted"}`, signed)
			ctx, s := openBlockStore(t, es)
			for seq := 2; seq <= valueBlock; seq++ {
				indexAsPublished(s, es[seq-1], uint64(seq))
			}
			indexAsPublished(s, es[0], 1) // its ack came back last
			findsTheFirst(t, ctx, s)
		})
	}
}

// A body too large to hash leaves its block without a filter: the same
// webhook's second entry (its signed key) must not mark its sequence
// taken in, or a search for a value of that body would pass over it, in
// the block being filled and, once whole, in the block's filter.
func TestASignedWebhookTooLargeToHashIsFound(t *testing.T) {
	t.Parallel()
	large := `{"id":"wanted","pad":"` + string(bytes.Repeat([]byte("x"), valueBodyMax)) + `"}`
	for _, c := range []struct {
		n      int
		signed bool
	}{{valueBlock / 2, false}, {valueBlock / 2, true}, {valueBlock, false}, {valueBlock, true}} {
		n := c.n
		t.Run(fmt.Sprintf("%d of the block stored, signed %v", n, c.signed), func(t *testing.T) {
			t.Parallel()
			es := wantedFirst(n, large, c.signed)
			ctx, s := openBlockStore(t, es)
			for seq := 1; seq <= n; seq++ {
				indexAsPublished(s, es[seq-1], uint64(seq))
			}
			findsTheFirst(t, ctx, s)
		})
	}
}

// Searches for a value while the writer fills blocks: run with -race, the
// open blocks are read under their lock only. Every webhook holding the
// value that was stored before a search began is found by it.
func TestSearchesForAValueBesideIngestFindEveryEarlierHit(t *testing.T) {
	t.Parallel()
	ctx, s := openBlockStore(t, nil)
	const n, writers = 3 * valueBlock, 8
	done := make(chan struct{})
	hits := make(chan int, n)
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < n; i += writers {
					body := fmt.Sprintf(`{"id":"other-%d"}`, i)
					if i%97 == 0 {
						body = `{"id":"wanted"}`
					}
					if _, err := s.Publish(ctx, shopEnvelope(i, body, i%2 == 0)); err != nil {
						t.Error(err)
						return
					}
					if i%97 == 0 {
						hits <- i
					}
				}
			})
		}
		wg.Wait()
	}()
	known := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		// Hits acked before this search began must be found.
		for more := true; more; {
			select {
			case <-hits:
				known++
			default:
				more = false
			}
		}
		if found := searchWanted(t, ctx, s); len(found) < known {
			t.Fatalf("found %d webhooks with the value, %d were stored before the search", len(found), known)
		}
	}
}
