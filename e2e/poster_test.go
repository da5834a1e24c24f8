package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// poster plays the provider: it posts webhooks to jethook and retries each
// until jethook answers 2xx, as providers do on errors and timeouts. It
// remembers what jethook acknowledged.
type poster struct {
	urls   []string // jethook replicas; a retry goes to the next one
	test   string
	pad    int // bytes of padding in each body; 0 is webhookBody's 200
	client *http.Client

	mu       sync.Mutex
	acked    map[int]string // webhook → event id jethook answered with
	dupAcks  int            // 2xx answers that said duplicate: the first post was stored, its answer lost
	failures map[string]int // answers other than 2xx, by kind
	slowest  time.Duration  // longest from a webhook's first try to its acknowledgement
}

func newPoster(url, test string) *poster { return newPosterTo([]string{url}, test) }

// newPosterTo posts to several replicas, as a load balancer would: webhook n
// goes first to urls[n%len(urls)] and each retry to the next replica.
func newPosterTo(urls []string, test string) *poster {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &poster{
		urls:     urls,
		test:     test,
		client:   &http.Client{Transport: tr, Timeout: 15 * time.Second},
		acked:    map[int]string{},
		failures: map[string]int{},
	}
}

// answer is jethook's reply to one post.
type answer struct {
	status     int
	id         string
	duplicate  bool
	retryAfter string
	took       time.Duration
}

// once posts webhook n one time, to the first replica.
func (p *poster) once(ctx context.Context, n int) (answer, error) { return p.onceTo(ctx, p.urls[0], n) }

// onceTo posts webhook n one time to url.
func (p *poster) onceTo(ctx context.Context, url string, n int) (answer, error) {
	start := time.Now()
	payload := webhookBody(p.test, n)
	if p.pad > 0 {
		payload = paddedBody(p.test, n, p.pad)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{took: time.Since(start)}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start)}
	if err != nil {
		return a, err
	}
	if a.status/100 == 2 {
		var ok struct {
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(body, &ok); err != nil || ok.ID == "" {
			return a, fmt.Errorf("2xx answer without an event id: %q", body)
		}
		a.id, a.duplicate = ok.ID, ok.Duplicate
	}
	return a, nil
}

// post sends webhook n until jethook acknowledges it or ctx ends. An answer
// no retry can change (a 4xx other than 408 and 429) is an error.
func (p *poster) post(ctx context.Context, n int) error {
	start := time.Now()
	for try := 0; ; try++ {
		a, err := p.onceTo(ctx, p.urls[(n+try)%len(p.urls)], n)
		switch {
		case err == nil && a.status/100 == 2:
			p.mu.Lock()
			p.acked[n] = a.id
			p.slowest = max(p.slowest, time.Since(start))
			if a.duplicate {
				p.dupAcks++
			}
			p.mu.Unlock()
			return nil
		case err == nil && a.status/100 == 4 && a.status != http.StatusRequestTimeout && a.status != http.StatusTooManyRequests:
			return fmt.Errorf("webhook %d: jethook answered %d", n, a.status)
		}
		last := fmt.Sprintf("status %d", a.status)
		kind := last
		if err != nil {
			last, kind = err.Error(), "no answer"
		}
		p.mu.Lock()
		p.failures[kind]++
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook %d never acknowledged: %w (last try: %s)", n, ctx.Err(), last)
		case <-time.After(time.Duration(10+rand.IntN(40)) * time.Millisecond):
		}
	}
}

// postAll posts webhooks 1..n from workers goroutines, starting a new one at
// most every pace, and returns the first error.
func (p *poster) postAll(ctx context.Context, n, workers int, pace time.Duration) error {
	next := make(chan int)
	go func() {
		defer close(next)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := 1; i <= n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := p.post(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// ackedCount is how many webhooks jethook has acknowledged so far.
func (p *poster) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// ackedIDs copies the acknowledged webhooks and their event ids.
func (p *poster) ackedIDs() map[int]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acked)
}

// stats reads the duplicate acks and the failed posts.
func (p *poster) stats() (dupAcks int, failures map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dupAcks, maps.Clone(p.failures)
}

// slowestAck is the longest a webhook waited, across its retries, to be
// acknowledged.
func (p *poster) slowestAck() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slowest
}

// posting is postAll running in the background while a test kills
// processes under it.
type posting struct {
	*poster
	n    int
	done chan struct{} // closed when postAll has returned
	err  error
}

// postInBackground starts p.postAll(ctx, n, workers, pace) and returns at
// once.
func (p *poster) postInBackground(ctx context.Context, n, workers int, pace time.Duration) *posting {
	ps := &posting{poster: p, n: n, done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		ps.err = p.postAll(ctx, n, workers, pace)
	}()
	return ps
}

// reached waits until jethook has acknowledged at least acked webhooks,
// or posting has ended (a post failed for good: no more acks will come).
func (ps *posting) reached(acked int) {
	for ps.ackedCount() < acked {
		select {
		case <-ps.done:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// wait waits until posting ends and fails the test unless every webhook
// was acknowledged, by who; it returns the acknowledged event ids.
func (ps *posting) wait(t *testing.T, who string) map[int]string {
	t.Helper()
	<-ps.done
	if ps.err != nil {
		t.Fatalf("posting: %v", ps.err)
	}
	acked := ps.ackedIDs()
	if len(acked) != ps.n {
		t.Fatalf("%s acknowledged %d of %d webhooks", who, len(acked), ps.n)
	}
	return acked
}

// killPoints are when to kill, in webhooks done (acknowledged, delivered):
// kills counts, each from plus a random count below span, in order, so
// that kills land all over a run.
func killPoints(kills, from, span int) []int {
	points := make([]int, kills)
	for i := range points {
		points[i] = from + rand.IntN(max(1, span))
	}
	slices.Sort(points)
	return points
}
