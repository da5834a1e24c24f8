package forward_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jethook/jethook/store"
)

// watched is jethook in one test with everything an operator watches:
// metrics in their own registry, the attempt log, and alerts posted to a
// real HTTP server.
type watched struct {
	*rig
	reg    *prometheus.Registry
	alerts *alertSink
}

func newWatched(t *testing.T, cfg string, backendURL string) *watched {
	t.Helper()
	w := &watched{alerts: newAlertSink(t)}
	cfg += "alerts: {url: \"" + w.alerts.URL + "\", batch: 100ms}\n"
	w.rig = newRig(t, parseConfig(t, cfg, backendURL), store.Options{})
	w.reg = w.app.Registry
	return w
}

// value is the current value of one series (a histogram's sample count),
// 0 when absent.
func (w *watched) value(name string, labels ...string) float64 {
	w.t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// accepted posts body and returns the event id ingress answered with.
func (w *watched) accepted(body string) string {
	w.t.Helper()
	code, resp := w.post("/hooks/shop", nil, []byte(body))
	if code != http.StatusOK {
		w.t.Fatalf("ingress answered %d %s", code, resp)
	}
	var a struct{ ID string }
	if err := json.Unmarshal([]byte(resp), &a); err != nil || a.ID == "" {
		w.t.Fatalf("ingress answer %s: %v", resp, err)
	}
	return a.ID
}

// alertSink is a chat webhook: it records the text of every notice.
type alertSink struct {
	*httptest.Server
	mu    sync.Mutex
	texts []string
}

func newAlertSink(t *testing.T) *alertSink {
	s := &alertSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct{ Text string }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &n); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("alert %q is not a JSON notice", body)
		}
		s.mu.Lock()
		s.texts = append(s.texts, n.Text)
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *alertSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.texts...)
}

// says reports whether a notice so far contains line.
func (s *alertSink) says(line string) bool {
	for _, text := range s.all() {
		if strings.Contains(text, line) {
			return true
		}
	}
	return false
}

func TestMetricsAndTheAttemptLogTellTwoFailuresThenADelivery(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(2))
	w := newWatched(t, fastRetry, b.URL)
	id := w.accepted(`{"order":1}`)
	eventually(t, "a delivery", func() bool { return w.value("jethook_delivered_total", "route", "shop", "destination", "app") == 1 })
	if again := w.accepted(`{"order":1}`); again != id {
		t.Fatalf("the same body got id %q, then %q", id, again)
	}

	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"jethook_received_total", []string{"route", "shop"}, 2},
		{"jethook_stored_total", []string{"route", "shop"}, 1},
		{"jethook_duplicates_total", []string{"route", "shop"}, 1},
		{"jethook_store_publish_seconds", nil, 2},
		{"jethook_attempts_total", []string{"route", "shop", "destination", "app", "outcome", "transient", "class", "5xx"}, 2},
		{"jethook_attempts_total", []string{"route", "shop", "destination", "app", "outcome", "delivered", "class", "2xx"}, 1},
		{"jethook_attempt_seconds", []string{"route", "shop", "destination", "app"}, 3},
		{"jethook_delivery_age_seconds", []string{"route", "shop", "destination", "app"}, 1},
		{"jethook_breaker_open", []string{"route", "shop", "destination", "app"}, 0},
		{"jethook_dead_lettered_total", nil, 0},
		{"jethook_in_flight", []string{"route", "shop", "destination", "app"}, 0},
		{"jethook_pending", []string{"route", "shop", "destination", "app"}, 0},
		{"jethook_in_backoff", []string{"route", "shop", "destination", "app"}, 0},
	}
	for _, m := range want {
		if got := w.value(m.name, m.labels...); got != m.value {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.value)
		}
	}

	var attempts []store.Attempt
	eventually(t, "three logged attempts", func() bool {
		var err error
		attempts, err = w.store.Attempts(context.Background(), id)
		return err == nil && len(attempts) == 3
	})
	for i, a := range attempts {
		wantStatus, wantOutcome, retries := 503, "transient", true
		if i == 2 {
			wantStatus, wantOutcome, retries = 200, "delivered", false
		}
		if a.Attempt != i+1 || a.Status != wantStatus || a.Outcome != wantOutcome || (a.Next > 0) != retries ||
			a.Route != "shop" || a.Destination != "app" || a.EventID != id || a.Latency <= 0 || a.Time.IsZero() {
			t.Errorf("attempt %d logged as %+v", i+1, a)
		}
	}
	if len(w.alerts.all()) != 0 {
		t.Errorf("alerts sent for a delivery: %q", w.alerts.all())
	}
}

func TestAPermanentFailureIsCountedAsADeadLetterAndAlerted(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusNotFound))
	w := newWatched(t, fastRetry, b.URL)
	id := w.accepted(`{"order":2}`)
	eventually(t, "an alert", func() bool { return len(w.alerts.all()) > 0 })
	if got := w.value("jethook_dead_lettered_total", "route", "shop", "destination", "app", "reason", "permanent"); got != 1 {
		t.Errorf("dead_lettered_total{reason=permanent} = %v, want 1", got)
	}
	if got := w.value("jethook_attempts_total", "outcome", "permanent", "class", "4xx"); got != 1 {
		t.Errorf("attempts_total{outcome=permanent,class=4xx} = %v, want 1", got)
	}
	text := w.alerts.all()[0]
	for _, s := range []string{"1 event dead-lettered", "shop → app", "permanent", id} {
		if !strings.Contains(text, s) {
			t.Errorf("alert %q does not say %q", text, s)
		}
	}
	if strings.Contains(text, `"order"`) || strings.Contains(text, b.URL) {
		t.Errorf("alert %q holds the payload or the destination URL", text)
	}
}

