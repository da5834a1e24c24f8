package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	// Rate, when above 0, replaces Load: webhooks are posted at this
	// constant rate a second while ingest's latency is measured, each
	// whether or not the ones before it were answered, as providers send.
	Rate float64
	// Apart runs jethook as a separate process (`jethook serve` from this
	// executable), as it runs in production: the load generator and the
	// searches then share the machine's cores with it, not its Go
	// scheduler, and each search goes through the admin API (GET
	// /v1/events, streamed), as `jethook events search` runs it.
	Apart bool
	// Binary is the jethook executable Apart runs (default this one).
	Binary string
	// Measured is the least time ingest is measured beside each search
	// (default 5s): a search is run again until it has passed.
	Measured time.Duration
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
	if o.Measured <= 0 {
		o.Measured = 5 * time.Second
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
	Rate     float64     // the constant rate of the ingest beside the searches; 0: Idle.Concurrency clients
	Apart    bool        // jethook ran as a separate process
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
	// Ingest was measured: a search is run again until Measured has
	// passed, so that ingest's p99 is read from thousands of posts, not
	// the few beside a search of a few milliseconds.
	Runs   int
	Ingest Measurement // ingest while the searches ran
}

// Search fills a store with Retained webhooks through the ingress (the
// destination paused: nothing is delivered), measures ingest's latency
// idle, then runs each search with the same ingest load beside it.
func Search(ctx context.Context, o SearchOptions) (SearchResult, error) {
	o.applyDefaults()
	r := SearchResult{Retained: o.Retained, Rate: o.Rate, Apart: o.Apart}
	var (
		url    string
		search searcher
	)
	if o.Apart {
		c, stop, err := startSearchChild(ctx, o)
		if err != nil {
			return r, err
		}
		defer stop()
		url, search = "http://"+c.public+hookPath, c.search
	} else {
		cfg, err := config("http://127.0.0.1:9/unused", 64)
		if err != nil {
			return r, err
		}
		st, err := startStack(ctx, Options{Dir: o.Dir}, cfg, false, false)
		if err != nil {
			return r, fmt.Errorf("start jethook: %w", err)
		}
		defer st.close()
		url = st.ingress.URL + hookPath
		search = func(ctx context.Context, s admin.Search, found func()) (admin.SearchEnd, error) {
			return st.app.Service.Search(ctx, s, func(admin.EventSummary) bool { found(); return true }, nil)
		}
	}
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
	r.Idle = o.ingest(ctx, url, o.Idle, next)
	next += o.used(r.Idle)
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
		var err error
		*run.out, err = searchBeside(ctx, search, run.s, url, o, next)
		if err != nil {
			return r, err
		}
		run.out.Window = run.window
		next += o.used(run.out.Ingest)
	}
	return r, ctx.Err()
}

// ingest is the load whose latency the scenario measures, for duration
// (0: until ctx ends), numbered from first on: o.Rate a second, or else
// o.Load clients posting one after the other.
func (o *SearchOptions) ingest(ctx context.Context, url string, duration time.Duration, first int64) Measurement {
	if o.Rate > 0 {
		return runAt(ctx, url, o.Rate, duration, o.BodySize, first)
	}
	return runFrom(ctx, url, o.Load, 0, duration, o.BodySize, first)
}

// used is how many sequence numbers a run of the load may have taken:
// those it counted, and those of the posts in flight when it was stopped,
// which it does not count, but may have been stored.
func (o *SearchOptions) used(m Measurement) int64 {
	inFlight := o.Load
	if o.Rate > 0 {
		inFlight = maxAtOnce
	}
	return int64(m.Requests + m.Failed + inFlight)
}

// searchBeside runs s while the scenario's load (o.ingest) posts
// webhooks numbered from first on, again and again until o.Measured has
// passed, and stops the load when the last search ends. The first run is the one
// reported.
func searchBeside(ctx context.Context, search searcher, s admin.Search, url string, o SearchOptions, first int64) (SearchRun, error) {
	out := SearchRun{Search: s}
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { out.Ingest = o.ingest(loadCtx, url, 0, first) })
	begin := time.Now()
	for out.Runs == 0 || time.Since(begin) < o.Measured {
		start, found := time.Now(), 0
		end, err := search(ctx, s, func() {
			if found == 0 && out.Runs == 0 {
				out.First = time.Since(start)
			}
			found++
		})
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

// searcher runs one page of search s and calls found for each event it
// finds, as it finds it.
type searcher func(ctx context.Context, s admin.Search, found func()) (admin.SearchEnd, error)

// startSearchChild starts `jethook serve` from o.Binary (default this
// executable) on a fresh data directory, with the scenario's route, and
// pauses its destination; stop stops it and removes the directory.
func startSearchChild(ctx context.Context, o SearchOptions) (_ *child, stop func(), err error) {
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, nil, err
		}
	}
	dir, err := os.MkdirTemp(o.Dir, "jethook-bench-*")
	if err != nil {
		return nil, nil, err
	}
	var halt func() // once the child runs: stop it, then remove dir
	defer func() {
		switch {
		case err == nil:
		case halt != nil:
			halt()
		default:
			_ = os.RemoveAll(dir)
		}
	}()
	config := filepath.Join(dir, "policies.yaml")
	yaml := fmt.Sprintf("routes:\n  - name: bench\n    path: %s\n    destinations:\n      - {name: backend, url: \"http://127.0.0.1:9/unused\"}\n", hookPath)
	if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
		return nil, nil, err
	}
	c, err := newChild(bin, config, filepath.Join(dir, "data"), filepath.Join(dir, "jethook.log"))
	if err != nil {
		return nil, nil, err
	}
	if err := c.start(); err != nil {
		return nil, nil, err
	}
	halt = func() {
		_, _ = c.Stop(30 * time.Second)
		_ = os.RemoveAll(dir)
	}
	if _, _, err := c.waitReady(ctx, time.Now(), time.Minute); err != nil {
		return nil, nil, err
	}
	if err := c.post(ctx, "http://"+c.admin+"/v1/destinations/bench/backend/pause"); err != nil {
		return nil, nil, fmt.Errorf("pause the destination: %w", err)
	}
	return c, halt, nil
}

// search runs one page of s through the admin API, streamed (GET
// /v1/events, application/x-ndjson), calling found for each event line.
func (c *child) search(ctx context.Context, s admin.Search, found func()) (admin.SearchEnd, error) {
	var end admin.SearchEnd
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.admin+"/v1/events?"+s.Values().Encode(), nil)
	if err != nil {
		return end, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", admin.NDJSON)
	resp, err := c.client.Do(req)
	if err != nil {
		return end, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return end, fmt.Errorf("GET /v1/events: %s: %s", resp.Status, b)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		var l struct {
			Event *json.RawMessage `json:"event"`
			End   *admin.SearchEnd `json:"end"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			return end, fmt.Errorf("GET /v1/events: %w", err)
		}
		switch {
		case l.Event != nil:
			found()
		case l.Error != nil:
			return end, fmt.Errorf("GET /v1/events: %s", l.Error.Message)
		case l.End != nil:
			return *l.End, nil
		}
	}
	if err := lines.Err(); err != nil {
		return end, err
	}
	return end, errors.New("GET /v1/events: the stream ended without its end line")
}
