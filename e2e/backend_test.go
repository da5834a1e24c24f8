package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mode is how the backend answers.
type mode int32

const (
	healthy     mode = iota // 200 to everything
	down                    // 503 to everything
	flaky                   // 30 % 503, 5 % hang past jethook's timeout, else 200
	flakyEvents             // webhook n gets 503 on its first n mod 4 attempts, then 200
)

// hangCap bounds a hanging answer in case the client never hangs up.
const hangCap = 5 * time.Second

// webhook is the body the tests post: N identifies it, since the event id
// is jethook's to choose.
type webhook struct {
	Test string `json:"test"`
	N    int    `json:"n"`
	Pad  string `json:"pad"`
}

func webhookBody(test string, n int) []byte { return paddedBody(test, n, 200) }

// paddedBody is webhook n of test with pad bytes of padding, as
// json.Marshal would write it. Built by hand: the load tests post 1 MiB
// bodies from 64 goroutines, and under -race marshaling them took the CPU
// the jethook under test needed.
func paddedBody(test string, n, pad int) []byte {
	name, err := json.Marshal(test)
	if err != nil {
		panic(err)
	}
	b := make([]byte, 0, len(name)+pad+40)
	b = append(b, `{"test":`...)
	b = append(b, name...)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"pad":"`...)
	b = append(b, strings.Repeat("x", pad)...)
	return append(b, `"}`...)
}

// decodeWebhook reads a body paddedBody wrote. A large one is read up to
// its padding, which comes last and is all 'x': under -race, decoding a
// 1 MiB body whole outlasted jethook's attempt timeout.
func decodeWebhook(body []byte, wh *webhook) error {
	const large = 64 << 10
	i := bytes.LastIndex(body, []byte(`,"pad":"`))
	if len(body) < large || i < 0 || !bytes.HasSuffix(body, []byte(`"}`)) {
		return json.Unmarshal(body, wh)
	}
	if pad := body[i+len(`,"pad":"`) : len(body)-len(`"}`)]; len(bytes.Trim(pad, "x")) != 0 {
		return fmt.Errorf("padding holds more than x: %.40q", bytes.Trim(pad, "x"))
	}
	return json.Unmarshal(append(body[:i:i], '}'), wh)
}

// delivery is one 2xx answer the backend gave.
type delivery struct {
	id      string // X-Webhook-ID
	attempt string // X-Webhook-Attempt
}

// request is one attempt the backend saw, whatever its answer.
type request struct {
	attempt    int // X-Webhook-Attempt; 0 if missing or unreadable
	start, end time.Time
	status     int
}

// backend is the app behind jethook: a real HTTP server that answers
// according to its mode and records every attempt by webhook number.
type backend struct {
	*httptest.Server
	mode atomic.Int32

	mu        sync.Mutex
	attempts  map[int]int        // requests per webhook, any answer
	delivered map[int][]delivery // 2xx answers per webhook
	requests  map[int][]request  // every request per webhook, in order of arrival
	okTimes   []time.Time        // every 2xx answer, in order
	inflight  int
	lastReq   time.Time // when the last request arrived or finished
	bad       []string  // requests the backend could not attribute
}

func newBackend(t *testing.T, m mode) *backend {
	t.Helper()
	b := &backend{attempts: map[int]int{}, delivered: map[int][]delivery{}, requests: map[int][]request{}}
	b.mode.Store(int32(m))
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) setMode(m mode) { b.mode.Store(int32(m)) }

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var wh webhook
	if err == nil {
		err = decodeWebhook(body, &wh)
	}
	id := r.Header.Get("X-Webhook-Id")
	attempt, _ := strconv.Atoi(r.Header.Get("X-Webhook-Attempt"))
	b.mu.Lock()
	b.inflight++
	b.lastReq = time.Now()
	req := -1 // index in b.requests[wh.N]
	if err != nil || wh.N <= 0 || id == "" {
		b.bad = append(b.bad, fmt.Sprintf("%s %s id=%q body=%.80q err=%v", r.Method, r.URL.Path, id, body, err))
	} else {
		b.attempts[wh.N]++
		b.requests[wh.N] = append(b.requests[wh.N], request{attempt: attempt, start: b.lastReq})
		req = len(b.requests[wh.N]) - 1
	}
	b.mu.Unlock()

	status := b.answer()
	if mode(b.mode.Load()) == flakyEvents {
		status = http.StatusOK
		if attempt <= wh.N%4 {
			status = http.StatusServiceUnavailable
		}
	}
	if status == 0 {
		select {
		case <-r.Context().Done():
		case <-time.After(hangCap):
		}
		status = http.StatusServiceUnavailable // never counted as delivered
	}
	b.mu.Lock()
	b.inflight--
	b.lastReq = time.Now()
	if req >= 0 {
		b.requests[wh.N][req].end, b.requests[wh.N][req].status = b.lastReq, status
	}
	if status/100 == 2 && wh.N > 0 && id != "" {
		b.delivered[wh.N] = append(b.delivered[wh.N], delivery{id: id, attempt: r.Header.Get("X-Webhook-Attempt")})
		b.okTimes = append(b.okTimes, time.Now())
	}
	b.mu.Unlock()
	w.WriteHeader(status)
}

// answer picks a status for one request; 0 means hang.
func (b *backend) answer() int {
	switch mode(b.mode.Load()) {
	case down:
		return http.StatusServiceUnavailable
	case flaky:
		switch x := rand.Float64(); {
		case x < 0.05:
			return 0
		case x < 0.35:
			return http.StatusServiceUnavailable
		}
	}
	return http.StatusOK
}

// missing lists the webhooks of ns the backend has not accepted yet.
func (b *backend) missing(ns []int) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, n := range ns {
		if len(b.delivered[n]) == 0 {
			out = append(out, n)
		}
	}
	return out
}

// unattempted lists the webhooks of ns the backend has not seen yet.
func (b *backend) unattempted(ns []int) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, n := range ns {
		if b.attempts[n] == 0 {
			out = append(out, n)
		}
	}
	return out
}

// quietFor reports whether no request is open and none came or went in d.
func (b *backend) quietFor(d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight == 0 && time.Since(b.lastReq) >= d
}

// snapshot is what the backend was doing at one moment.
type snapshot struct {
	inflight int // requests open (jethook has not settled them)
	recentOK int // 2xx answers in the window before (acks maybe not yet on disk)
}

func (b *backend) snapshot(window time.Duration) snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := snapshot{inflight: b.inflight}
	since := time.Now().Add(-window)
	for i := len(b.okTimes) - 1; i >= 0 && b.okTimes[i].After(since); i-- {
		s.recentOK++
	}
	return s
}

// report summarises the deliveries of the webhooks 1..n.
type report struct {
	attempts   int // requests for them, any answer
	duplicates int // webhooks accepted more than once
	extra      int // accepted answers beyond the first of each
	most       int // most 2xx answers for one webhook
	bad        []string
}

func (b *backend) report(n int) report {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := report{bad: append([]string(nil), b.bad...)}
	for i := 1; i <= n; i++ {
		r.attempts += b.attempts[i]
		ds := b.delivered[i]
		if len(ds) > 1 {
			r.duplicates++
			r.extra += len(ds) - 1
		}
		r.most = max(r.most, len(ds))
	}
	return r
}

// requestsOf returns every request for webhook n, in order of arrival.
func (b *backend) requestsOf(n int) []request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]request(nil), b.requests[n]...)
}

// deliveries returns the 2xx answers for webhook n.
func (b *backend) deliveries(n int) []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]delivery(nil), b.delivered[n]...)
}
