package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/telemetry/otlptest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

const flakyRoute = `
routes:
  - name: shop
    path: /hooks/shop
    retry: {backoff: fixed, delay: 20ms, jitter: none, max_attempts: 5, max_age: 1h}
    destinations:
      - name: app
        url: "${BACKEND}/shop"
        slow_start: 0s
        breaker: {failures: 0}
`

// traced is an OTLP receiver and a tracer that exports every span to it
// as the span ends.
func traced(t *testing.T) (*otlptest.Receiver, trace.Tracer) {
	t.Helper()
	recv := otlptest.Start(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return recv, tp.Tracer("jethook")
}

// A webhook that fails twice and is delivered on its third attempt is one
// trace, exported over OTLP/HTTP: the ingress span continues the sender's
// traceparent, the three attempt spans are its children, and the backend
// got each attempt's own traceparent in that trace. No span holds the body.
func TestAWebhookAndItsAttemptsAreOneTrace(t *testing.T) {
	t.Parallel()
	const body = `{"card":"4242-secret-body"}`
	var mu sync.Mutex
	var seen, numbers []string // traceparent and X-Webhook-Attempt of each attempt
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent"))
		numbers = append(numbers, r.Header.Get("X-Webhook-Attempt"))
		n := len(seen)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(backend.Close)

	recv, tracer := traced(t)

	jh := apptest.Start(t, parse(t, flakyRoute, backend.URL), app.Options{
		Tracer: tracer,
	})
	ingress := jh.Public

	const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodPost, ingress.URL+"/hooks/shop", strings.NewReader(body))
	req.Header.Set("Traceparent", "00-"+senderTrace+"-"+senderSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d", resp.StatusCode)
	}

	spans := recv.Await(t, 30*time.Second, "the ingress span and three attempt spans", func(s []otlptest.Span) bool {
		clients := 0
		for _, sp := range s {
			if sp.Kind == tracepb.Span_SPAN_KIND_CLIENT {
				clients++
			}
		}
		return clients == 3 && len(s) == 4
	})
	var ingressSpan otlptest.Span
	attempts := map[string]otlptest.Span{} // by span id
	for _, sp := range spans {
		for k, v := range sp.Attributes {
			if strings.Contains(v, "secret-body") {
				t.Errorf("span %q attribute %s holds the body", sp.Name, k)
			}
		}
		if sp.TraceID != senderTrace {
			t.Errorf("span %q in trace %s, want the sender's %s", sp.Name, sp.TraceID, senderTrace)
		}
		switch sp.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			ingressSpan = sp
		case tracepb.Span_SPAN_KIND_CLIENT:
			attempts[sp.SpanID] = sp
		}
	}
	if ingressSpan.Name != "POST /hooks/shop" || ingressSpan.ParentID != senderSpan ||
		ingressSpan.Attributes["jethook.route"] != "shop" || ingressSpan.Attributes["jethook.provider"] != "none" || ingressSpan.Attributes["jethook.verified"] != "" ||
		ingressSpan.Attributes["jethook.duplicate"] != "" || ingressSpan.Attributes["http.response.status_code"] != "200" {
		t.Errorf("ingress span %+v: want POST /hooks/shop, child of the sender's span, route shop, no provider and so nothing verified, stored, 200", ingressSpan)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("backend got %d attempts, want 3", len(seen))
	}
	for i, tp := range seen {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != senderTrace {
			t.Errorf("attempt %d: backend got traceparent %q, want one in trace %s", i+1, tp, senderTrace)
			continue
		}
		sp, ok := attempts[parts[2]]
		if !ok {
			t.Errorf("attempt %d: backend got span %s, which is no attempt span", i+1, parts[2])
			continue
		}
		want := map[string]string{"jethook.attempt": numbers[i], "jethook.outcome": []string{"transient", "transient", "delivered"}[i],
			"http.response.status_code": []string{"500", "500", "200"}[i], "http.request.method": "POST", "jethook.destination": "app"}
		for k, v := range want {
			if sp.Attributes[k] != v {
				t.Errorf("attempt %d span: %s = %q, want %q", i+1, k, sp.Attributes[k], v)
			}
		}
		if sp.ParentID != ingressSpan.SpanID {
			t.Errorf("attempt %d span's parent is %s, want the ingress span %s", i+1, sp.ParentID, ingressSpan.SpanID)
		}
		if next := sp.Attributes["jethook.next_attempt_at"]; (i < 2) != (next != "") {
			t.Errorf("attempt %d span: next_attempt_at %q", i+1, next)
		}
		if (i < 2) != sp.Error {
			t.Errorf("attempt %d span: error status %v", i+1, sp.Error)
		}
	}
}