func TestRejectedWebhooksAreCountedByReason(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	cfg := edit(t, fastRetry, "    path: /hooks/shop\n", "    path: /hooks/shop\n    provider: github\n    secret: s3cret\n")
	w := newWatched(t, cfg, b.URL)
	if code, _ := w.post("/hooks/shop", nil, []byte(`{}`)); code != http.StatusUnauthorized {
		t.Fatalf("an unsigned webhook got %d, want 401", code)
	}
	if code, _ := w.post("/hooks/nowhere", nil, []byte(`{}`)); code != http.StatusNotFound {
		t.Fatalf("an unknown path got %d, want 404", code)
	}
	if got := w.value("jethook_rejected_total", "route", "shop", "reason", "missing_signature"); got != 1 {
		t.Errorf("rejected_total{route=shop,reason=missing_signature} = %v, want 1", got)
	}
	if got := w.value("jethook_rejected_total", "route", "", "reason", "no_route"); got != 1 {
		t.Errorf("rejected_total{reason=no_route} = %v, want 1", got)
	}
	if got := w.value("jethook_received_total", "route", "shop"); got != 1 {
		t.Errorf("received_total{route=shop} = %v, want 1", got)
	}
	if got := w.value("jethook_stored_total", "route", "shop"); got != 0 {
		t.Errorf("stored_total = %v, want 0", got)
	}
}

func TestAnOpenBreakerIsAGaugeAndAnAlertAndBackoffIsABacklog(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusServiceUnavailable))
	cfg := slowRetry(t, "breaker: {failures: 2, cooldown: 1h}")
	w := newWatched(t, cfg, b.URL)
	w.accepted(`{"order":3}`)
	w.accepted(`{"order":4}`)
	eventually(t, "a breaker alert", func() bool { return w.alerts.says("breaker opened: shop → app") })
	if got := w.value("jethook_breaker_open", "route", "shop", "destination", "app"); got != 1 {
		t.Errorf("breaker_open = %v, want 1", got)
	}
	eventually(t, "two messages in backoff", func() bool {
		return w.value("jethook_in_backoff", "route", "shop", "destination", "app") == 2
	})
	if got := w.value("jethook_pending", "route", "shop", "destination", "app"); got != 0 {
		t.Errorf("pending = %v, want 0", got)
	}
}

// A destination removed by a reload while its breaker is open leaves no
// breaker gauge at 1 and no alert reminding of it: nothing delivers to it
// any more, so nothing would ever close it.
func TestARemovedDestinationLeavesNoOpenBreakerBehind(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusServiceUnavailable))
	cfg := slowRetry(t, "breaker: {failures: 1, cooldown: 1h}")
	w := newWatched(t, cfg, b.URL)
	w.accepted(`{"order":5}`)
	eventually(t, "the breaker gauge at 1", func() bool {
		return w.value("jethook_breaker_open", "route", "shop", "destination", "app") == 1
	})

	renamed := edit(t, cfg, "{name: app,", "{name: app2,")
	if err := w.fwd.Reload(context.Background(), parseConfig(t, renamed, b.URL)); err != nil {
		t.Fatal(err)
	}
	if got := w.value("jethook_breaker_open", "route", "shop", "destination", "app"); got != 0 {
		t.Errorf("breaker_open of the removed destination = %v, want 0 (no series)", got)
	}
	eventually(t, "an alert that the breaker is no longer watched", func() bool {
		return w.alerts.says("breaker no longer watched: shop → app: the destination was removed or changed by a reload")
	})
}

// A retry that is due at once (a zero delay) still logs a next attempt:
// the attempt log reads a failed attempt without one as the event's last,
// so an event with its retry under way would read as dead-lettered, and
// an ordered destination would take it for settled.
func TestARetryDueAtOnceIsLoggedWithANextAttempt(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(2))
	cfg := strings.Replace(fastRetry, "{backoff: exponential, base: 20ms, multiplier: 2,", "{backoff: fixed, delay: 0s,", 1)
	w := newWatched(t, cfg, b.URL)
	id := w.accepted(`{"order":3}`)
	var attempts []store.Attempt
	eventually(t, "three logged attempts", func() bool {
		var err error
		attempts, err = w.store.Attempts(context.Background(), id)
		return err == nil && len(attempts) == 3
	})
	for _, a := range attempts[:2] {
		if a.Outcome != "transient" || a.Next <= 0 {
			t.Errorf("attempt %d, retried, logged with outcome %q and next %v", a.Attempt, a.Outcome, a.Next)
		}
	}
	if a := attempts[2]; a.Outcome != "delivered" || a.Next != 0 {
		t.Errorf("the delivery logged with outcome %q and next %v", a.Outcome, a.Next)
	}
}
