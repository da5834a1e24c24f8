package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/metrics"
)

func TestANilMetricsRecordsNothingAndDoesNotPanic(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.Received("shop")
	m.Rejected("shop", "bad_signature")
	m.Published("shop", time.Millisecond, false, nil, trace.SpanContext{})
	d := m.Destination("shop", "app")
	d.AttemptStarted()
	d.Attempt("delivered", 200, time.Millisecond, trace.SpanContext{}, time.Now())
	d.AttemptEnded()
	d.Delivered(time.Second, trace.SpanContext{})
	d.Breaker(true)
	d.Limit(10)
	d.Remove()
	m.DeadLettered("shop", "app", "permanent")
	m.SetBacklog(nil)
	m.SetStore(nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 404 {
		t.Errorf("a nil Metrics' handler answered %d, want 404", rec.Code)
	}
}

func TestStatusClasses(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{0: "error", 200: "2xx", 204: "2xx", 301: "3xx", 404: "4xx", 429: "4xx", 503: "5xx", 999: "error"} {
		if got := metrics.Class(status); got != want {
			t.Errorf("Class(%d) = %q, want %q", status, got, want)
		}
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape answered %d: %s", resp.StatusCode, body)
	}
	return string(body)
}

func TestAScrapeShowsEachSeriesWithRouteAndDestinationLabels(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	m.Received("shop")
	m.Published("shop", 2*time.Millisecond, false, nil, trace.SpanContext{})
	m.Published("shop", time.Millisecond, true, nil, trace.SpanContext{})
	m.Published("shop", time.Second, false, errors.New("store unavailable"), trace.SpanContext{})
	m.Rejected("shop", "store_unavailable")
	d := m.Destination("shop", "app")
	d.AttemptStarted()
	d.AttemptStarted()
	d.Attempt("transient", 0, 10*time.Millisecond, trace.SpanContext{}, time.Now())
	d.AttemptEnded()
	m.DeadLettered("shop", "app", "exhausted")
	d.Breaker(true)
	m.SetBacklog(func(context.Context) ([]metrics.BacklogRow, error) {
		return []metrics.BacklogRow{{Route: "shop", Destination: "app", Pending: 7, AckPending: 4}}, nil
	})
	out := scrape(t, m)
	for _, want := range []string{
		`jethook_received_total{route="shop"} 1`,
		`jethook_rejected_total{reason="store_unavailable",route="shop"} 1`,
		`jethook_stored_total{route="shop"} 1`,
		`jethook_duplicates_total{route="shop"} 1`,
		`jethook_store_publish_seconds_count 3`,
		`jethook_attempts_total{class="error",destination="app",outcome="transient",route="shop"} 1`,
		`jethook_attempt_seconds_count{destination="app",route="shop"} 1`,
		`jethook_dead_lettered_total{destination="app",reason="exhausted",route="shop"} 1`,
		`jethook_breaker_open{destination="app",route="shop"} 1`,
		`jethook_in_flight{destination="app",route="shop"} 1`,
		`jethook_pending{destination="app",route="shop"} 7`,
		// Four unsettled, one of them in flight: three wait in backoff.
		`jethook_in_backoff{destination="app",route="shop"} 3`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

func TestAScrapeWithoutTheBacklogStillServesTheRest(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil)
	m.Received("shop")
	m.SetBacklog(func(context.Context) ([]metrics.BacklogRow, error) {
		return nil, errors.New("store unavailable")
	})
	out := scrape(t, m)
	if !strings.Contains(out, `jethook_received_total{route="shop"} 1`) {
		t.Errorf("scrape lost the other metrics:\n%s", out)
	}
	if strings.Contains(out, "jethook_pending{") {
		t.Errorf("scrape made up a backlog:\n%s", out)
	}
}

// The oldest pending age is the seconds since the oldest waiting webhook
// was stored, 0 with none waiting, and absent where it was not read.
func TestAScrapeShowsTheOldestPendingAgeWhereItWasRead(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil)
	m.SetBacklog(func(context.Context) ([]metrics.BacklogRow, error) {
		return []metrics.BacklogRow{
			{Route: "shop", Destination: "app", Pending: 3, Oldest: time.Now().Add(-90 * time.Second), OldestKnown: true},
			{Route: "shop", Destination: "crm", OldestKnown: true},
			{Route: "shop", Destination: "erp", Pending: 5},
		}, nil
	})
	out := scrape(t, m)
	age, ok := value(out, `jethook_oldest_pending_seconds{destination="app",route="shop"}`)
	if !ok || age < 90 || age > 120 {
		t.Errorf("app's oldest pending age %v (present %v), want 90 s and a little", age, ok)
	}
	if age, ok := value(out, `jethook_oldest_pending_seconds{destination="crm",route="shop"}`); !ok || age != 0 {
		t.Errorf("crm's oldest pending age %v (present %v), want 0: none waits", age, ok)
	}
	if _, ok := value(out, `jethook_oldest_pending_seconds{destination="erp",route="shop"}`); ok {
		t.Error("erp's oldest pending age is there, but it was not read")
	}
	if _, ok := value(out, `jethook_pending{destination="erp",route="shop"}`); !ok {
		t.Error("erp's pending count is missing")
	}
}

// value is the sample of series in the text exposition out.
func value(out, series string) (float64, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

func TestAScrapeShowsTheStoresHealthAndRoom(t *testing.T) {
	t.Parallel()
	reasons := []string{"disconnected", "disk_full", "quota"}
	for _, tc := range []struct {
		name      string
		h         metrics.StoreHealth
		want, not []string
	}{
		{"a store that takes writes",
			metrics.StoreHealth{Reasons: reasons, Used: 300, Limit: 1000, DiskFree: 5000, DiskSize: 9000, Headroom: 700, HeadroomKnown: true, Purged: 12},
			[]string{"jethook_store_ready 1", `jethook_store_refusing{reason="disk_full"} 0`, `jethook_store_refusing{reason="quota"} 0`,
				"jethook_store_used_bytes 300", "jethook_store_limit_bytes 1000", "jethook_store_disk_free_bytes 5000",
				"jethook_store_disk_size_bytes 9000", "jethook_store_headroom_bytes 700", "jethook_store_purged_total 12"},
			nil},
		{"a full disk",
			metrics.StoreHealth{Reason: "disk_full", Reasons: reasons, Used: 300, DiskFree: 10, DiskSize: 9000, HeadroomKnown: true},
			[]string{"jethook_store_ready 0", `jethook_store_refusing{reason="disk_full"} 1`, `jethook_store_refusing{reason="disconnected"} 0`,
				"jethook_store_headroom_bytes 0"},
			[]string{"jethook_store_limit_bytes"}},
		{"nothing known of limit or disk",
			metrics.StoreHealth{Reasons: reasons},
			[]string{"jethook_store_ready 1"},
			[]string{"jethook_store_limit_bytes", "jethook_store_disk_free_bytes", "jethook_store_headroom_bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New(nil)
			m.SetStore(func() metrics.StoreHealth { return tc.h })
			out := scrape(t, m)
			for _, want := range tc.want {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("scrape lacks %s", want)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(out, not) {
					t.Errorf("scrape has %s, which is unknown", not)
				}
			}
		})
	}
}

// A latency observed under a sampled span carries its trace id as an
// exemplar in OpenMetrics; one under an unsampled span, or none, does not:
// its trace is nowhere to be found.
func TestALatencyUnderASampledSpanHasItsTraceIDAsExemplar(t *testing.T) {
	t.Parallel()
	span := func(id string, flags trace.TraceFlags) trace.SpanContext {
		tid, err := trace.TraceIDFromHex(id)
		if err != nil {
			t.Fatal(err)
		}
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: flags})
	}
	const sampled, unsampled = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	m := metrics.New(prometheus.NewRegistry())
	m.Published("shop", time.Millisecond, false, nil, span(sampled, trace.FlagsSampled))
	d := m.Destination("shop", "app")
	d.Attempt("delivered", 200, 2*time.Second, span(sampled, trace.FlagsSampled), time.Now())
	d.Attempt("delivered", 200, 20*time.Second, span(unsampled, 0), time.Now())
	d.Delivered(time.Hour, trace.SpanContext{})

	out := scrapeOpenMetrics(t, m)
	for _, want := range []string{
		`jethook_store_publish_seconds_bucket{le="0.001"} 1 # {trace_id="` + sampled + `"} 0.001`,
		`jethook_attempt_seconds_bucket{destination="app",route="shop",le="2.5"} 1 # {trace_id="` + sampled + `"} 2.0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, unsampled) {
		t.Error("an unsampled span's trace id is an exemplar")
	}
	if n := strings.Count(out, "trace_id"); n != 2 {
		t.Errorf("%d exemplars, want 2:\n%s", n, out)
	}
}

// Exemplars are spaced bucket by bucket: a slow attempt right after a
// fast one of the same destination still links its bucket to its trace.
func TestASlowBucketGetsItsExemplarRightAfterAFastOne(t *testing.T) {
	t.Parallel()
	span := func(id byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{15: id}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	}
	m := metrics.New(prometheus.NewRegistry())
	d := m.Destination("shop", "app")
	d.Attempt("delivered", 200, time.Millisecond, span(1), time.Now())
	d.Attempt("delivered", 200, 20*time.Second, span(2), time.Now())

	body := scrapeOpenMetrics(t, m)
	for _, want := range []string{
		`jethook_attempt_seconds_bucket{destination="app",route="shop",le="0.005"} 1 # {trace_id="` + span(1).TraceID().String() + `"} 0.001`,
		`jethook_attempt_seconds_bucket{destination="app",route="shop",le="30.0"} 2 # {trace_id="` + span(2).TraceID().String() + `"} 20.0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s:\n%s", want, body)
		}
	}
}

// scrapeOpenMetrics reads m's metrics as Prometheus reads them when it
// asks for exemplars: in the OpenMetrics format.
func scrapeOpenMetrics(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// A reload starts a changed destination before it stops the old one, and
// stopping the old one removes its gauges: the new one's, which it may
// have looked up already, still reach the scrape when it sets them.
func TestARestartedDestinationKeepsItsSeriesWhenTheOldOneIsRemoved(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	old := m.Destination("shop", "app")
	old.AttemptStarted()
	old.Attempt("transient", 503, time.Millisecond, trace.SpanContext{}, time.Now())
	old.Breaker(true)
	old.Limit(5)
	old.AttemptEnded()

	next := m.Destination("shop", "app")
	next.Breaker(false)
	next.Limit(7)
	old.Remove()
	out := scrape(t, m)
	for _, gone := range []string{"jethook_breaker_open{", "jethook_learned_limit{"} {
		if strings.Contains(out, gone) {
			t.Errorf("scrape still has %s after the old destination was removed", gone)
		}
	}
	if want := `jethook_in_flight{destination="app",route="shop"} 0`; !strings.Contains(out, want+"\n") {
		t.Errorf("scrape lacks %s, the restarted destination's", want)
	}

	next.AttemptStarted()
	next.Attempt("delivered", 200, time.Millisecond, trace.SpanContext{}, time.Now())
	next.Breaker(false)
	next.Limit(9)
	out = scrape(t, m)
	for _, want := range []string{
		`jethook_in_flight{destination="app",route="shop"} 1`,
		`jethook_breaker_open{destination="app",route="shop"} 0`,
		`jethook_learned_limit{destination="app",route="shop"} 9`,
		`jethook_attempts_total{class="5xx",destination="app",outcome="transient",route="shop"} 1`,
		`jethook_attempts_total{class="2xx",destination="app",outcome="delivered",route="shop"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}

	// Once the new one is removed too, its gauges go.
	next.Remove()
	if out := scrape(t, m); strings.Contains(out, "jethook_in_flight{") || strings.Contains(out, "jethook_breaker_open{") {
		t.Errorf("scrape keeps the gauges of a removed destination:\n%s", out)
	}
}

// A reload starts the new destination before the old one stops: attempts
// the new one began before the old one's Remove end after it, and the
// in-flight gauge counts them down to 0, not below.
func TestInFlightAttemptsOfARestartedDestinationEndAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New(prometheus.NewRegistry())
	old := m.Destination("shop", "app")
	next := m.Destination("shop", "app")
	next.AttemptStarted()
	next.AttemptStarted()
	old.Remove()
	for _, want := range []string{"1", "0"} {
		next.AttemptEnded()
		line := `jethook_in_flight{destination="app",route="shop"} ` + want
		if out := scrape(t, m); !strings.Contains(out, line+"\n") {
			t.Errorf("scrape lacks %s:\n%s", line, grepLines(out, "jethook_in_flight"))
		}
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