// A webhook the backend refuses for good is dead-lettered in its trace,
// and its replay, a new message, is attempted in that same trace; a
// destination whose filter does not match it records that in the trace,
// and the attempt spans of destinations with a transform say what the
// script changed, or that it dropped the event.
func TestADeadLetterItsReplayAFilterAndATransformStayInTheWebhooksTrace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/shop" {
			return // the transformed destination
		}
		mu.Lock()
		seen = append(seen, r.Header.Get("Traceparent"))
		first := len(seen) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusGone)
		}
	}))
	t.Cleanup(backend.Close)
	recv, tracer := traced(t)
	jh := apptest.Start(t, parse(t, oneRoute+`      - {name: invoices, url: "${BACKEND}/invoices", slow_start: 0s, filter: 'body.type == "invoice"'}
      - name: slim
        url: "${BACKEND}/slim"
        slow_start: 0s
        transform:
          script: |
            addHandler('transform', (request) => { delete request.body.n; request.headers['x-kind'] = 'order'; return request; });
      - name: none
        url: "${BACKEND}/none"
        slow_start: 0s
        transform:
          script: |
            addHandler('transform', () => null);
`, backend.URL), app.Options{
		Tracer: tracer,
	})
	a, ingress := jh.App, jh.Public
	resp, err := http.Post(ingress.URL+"/hooks/shop", "application/json", strings.NewReader(`{"n":1,"type":"order"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	named := func(s []otlptest.Span, name string) []otlptest.Span {
		var out []otlptest.Span
		for _, sp := range s {
			if sp.Name == name {
				out = append(out, sp)
			}
		}
		return out
	}
	spans := recv.Await(t, 30*time.Second, "the dead letter's span", func(s []otlptest.Span) bool { return len(named(s, "dead letter")) == 1 })
	ingressSpans := named(spans, "POST /hooks/shop")
	if len(ingressSpans) != 1 {
		t.Fatalf("%d ingress spans", len(ingressSpans))
	}
	trace := ingressSpans[0].TraceID
	if dl := named(spans, "dead letter")[0]; dl.TraceID != trace || dl.Attributes["jethook.dead_letter_reason"] != "permanent" {
		t.Errorf("dead letter span %+v, want one in trace %s, reason permanent", dl, trace)
	}
	spans = recv.Await(t, 30*time.Second, "the filtered event's span", func(s []otlptest.Span) bool { return len(named(s, "filtered")) == 1 })
	if f := named(spans, "filtered")[0]; f.TraceID != trace || f.Attributes["jethook.destination"] != "invoices" {
		t.Errorf("filtered span %+v, want one for invoices in trace %s", f, trace)
	}

	spans = recv.Await(t, 30*time.Second, "the transformed destinations' attempt spans", func(s []otlptest.Span) bool {
		n := 0
		for _, sp := range named(s, "POST") {
			if d := sp.Attributes["jethook.destination"]; d == "slim" || d == "none" {
				n++
			}
		}
		return n == 2
	})
	for _, sp := range named(spans, "POST") {
		want := map[string]map[string]string{
			"slim": {"jethook.outcome": "delivered", "jethook.transform.changed": "body", "jethook.transform.headers": "x-kind"},
			"none": {"jethook.outcome": "dropped", "jethook.transform.changed": ""},
		}[sp.Attributes["jethook.destination"]]
		for k, v := range want {
			if sp.Attributes[k] != v {
				t.Errorf("attempt span to %s: %s = %q, want %q", sp.Attributes["jethook.destination"], k, sp.Attributes[k], v)
			}
		}
		if want != nil && (sp.TraceID != trace || sp.Error) {
			t.Errorf("attempt span %+v, want one in trace %s and no error", sp, trace)
		}
	}

	dls, err := a.Store.DeadLetters(context.Background(), "", 10)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters: %v, %v", dls, err)
	}
	if _, err := a.Service.ReplaySeqs(context.Background(), []uint64{dls[0].DLQSeq}, ""); err != nil {
		t.Fatal(err)
	}
	spans = recv.Await(t, 30*time.Second, "the replayed attempt's span", func(s []otlptest.Span) bool {
		for _, sp := range named(s, "POST") {
			if sp.Attributes["jethook.destination"] == "app" && sp.Attributes["jethook.outcome"] == "delivered" {
				return true
			}
		}
		return false
	})
	for _, sp := range named(spans, "POST") {
		if sp.TraceID != trace || sp.ParentID != ingressSpans[0].SpanID {
			t.Errorf("attempt span %+v, want a child of the ingress span in trace %s", sp, trace)
		}
	}
	if r := named(spans, "replay"); len(r) != 1 || r[0].TraceID != trace || r[0].Attributes["jethook.destination"] != "app" ||
		r[0].Attributes["jethook.replay_of"] != fmt.Sprint(dls[0].DLQSeq) {
		t.Errorf("replay spans %+v, want one for app in trace %s, of dead letter %d", r, trace, dls[0].DLQSeq)
	}
	mu.Lock()
	if len(seen) != 2 || !strings.Contains(seen[1], "-"+trace+"-") {
		t.Errorf("backend got traceparents %q, want the replay's in trace %s", seen, trace)
	}
	mu.Unlock()

	// Delivered now, it is sent again by an operator: a resend span, and
	// the copy's attempt, in the same trace.
	res, err := a.Service.Resend(context.Background(), dls[0].Envelope.EventID, admin.ResendRequest{Destination: "app"})
	if err != nil || len(res.Destinations) != 1 || res.Destinations[0].Action != admin.ResendQueued {
		t.Fatalf("resend: %+v, %v; want the copy queued", res, err)
	}
	spans = recv.Await(t, 30*time.Second, "the resend's span", func(s []otlptest.Span) bool { return len(named(s, "resend")) == 1 })
	if r := named(spans, "resend")[0]; r.TraceID != trace || r.Attributes["jethook.destination"] != "app" ||
		r.Attributes["jethook.resend_action"] != admin.ResendQueued {
		t.Errorf("resend span %+v, want one for app in trace %s, action queued", r, trace)
	}
	testkit.Eventually(t, 30*time.Second, "the resent copy at the backend", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(seen[2], "-"+trace+"-") {
		t.Errorf("backend got traceparent %q for the resent copy, want one in trace %s", seen[2], trace)
	}
}

// exemplar is an OpenMetrics exemplar's trace id on a bucket line:
// name_bucket{…} count # {trace_id="…"} value timestamp.
var exemplar = regexp.MustCompile(`^(jethook_[a-z_]+)_bucket\{.*\} \d+ # \{trace_id="([0-9a-f]{32})"\}`)

// With tracing on, the latency histograms carry the trace id of a sampled
// ingress or attempt span as their exemplar, served to a scraper that asks
// for OpenMetrics, so a slow bucket links to a trace the backend holds.
func TestLatencyHistogramsLinkToTracesByExemplar(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(backend.Close)
	recv, tracer := traced(t)
	jh := apptest.Start(t, parse(t, oneRoute, backend.URL), app.Options{
		Tracer: tracer,
	})
	a, ingress := jh.App, jh.Public
	resp, err := http.Post(ingress.URL+"/hooks/shop", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := recv.Await(t, 30*time.Second, "the delivered attempt's span", func(s []otlptest.Span) bool {
		for _, sp := range s {
			if sp.Attributes["jethook.outcome"] == "delivered" {
				return true
			}
		}
		return false
	})
	exported := map[string]bool{}
	for _, sp := range spans {
		exported[sp.TraceID] = true
	}

	scrape := func(accept string) string {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		a.Metrics.Handler().ServeHTTP(rec, req)
		return rec.Body.String()
	}
	found := map[string]string{} // histogram → trace id
	for line := range strings.Lines(scrape("application/openmetrics-text; version=1.0.0")) {
		if m := exemplar.FindStringSubmatch(line); m != nil {
			found[m[1]] = m[2]
		}
	}
	for _, h := range []string{"jethook_store_publish_seconds", "jethook_attempt_seconds", "jethook_delivery_age_seconds"} {
		switch id, ok := found[h]; {
		case !ok:
			t.Errorf("%s has no exemplar", h)
		case !exported[id]:
			t.Errorf("%s's exemplar names trace %s, which no exported span is in", h, id)
		}
	}
	if text := scrape("text/plain"); strings.Contains(text, "trace_id") {
		t.Error("the Prometheus text format holds an exemplar, which it cannot carry")
	}
}

// The ingress span of a route with a provider says whether the webhook
// passed the provider's check: verified when it was stored, not verified
// when its signature was refused.
func TestTheIngressSpanSaysWhetherTheSignatureWasVerified(t *testing.T) {
	t.Parallel()
	recv, tracer := traced(t)
	a := apptest.Start(t, parse(t, githubRoute, "http://127.0.0.1:9"), app.Options{Tracer: tracer}).App
	if err := a.Forwarder.Pause("gh", "app"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened","number":7}`)
	for i, tc := range []struct {
		signature string
		status    int
	}{
		{githubSignature(body), http.StatusOK},
		{"sha256=" + strings.Repeat("0", 64), http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "pull_request")
		r.Header.Set("X-GitHub-Delivery", fmt.Sprint("d-", i))
		r.Header.Set("X-Hub-Signature-256", tc.signature)
		w := httptest.NewRecorder()
		a.Ingress.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Fatalf("post %d: status %d, want %d", i, w.Code, tc.status)
		}
	}
	spans := recv.Await(t, 10*time.Second, "two ingress spans", func(s []otlptest.Span) bool { return len(s) == 2 })
	verified := map[string]string{} // by status
	for _, sp := range spans {
		if sp.Attributes["jethook.provider"] != "github" {
			t.Errorf("span %q: provider %q, want github", sp.Name, sp.Attributes["jethook.provider"])
		}
		verified[sp.Attributes["http.response.status_code"]] = sp.Attributes["jethook.verified"]
		// Past eight attributes the SDK ends a span with a map of them,
		// three allocations a webhook (docs/observability.md, costs).
		if sp.Attributes["http.response.status_code"] == "200" && len(sp.Attributes) > 8 {
			t.Errorf("a stored webhook's ingress span has %d attributes, want at most 8: %v", len(sp.Attributes), sp.Attributes)
		}
	}
	if verified["200"] != "true" || verified["401"] != "false" {
		t.Errorf("jethook.verified by status: %v, want 200 true and 401 false", verified)
	}
}
