package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/jethook/jethook/telemetry/otlptest"
)

// tracedBackend fails the first two attempts of every webhook and takes
// the third, and keeps the traceparent and X-Webhook-Attempt of each request.
type tracedBackend struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []tracedRequest
	last time.Time
}

type tracedRequest struct {
	traceparent string
	attempt     string
	status      int
}

func newTracedBackend(t *testing.T) *tracedBackend {
	b := &tracedBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		status := http.StatusOK
		if len(b.reqs) < 2 {
			status = http.StatusInternalServerError
		}
		b.reqs = append(b.reqs, tracedRequest{r.Header.Get("Traceparent"), r.Header.Get("X-Webhook-Attempt"), status})
		b.last = time.Now()
		b.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *tracedBackend) requests() ([]tracedRequest, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]tracedRequest(nil), b.reqs...), b.last
}

// clientSpans are the attempt spans received, by span id.
func clientSpans(spans []otlptest.Span) map[string]otlptest.Span {
	m := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			m[s.SpanID] = s
		}
	}
	return m
}

// With tracing on, a webhook that fails twice and is delivered on its
// third attempt, with jethook killed -9 between the second and the third,
// is one trace at the OTLP receiver: the ingress span and an attempt span
// for each request the backend got, each request carrying its own span in
// that trace. The third attempt is made by the restarted process, from the
// trace context stored with the webhook.
func TestAWebhookIsOneTraceAcrossAKillNine(t *testing.T) {
	recv := otlptest.Start(t)
	be := newTracedBackend(t)
	jh := newProcess(t, policies(be.URL, "{backoff: fixed, delay: 2s, jitter: none, max_attempts: 10, max_age: 1h}"), nil)
	jh.Env = append(jh.Env,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL,
		"OTEL_SERVICE_NAME=jethook-e2e",
		"OTEL_BSP_SCHEDULE_DELAY=50",
	)
	jh.start()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, jh.url("/hooks/crash"), strings.NewReader(`{"n":1}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	recv.Await(t, 15*time.Second, "the spans of two attempts", func(s []otlptest.Span) bool { return len(clientSpans(s)) >= 2 })
	// The second attempt's nak, with its 2 s delay, is in the consumer
	// state on disk once the backend has been quiet for 300 ms.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, last := be.requests(); time.Since(last) > 300*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backend never went quiet")
		}
	}
	jh.kill()
	jh.start()
	spans := recv.Await(t, 30*time.Second, "the delivered attempt's span", func(s []otlptest.Span) bool {
		for _, c := range clientSpans(s) {
			if c.Attributes["jethook.outcome"] == "delivered" {
				return true
			}
		}
		return false
	})

	reqs, _ := be.requests()
	var ingress []otlptest.Span
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			ingress = append(ingress, s)
		}
	}
	if len(ingress) != 1 {
		t.Fatalf("%d ingress spans, want 1: %+v", len(ingress), ingress)
	}
	trace := ingress[0].TraceID
	clients := clientSpans(spans)
	if len(reqs) < 3 || len(clients) != len(reqs) {
		t.Errorf("backend got %d requests, receiver %d attempt spans; want 3 or more, one span each", len(reqs), len(clients))
	}
	for i, r := range reqs {
		parts := strings.Split(r.traceparent, "-")
		if len(parts) != 4 || parts[1] != trace {
			t.Errorf("request %d (attempt %s): traceparent %q, want one in the ingress span's trace %s", i+1, r.attempt, r.traceparent, trace)
			continue
		}
		sp, ok := clients[parts[2]]
		if !ok {
			t.Errorf("request %d: span %s is no attempt span received", i+1, parts[2])
			continue
		}
		if sp.ParentID != ingress[0].SpanID || sp.Attributes["jethook.attempt"] != r.attempt ||
			sp.Attributes["http.response.status_code"] != strconv.Itoa(r.status) || sp.Service != "jethook-e2e" {
			t.Errorf("request %d: span %+v, want a child of the ingress span for attempt %s answered %d", i+1, sp, r.attempt, r.status)
		}
	}
	t.Logf("one trace %s: ingress span and %d attempt spans across a kill -9; backend got %d requests", trace, len(clients), len(reqs))
}
