package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// publishOrders stores n webhooks on github, order i with body
// {"order":i} and ids that start with batch, each followed by two on
// stripe, and returns the time before the first and after the last.
func publishOrders(t *testing.T, st *store.Store, batch string, n int) (time.Time, time.Time) {
	t.Helper()
	ctx := context.Background()
	from := time.Now()
	for i := range n {
		if _, err := st.Publish(ctx, envelope(fmt.Sprintf("gh-%s%03d", batch, i), fmt.Sprintf(`{"order":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			o := envelope(fmt.Sprintf("st-%s%03d-%d", batch, i, j), fmt.Sprintf(`{"order":%d}`, i))
			o.Route = "stripe"
			if _, err := st.Publish(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	return from, time.Now()
}

// pages runs q page by page to the end and returns the event ids found.
func pages(t *testing.T, st *store.Store, q store.Scan) []string {
	t.Helper()
	var ids []string
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("paging does not end")
		}
		end, err := st.Search(context.Background(), q, func(h store.Hit) bool {
			ids = append(ids, h.Envelope.EventID)
			return true
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if end.Next == 0 {
			return ids
		}
		q.Cursor = end.Next
	}
}

func TestSearchFindsWhatMatchIsGivenInOrderPageByPage(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "", 60)
	odd := func(e *store.Envelope, _ uint64) bool {
		return bytes.HasSuffix(e.Body, []byte("1}")) || bytes.HasSuffix(e.Body, []byte("3}"))
	}
	var want []string
	for i := 59; i >= 0; i-- {
		if i%10 == 1 || i%10 == 3 {
			want = append(want, fmt.Sprintf("gh-%03d", i))
		}
	}
	for _, limit := range []int{1, 5, 100} {
		t.Run(fmt.Sprintf("newest first in pages of %d", limit), func(t *testing.T) {
			got := pages(t, st, store.Scan{Route: "github", Match: odd, Limit: limit})
			if !slices.Equal(got, want) {
				t.Fatalf("found %v\nwant %v", got, want)
			}
		})
		t.Run(fmt.Sprintf("oldest first in pages of %d", limit), func(t *testing.T) {
			got := pages(t, st, store.Scan{Route: "github", Match: odd, Limit: limit, Oldest: true})
			rev := slices.Clone(want)
			slices.Reverse(rev)
			if !slices.Equal(got, rev) {
				t.Fatalf("found %v\nwant %v", got, rev)
			}
		})
	}
	t.Run("every route when none is named", func(t *testing.T) {
		got := pages(t, st, store.Scan{Limit: 1000})
		if len(got) != 180 {
			t.Fatalf("found %d webhooks, want 180", len(got))
		}
	})
	t.Run("not a route name", func(t *testing.T) {
		if _, err := st.Search(context.Background(), store.Scan{Route: "a.>", Limit: 1}, func(store.Hit) bool { return true }, nil); err == nil {
			t.Fatal("a route with subject wildcards was searched")
		}
	})
}

func TestSearchKeepsToItsTimeWindow(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "a", 5)
	// Stream times are the server's: wait for the clock to move past them.
	mid := time.Now()
	for !time.Now().After(mid) {
		time.Sleep(time.Millisecond)
	}
	from, _ := publishOrders(t, st, "b", 3)
	for _, oldest := range []bool{false, true} {
		got := pages(t, st, store.Scan{Route: "github", Since: from, Limit: 100, Oldest: oldest})
		if len(got) != 3 {
			t.Fatalf("oldest first %v: since the second batch found %v, want its 3", oldest, got)
		}
		got = pages(t, st, store.Scan{Route: "github", Until: from, Limit: 100, Oldest: oldest})
		if len(got) != 5 {
			t.Fatalf("oldest first %v: until the second batch found %v, want the first 5", oldest, got)
		}
	}
}

func TestSearchStopsAtItsByteBoundAndGoesOnFromThere(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "", 200)
	for _, oldest := range []bool{false, true} {
		q := store.Scan{Route: "github", Limit: 1000, MaxBytes: 20 << 10, Oldest: oldest}
		var ids []string
		progressed := 0
		for page := 0; ; page++ {
			if page > 200 {
				t.Fatal("paging does not end")
			}
			end, err := st.Search(context.Background(), q, func(h store.Hit) bool {
				ids = append(ids, h.Envelope.EventID)
				return true
			}, func(store.ScanProgress) { progressed++ })
			if err != nil {
				t.Fatal(err)
			}
			if end.Bytes > 2*q.MaxBytes {
				t.Fatalf("oldest first %v: a page read %d bytes, bound %d", oldest, end.Bytes, q.MaxBytes)
			}
			if end.Next == 0 {
				break
			}
			if end.Stopped != "max_bytes" {
				t.Fatalf("oldest first %v: a page stopped for %q, want max_bytes", oldest, end.Stopped)
			}
			q.Cursor = end.Next
		}
		if len(ids) != 200 || progressed == 0 {
			t.Fatalf("oldest first %v: %d webhooks over the pages (want 200), %d progress reports", oldest, len(ids), progressed)
		}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != 200 {
			t.Fatalf("oldest first %v: a webhook was found twice", oldest)
		}
	}
}

func TestSearchThatMatchesOnHeadersReadsNoBodyYetHandsOutWholeWebhooks(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "", 30)
	for _, oldest := range []bool{false, true} {
		var bodies, headers int
		q := store.Scan{Route: "github", Limit: 100, Oldest: oldest, NoBody: true, Match: func(e *store.Envelope, _ uint64) bool {
			bodies += len(e.Body)
			headers += len(e.Header)
			return e.Header["X-Github-Delivery"][0] == "gh-007"
		}}
		var hits []store.Hit
		if _, err := st.Search(context.Background(), q, func(h store.Hit) bool {
			hits = append(hits, h)
			return true
		}, nil); err != nil {
			t.Fatal(err)
		}
		if bodies != 0 || headers == 0 {
			t.Fatalf("oldest first %v: match was given %d body bytes and %d headers; want none and some", oldest, bodies, headers)
		}
		if len(hits) != 1 || string(hits[0].Envelope.Body) != `{"order":7}` || hits[0].Size != len(`{"order":7}`) {
			t.Fatalf("oldest first %v: hits %+v, want gh-007 with its body", oldest, hits)
		}
	}
}

func TestSearchThatMatchesOnTheBodyGivesMatchNoHeaders(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "", 10)
	headers := 0
	got := pages(t, st, store.Scan{Route: "github", Limit: 100, NoHeaders: true, Match: func(e *store.Envelope, _ uint64) bool {
		headers += len(e.Header)
		return string(e.Body) == `{"order":3}`
	}})
	if headers != 0 || !slices.Equal(got, []string{"gh-003"}) {
		t.Fatalf("match was given %d headers and found %v; want none and gh-003", headers, got)
	}
}

// Match is told what the ingress recorded: whether the body is JSON, so
// an expression reads it without checking it again.
func TestSearchTellsMatchWhetherTheBodyIsKnownJSON(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	known := envelope("known", `{"order":1}`)
	known.JSON = true
	for _, e := range []*store.Envelope{known, envelope("unknown", `{"order":2}`)} {
		if _, err := st.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	pages(t, st, store.Scan{Route: "github", Limit: 10, Match: func(e *store.Envelope, _ uint64) bool {
		got[e.EventID] = e.JSON
		return false
	}})
	if len(got) != 2 || !got["known"] || got["unknown"] {
		t.Fatalf("Match saw JSON %v, want known true and unknown false", got)
	}
}

// Match sees each webhook as a lookup by id returns it, whichever way
// the search reads the server: in process (with or without a client
// token) or over a NATS connection to an external server.
func TestSearchGivesMatchTheWebhookAsStored(t *testing.T) {
	t.Parallel()
	external := func(t *testing.T) store.Options {
		port := testkit.FreePort(t)
		if err := natsOn(t, port, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		return store.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	}
	for _, tc := range []struct {
		name string
		opts func(*testing.T) store.Options
	}{
		{"embedded", func(*testing.T) store.Options { return store.Options{} }},
		{"embedded with a client token", func(*testing.T) store.Options { return store.Options{ClientToken: `s3cr"et`} }},
		{"external", external},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := storetest.Open(t, tc.opts(t))
			ctx := context.Background()
			e := envelope("odd", `{"order":1}`)
			e.Method, e.JSON = "PUT", true
			e.Header["X-Odd"] = []string{"a: b:c", "x\ty", ""}
			if _, err := st.Publish(ctx, e); err != nil {
				t.Fatal(err)
			}
			publishOrders(t, st, "", 3)
			want, _, err := st.Event(ctx, "odd", "github")
			if err != nil {
				t.Fatal(err)
			}
			for _, noHeaders := range []bool{false, true} {
				var got []store.Envelope
				pages(t, st, store.Scan{Route: "github", Limit: 10, NoHeaders: noHeaders, Match: func(e *store.Envelope, _ uint64) bool {
					if e.EventID == "odd" {
						got = append(got, store.Envelope{Route: e.Route, EventID: e.EventID, Method: e.Method, JSON: e.JSON,
							Header: maps.Clone(e.Header), Body: bytes.Clone(e.Body)})
					}
					return false
				}})
				if len(got) != 1 {
					t.Fatalf("Match saw the webhook %d times, want once", len(got))
				}
				g := got[0]
				wantHeader := want.Header
				if noHeaders {
					wantHeader = map[string][]string{}
				}
				if g.Route != want.Route || g.Method != want.Method || g.JSON != want.JSON || !bytes.Equal(g.Body, want.Body) ||
					!reflect.DeepEqual(g.Header, wantHeader) {
					t.Errorf("without headers %v: Match saw %+v\nstored %+v", noHeaders, g, want)
				}
			}
		})
	}
}

func TestSearchEndsWhenItsContextDoes(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	publishOrders(t, st, "", 100)
	ctx, cancel := context.WithCancel(context.Background())
	matched := 0
	_, err := st.Search(ctx, store.Scan{Route: "github", Limit: 1000, Oldest: true, Match: func(*store.Envelope, uint64) bool {
		matched++
		cancel()
		return false
	}}, func(store.Hit) bool { return true }, nil)
	if !errors.Is(err, context.Canceled) || matched != 1 {
		t.Fatalf("Search after its context ended: %v, having matched %d webhooks; want context.Canceled after 1", err, matched)
	}
}

// The stream holds replays (and due retries) beside webhooks: a search
// reads webhooks alone, of every route or of one, whether it reads a
// span of the stream through a subject filter or takes the subjects it
// wants itself.
func TestSearchReadsWebhooksNotTheReplaysBesideThem(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	ctx := context.Background()
	const n = 3000 // longer than the span read without a filter
	for i := range n {
		e := envelope(fmt.Sprintf("gh-%04d", i), fmt.Sprintf(`{"order":%d}`, i))
		if i%3 == 2 {
			e.Route = "stripe"
		}
		stored, err := st.Publish(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if _, err := st.Resend(ctx, e, stored.Seq, "app", 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		route string
		want  int
	}{{"", n}, {"github", n - n/3}, {"stripe", n / 3}} {
		for _, oldest := range []bool{false, true} {
			got := pages(t, st, store.Scan{Route: c.route, Limit: n, Oldest: oldest})
			slices.Sort(got)
			if len(got) != c.want || len(slices.Compact(got)) != c.want {
				t.Errorf("route %q, oldest first %v: found %d webhooks, want %d", c.route, oldest, len(got), c.want)
			}
		}
	}
}
