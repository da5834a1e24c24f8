package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunAtPostsEveryDuePostOnceAtItsRate(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
	}))
	defer srv.Close()
	// 200 a second for half a second: posts are due at 0, 5ms, … 495ms.
	l := runAt(context.Background(), srv.URL, 200, 500*time.Millisecond, 256, 0)
	if l.Requests != 100 || l.Failed != 0 || got.Load() != 100 {
		t.Fatalf("answered %d, failed %d, the server saw %d; want 100, 0, 100", l.Requests, l.Failed, got.Load())
	}
	if l.Elapsed < 495*time.Millisecond {
		t.Errorf("the posts took %s; the last was due at 495ms", l.Elapsed)
	}
	if l.P99 <= 0 || l.P50 > l.P99 {
		t.Errorf("p50 %s, p99 %s", l.P50, l.P99)
	}
}

// The scenario, in a process and apart, at a size for go test -race:
// the last hour's search finds its one webhook, the day's searches find
// none, and the one that names no value reads every webhook stored.
func TestSearchScenarioFindsWhatItLooksForInProcessAndApart(t *testing.T) {
	t.Parallel()
	bin := jethookBinary(t)
	for _, tc := range []struct {
		name string
		o    SearchOptions
	}{
		{"in process, closed loop", SearchOptions{}},
		{"apart, at a constant rate", SearchOptions{Apart: true, Binary: bin, Rate: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var progress bytes.Buffer
			o := tc.o
			o.Retained, o.BodySize, o.Clients, o.Load = 2400, 256, 8, 2
			o.Idle, o.Measured, o.Dir, o.Progress = 300*time.Millisecond, 200*time.Millisecond, t.TempDir(), &progress
			r, err := Search(context.Background(), o)
			if err != nil {
				t.Fatalf("%v\nprogress:\n%s", err, progress.String())
			}
			if r.Fill.Requests != 2400 || r.Idle.Requests == 0 || r.Idle.Failed != 0 {
				t.Fatalf("filled %d of 2400; idle load answered %d, failed %d", r.Fill.Requests, r.Idle.Requests, r.Idle.Failed)
			}
			if r.Selective.Found != 1 || r.Selective.First <= 0 {
				t.Errorf("the last hour's search found %d (first after %s); want its one webhook", r.Selective.Found, r.Selective.First)
			}
			if r.Full.Found != 0 || r.Unindexed.Found != 0 {
				t.Errorf("the day's searches found %d and %d; nothing matches them", r.Full.Found, r.Unindexed.Found)
			}
			if r.Unindexed.End.Scanned < 2400 {
				t.Errorf("the search that names no value read %d webhooks; 2400 and more are stored", r.Unindexed.End.Scanned)
			}
			for _, s := range []SearchRun{r.Selective, r.Full, r.Unindexed} {
				if s.Runs == 0 || s.Ingest.Requests == 0 || s.Ingest.Failed != 0 {
					t.Errorf("%s: %s: %d runs; the load beside it answered %d, failed %d", s.Window, s.Search.Expr, s.Runs, s.Ingest.Requests, s.Ingest.Failed)
				}
			}
		})
	}
}
