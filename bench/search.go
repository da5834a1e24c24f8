package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jethook/jethook/admin"
)

// SearchOptions configure the search scenario; a zero field takes its
// default.
type SearchOptions struct {
	// Retained is how many webhooks the store holds when the searches run
	// (default 1,000,000).
	Retained int
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// Clients is how many posts are in flight at once while the store is
	// filled (default 64).
	Clients int
	// Load is how many clients post webhooks, one after the other, while
	// ingest's latency is measured, idle and during each search (default 4).
	Load int
	// Idle is how long ingest's idle latency is measured (default 10s).
	Idle time.Duration
	// Dir holds the run's temporary data directory.
	Dir string
	// Progress, if set, gets a line at each step of the run.
	Progress io.Writer
}

func (o *SearchOptions) applyDefaults() {
	if o.Retained <= 0 {
		o.Retained = 1_000_000
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.Load <= 0 {
		o.Load = 4
	}
	if o.Idle <= 0 {
		o.Idle = 10 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// SearchResult is what the search scenario measured: ingest's latency
// idle and during two searches of the retained webhooks through the admin
// API's Search, as GET /v1/events and the dashboard run it.
type SearchResult struct {
	Retained int
	Fill     Measurement // the posts that filled the store
	Idle     Measurement // ingest with no search running
	// Selective looks, newest first, for the one webhook that matches in
	// the last hour: the window that holds the last twenty-fourth of the
	// retained webhooks (as a day brings them at a steady rate); the
	// match is the hour's oldest, the last webhook the search reads. Full
	// then looks in the whole 24 h window for a value no webhook holds, and
	// Unindexed for an expression nothing matches that names no value (a
	// suffix), so it reads every webhook.
	Selective, Full, Unindexed SearchRun
}

// SearchRun is one search and the ingest load beside it.
type SearchRun struct {
	Window string // the window searched, in words
	Search admin.Search
	// First is when the first event was found, from the search's start;
	// 0 when none was.
	First   time.Duration
	Elapsed time.Duration // the whole page
	Found   int
	End     admin.SearchEnd
	// Runs is how many times the search ran, one after the other, while
	// Ingest was measured: a search is run again until searchMeasured has
	// passed, so that ingest's p99 is read from thousands of posts, not
	// the few beside a search of a few milliseconds.
	Runs   int
	Ingest Measurement // ingest while the searches ran
}

// searchMeasured is the least time ingest is measured beside a search.
const searchMeasured = 5 * time.Second

// Search fills a store with Retained webhooks through the ingress (the
// destination paused: nothing is delivered), measures ingest's latency
// idle, then runs each search with the same ingest load beside it.
func Search(ctx context.Context, o SearchOptions) (SearchResult, error) {
	o.applyDefaults()
	r := SearchResult{Retained: o.Retained}
	cfg, err := config("http://127.0.0.1:9/unused", 64)
	if err != nil {
		return r, err
	}
	st, err := startStack(ctx, Options{Dir: o.Dir}, cfg, false, false)
	if err != nil {
		return r, fmt.Errorf("start jethook: %w", err)
	}
	defer st.close()
	url := st.ingress.URL + hookPath
	fmt.Fprintf(o.Progress, "search: storing %d webhooks of %d bytes\n", o.Retained, o.BodySize)
	// The store is filled in minutes, not in a day: the last hour of a
	// day's steady traffic is its last twenty-fourth, stored from hour on.
	// Ingest's idle latency is measured before it, so that what the
	// measurement posts is not counted in the hour.
	lastHour := max(o.Retained/24, 1)
	day := runFrom(ctx, url, o.Clients, o.Retained-lastHour, 0, o.BodySize, 0)
	if day.Failed > 0 || day.Requests != o.Retained-lastHour {
		return r, fmt.Errorf("filling the store: %d stored, %d failed", day.Requests, day.Failed)
	}
	next := int64(o.Retained)
	fmt.Fprintf(o.Progress, "search: stored %d in %s; ingest idle for %s\n", day.Requests, day.Elapsed.Round(time.Second), o.Idle)
	r.Idle = runFrom(ctx, url, o.Load, 0, o.Idle, o.BodySize, next)
	next += int64(r.Idle.Requests + r.Idle.Failed + o.Load)
	hour := time.Now().UTC()
	r.Fill = runFrom(ctx, url, o.Clients, lastHour, 0, o.BodySize, int64(o.Retained-lastHour))
	r.Fill.Requests += day.Requests
	r.Fill.Failed += day.Failed
	r.Fill.Elapsed += day.Elapsed
	r.Fill.CPU += day.CPU
	if r.Fill.Failed > 0 || r.Fill.Requests != o.Retained {
		return r, fmt.Errorf("filling the store: %d stored, %d failed", r.Fill.Requests, r.Fill.Failed)
	}
	for _, run := range []struct {
		out    *SearchRun
		window string
		s      admin.Search
	}{
		{&r.Selective, "last hour", admin.Search{Route: "bench", Since: hour.Format(time.RFC3339Nano),
			Expr: fmt.Sprintf(`body.id == "evt_%d"`, o.Retained-lastHour)}},
		{&r.Full, "24 h", admin.Search{Route: "bench", Since: "24h", Expr: `body.id == "evt_none"`}},
		{&r.Unindexed, "24 h", admin.Search{Route: "bench", Since: "24h", Expr: `body.id.endsWith("_none")`}},
	} {
		fmt.Fprintf(o.Progress, "search: %s: %s\n", run.window, run.s.Expr)
		*run.out, err = searchBeside(ctx, st, run.s, url, o, next)
		if err != nil {
			return r, err
		}
		run.out.Window = run.window
		next += int64(run.out.Ingest.Requests + run.out.Ingest.Failed + o.Load)
	}
	return r, ctx.Err()
}

// searchBeside runs s while o.Load clients post webhooks numbered from
// first on, again and again until searchMeasured has passed, and stops
// the clients when the last search ends. The first run is the one
// reported.
func searchBeside(ctx context.Context, st *stack, s admin.Search, url string, o SearchOptions, first int64) (SearchRun, error) {
	out := SearchRun{Search: s}
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { out.Ingest = runFrom(loadCtx, url, o.Load, 0, 0, o.BodySize, first) })
	begin := time.Now()
	for out.Runs == 0 || time.Since(begin) < searchMeasured {
		start, found := time.Now(), 0
		end, err := st.app.Service.Search(ctx, s, func(admin.EventSummary) bool {
			if found == 0 && out.Runs == 0 {
				out.First = time.Since(start)
			}
			found++
			return true
		}, nil)
		if err != nil {
			return out, err
		}
		if out.Runs == 0 {
			out.Elapsed, out.End, out.Found = time.Since(start), end, found
		}
		out.Runs++
	}
	stop()
	wg.Wait()
	return out, nil
}
