package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// publishIDs stores n webhooks on github, webhook i with the event id
// <batch>-<i> and the body {"order":{"id":"o-<i>","n":<i>}}, but for the bodies
// given in odd, 32 at a time.
func publishIDs(t *testing.T, st *store.Store, batch string, n int, odd map[int]string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				body, ok := odd[i]
				if !ok {
					body = fmt.Sprintf(`{"order":{"id":"o-%d","n":%d},"note":"n"}`, i, i)
				}
				if _, err := st.Publish(context.Background(), envelope(fmt.Sprintf("%s-%d", batch, i), body)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// searchExpr runs one search for the filter expression expr, page by
// page, as the admin API does, and returns the bodies found and what the
// pages read and passed over.
func searchExpr(t *testing.T, st *store.Store, expr string, oldest bool, limit int) (found []string, end store.ScanEnd) {
	t.Helper()
	f, err := filter.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	q := store.Scan{Route: "github", Values: f.Values(), Oldest: oldest, Limit: limit,
		Match: func(e *store.Envelope, _ uint64) bool {
			ok, _ := f.Match(&filter.Event{Body: e.Body, JSON: e.JSON})
			return ok
		}}
	var total store.ScanEnd
	for range 100 {
		end, err := st.Search(context.Background(), q, func(h store.Hit) bool {
			found = append(found, string(h.Envelope.Body))
			return true
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		total.Scanned += end.Scanned
		total.Skipped += end.Skipped
		if end.Next == 0 {
			return found, total
		}
		q.Cursor = end.Next
	}
	t.Fatal("paging does not end")
	return nil, total
}

func TestSearchForABodyValuePassesOverBlocksWithoutIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := storetest.Open(t, store.Options{DataDir: dir})
	const n = 6*512 + 100 // six whole blocks and one being filled
	odd := map[int]string{
		700:  `{"order":{"id":"twice"}}`,
		2500: `{"order":{"id":"twice"}}`,
		1200: `{"order":{"id":"esc-\u00e9"}}`, // the value is esc-é
		1300: `{"order":{"key":"o-1300-as-key"}}`,
		1301: `{"order":{"key":{"o-1301-as-key":1}}}`,
	}
	publishIDs(t, st, "v", n, odd)

	cases := []struct {
		expr string
		want []string
	}{
		{`body.order.id == "o-1500"`, []string{`{"order":{"id":"o-1500","n":1500},"note":"n"}`}},
		{`body.order.id == "o-3100"`, []string{`{"order":{"id":"o-3100","n":3100},"note":"n"}`}}, // in the block being filled
		{`body.order.n == 1501`, []string{`{"order":{"id":"o-1501","n":1501},"note":"n"}`}},
		{`body.order.n == 1.502e3`, []string{`{"order":{"id":"o-1502","n":1502},"note":"n"}`}},
		{`body.order.id in ["o-1600", "o-2600"]`, []string{`{"order":{"id":"o-2600","n":2600},"note":"n"}`, `{"order":{"id":"o-1600","n":1600},"note":"n"}`}},
		{`body.order.id == "o-1700" || body.order.n == 2700`, []string{`{"order":{"id":"o-2700","n":2700},"note":"n"}`, `{"order":{"id":"o-1700","n":1700},"note":"n"}`}},
		{`body.order.id == "esc-é"`, []string{odd[1200]}},
		{`"twice" == body.order.id && body.order.id.startsWith("t")`, []string{odd[2500], odd[700]}},
		{`body.order.key == "o-1300-as-key"`, []string{odd[1300]}},
		{`body.order.key == "o-1301-as-key"`, nil}, // a key, not a value
		{`body.order.id == "none"`, nil},
	}
	check := func(t *testing.T, st *store.Store) {
		for _, c := range cases {
			for _, oldest := range []bool{false, true} {
				for _, limit := range []int{1, 50} {
					found, end := searchExpr(t, st, c.expr, oldest, limit)
					want := slices.Clone(c.want)
					if oldest {
						slices.Reverse(want)
					}
					if !slices.Equal(found, want) {
						t.Errorf("%s, oldest first %v, pages of %d: found %q, want %q", c.expr, oldest, limit, found, want)
					}
					// Every whole block but the match's (two for
					// "twice") and the first (its sequence 1 may be the
					// store's own probe) is passed over. (Newest first,
					// a page that ends at a hit reads the rest of its
					// window again on the next page.)
					if end.Skipped < 3*512 || limit > 1 && end.Scanned+end.Skipped > n+512 {
						t.Errorf("%s, oldest first %v, pages of %d: passed over %d, read %d of %d", c.expr, oldest, limit, end.Skipped, end.Scanned, n)
					}
				}
			}
		}
		// A search with no value to look for reads everything.
		found, end := searchExpr(t, st, `body.order.id.endsWith("-7")`, false, 1000)
		if len(found) != 1 || end.Skipped != 0 || end.Scanned != n {
			t.Errorf("a search with no value found %d, read %d and passed over %d of %d", len(found), end.Scanned, end.Skipped, n)
		}
	}
	check(t, st)
	if t.Failed() {
		return
	}
	// The filters are kept in the index across a restart.
	st.Close()
	check(t, storetest.Open(t, store.Options{DataDir: dir}))
}

// While traffic flows, the newest webhooks are in a block not yet whole:
// a search for a value passes over what of it the index's writer took in
// without the value, and reads the webhooks it has not taken in yet.
func TestSearchForABodyValuePassesOverTheBlockBeingFilled(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	const n = 400 // of the first block's 512 sequences
	publishIDs(t, st, "f", n, nil)
	var end store.ScanEnd
	testkit.Eventually(t, 10*time.Second, "the writer takes in every stored webhook", func() bool {
		var found []string
		found, end = searchExpr(t, st, `body.order.id == "none"`, false, 50)
		if len(found) != 0 {
			t.Fatalf("found %q", found)
		}
		return end.Skipped == n
	})
	if end.Scanned != 0 {
		t.Errorf("read %d webhooks besides passing over all %d", end.Scanned, n)
	}
	if found, _ := searchExpr(t, st, `body.order.id == "o-350"`, true, 50); len(found) != 1 {
		t.Errorf("a value of the block being filled: found %q", found)
	}
	// A webhook just stored is found, whether the writer has taken it in
	// yet or not (then the search reads it).
	publishIDs(t, st, "g", 1, map[int]string{0: `{"order":{"id":"new"}}`})
	if found, _ := searchExpr(t, st, `body.order.id == "new"`, false, 50); len(found) != 1 {
		t.Errorf("the newest webhook: found %q", found)
	}
}

// A stream created again under a kept index (its files lost, the index
// not) numbers its messages from 1 again: the filters of the old stream's
// blocks must not pass over the new one's.
func TestSearchOfAStreamCreatedAgainReadsWhatTheOldFiltersWouldPassOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := storetest.Open(t, store.Options{DataDir: dir})
	publishIDs(t, st, "old", 3*512, nil)
	if found, end := searchExpr(t, st, `body.order.id == "o-700"`, false, 50); len(found) != 1 || end.Skipped == 0 {
		t.Fatalf("before: found %q, passed over %d", found, end.Skipped)
	}
	st.Close()
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	st = storetest.Open(t, store.Options{DataDir: dir})
	// Block 1, which holds new-700, is not whole yet: the old stream's
	// filter of it lacks the new value.
	publishIDs(t, st, "new", 2*512-100, map[int]string{700: `{"order":{"id":"new-700"}}`})
	found, _ := searchExpr(t, st, `body.order.id == "new-700"`, false, 50)
	if len(found) != 1 {
		t.Fatalf("the new stream's webhook: found %q", found)
	}
}
