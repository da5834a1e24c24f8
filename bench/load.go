package bench

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/internal/procs"
)

// seqHeader carries a request's sequence number, so a backend can tell
// which events reached it and how often. jethook forwards it unchanged.
const seqHeader = "X-Bench-Seq"

// Measurement is what one run of the load generator measured: requests,
// failures, latency and CPU.
type Measurement struct {
	Concurrency int
	Requests    int           // answered 200
	Failed      int           // answered otherwise, or not at all
	Elapsed     time.Duration // first request sent to last answer read
	P50, P99    time.Duration // latency of the requests answered 200
	// CPU is the process's CPU time during the run, load generator
	// included. Unlike a rate it barely moves when other processes share
	// the machine, and the generator's share is the same in every case.
	CPU time.Duration
}

// CPUPerRequest is CPU spread over the requests answered 200.
func (l Measurement) CPUPerRequest() time.Duration {
	if l.Requests == 0 {
		return 0
	}
	return l.CPU / time.Duration(l.Requests)
}

// PerSecond is the rate of requests answered 200.
func (l Measurement) PerSecond() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(l.Requests) / l.Elapsed.Seconds()
}

// run posts JSON bodies of bodySize bytes to url from concurrency
// goroutines, each waiting for its answer before the next post, until limit
// requests were sent (0: no limit) or duration has passed (0: no limit),
// whichever comes first. Requests in flight at the deadline finish and
// count. Each body is unique to its sequence number (0, 1, 2, …), so ingress
// never takes one for a provider's redelivery. ctx cancels everything.
func run(ctx context.Context, url string, concurrency, limit int, duration time.Duration, bodySize int) Measurement {
	return runFrom(ctx, url, concurrency, limit, duration, bodySize, 0)
}

// runFrom is run with sequence numbers from first on, so that a second run
// on the same store posts webhooks it does not hold yet.
func runFrom(ctx context.Context, url string, concurrency, limit int, duration time.Duration, bodySize int, first int64) Measurement {
	client := &http.Client{Transport: transport(concurrency), Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	var (
		next     atomic.Int64
		mu       sync.Mutex
		all      []time.Duration
		failed   int
		wg       sync.WaitGroup
		start    = time.Now()
		cpu0     = procs.CPUTime()
		deadline time.Time
	)
	if duration > 0 {
		deadline = start.Add(duration)
	}
	for range concurrency {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			bad := 0
			for ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)) {
				seq := first + next.Add(1) - 1
				if limit > 0 && seq >= first+int64(limit) {
					break
				}
				t0 := time.Now()
				if post(ctx, client, url, seq, bodySize) {
					lat = append(lat, time.Since(t0))
				} else if ctx.Err() == nil {
					bad++
				}
			}
			mu.Lock()
			all = append(all, lat...)
			failed += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	return measured(concurrency, all, failed, start, cpu0)
}

// measured is what a run that began at start, with the process's CPU
// time at cpu0, measured by now: all, the latencies of the requests
// answered 200 (sorted here), and failed, the rest.
func measured(concurrency int, all []time.Duration, failed int, start time.Time, cpu0 time.Duration) Measurement {
	l := Measurement{Concurrency: concurrency, Requests: len(all), Failed: failed, Elapsed: time.Since(start), CPU: procs.CPUTime() - cpu0}
	slices.Sort(all)
	l.P50, l.P99 = percentile(all, 50), percentile(all, 99)
	return l
}

// runAt posts JSON bodies of bodySize bytes to url at a constant rate a
// second, each post on its own, whether or not earlier ones were answered
// (an open loop, as a provider sends), until duration has passed (0: no
// limit) or ctx ends; sequence numbers run from first on. A post's
// latency runs from when it is sent, as vegeta times it: the load
// generator shares the process and the cores with what it measures, and
// a post it sends late is its own delay, not jethook's. At most
// maxAtOnce posts are in flight; a post due while that many are waits
// for one to end.
func runAt(ctx context.Context, url string, rate float64, duration time.Duration, bodySize int, first int64) Measurement {
	client := &http.Client{Transport: transport(maxAtOnce), Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var (
		mu       sync.Mutex
		all      []time.Duration
		failed   int
		wg       sync.WaitGroup
		slots    = make(chan struct{}, maxAtOnce)
		interval = time.Duration(float64(time.Second) / rate)
		start    = time.Now()
		cpu0     = procs.CPUTime()
	)
	for i := int64(0); ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if duration > 0 && !due.Before(start.Add(duration)) {
			break
		}
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			t0 := time.Now()
			ok := post(ctx, client, url, first+i, bodySize)
			lat := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok:
				all = append(all, lat)
			case ctx.Err() == nil:
				failed++
			}
		})
	}
	wg.Wait()
	return measured(0, all, failed, start, cpu0)
}

// maxAtOnce is the most posts runAt has in flight.
const maxAtOnce = 256

// post sends one webhook and reports whether it was answered 200.
func post(ctx context.Context, client *http.Client, url string, seq int64, bodySize int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body(seq, bodySize)))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(seqHeader, strconv.FormatInt(seq, 10))
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// transport keeps one connection per client goroutine alive between
// requests and never goes through a proxy: the load stays on loopback.
func transport(concurrency int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		MaxConnsPerHost:     concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// body is a JSON object of exactly size bytes (or the shortest that holds
// its fields) that differs for every seq.
func body(seq int64, size int) []byte {
	b := make([]byte, 0, max(size, 64))
	b = append(b, `{"id":"evt_`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `","type":"bench.event","pad":"`...)
	if n := size - len(b) - len(`"}`); n > 0 {
		b = append(b, padding(n)...)
	}
	return append(b, `"}`...)
}

// pad holds the padding bodies share, so building one costs a copy, not
// a loop per byte: the load generator shares the CPU it measures.
var pad = bytes.Repeat([]byte{'x'}, 64<<10)

func padding(n int) []byte {
	if n <= len(pad) {
		return pad[:n]
	}
	return bytes.Repeat([]byte{'x'}, n)
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}
