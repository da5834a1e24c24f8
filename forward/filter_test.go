package forward_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// fanOut is fastRetry with one route to three destinations: billing takes
// Stripe's invoice events, ci takes GitHub's pushes and pull requests,
// and all takes everything.
func fanOut(t *testing.T) string {
	return edit(t, fastRetry, `      - {name: app, url: "${BACKEND}/hook"}`, `      - name: billing
        url: "${BACKEND}/billing"
        filter: 'body.type.startsWith("invoice.")'
      - name: ci
        url: "${BACKEND}/ci"
        filter: 'headers["x-github-event"] in ["push", "pull_request"]'
      - {name: all, url: "${BACKEND}/all"}`)
}

// filterRig starts jethook on yaml with a forwarder that logs to logs and
// parks a webhook whose next attempt is parkAfter away or more.
func filterRig(t *testing.T, yaml, backendURL string, logs io.Writer, parkAfter time.Duration) *rig {
	t.Helper()
	return newRig(t, parseConfig(t, yaml, backendURL), store.Options{}, func(o *app.Options) {
		o.FetchWait = 100 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.ParkAfter = parkAfter
	})
}

// state is where event id stands at destination dest, as GET /v1/events
// reads it.
func (r *rig) state(route, id, dest string) string {
	r.t.Helper()
	ctx := context.Background()
	e, seq, err := r.store.Event(ctx, id, route)
	if err != nil {
		r.t.Fatalf("event %s: %v", id, err)
	}
	d, err := r.store.Delivery(ctx, e, seq, dest)
	if err != nil {
		r.t.Fatalf("delivery of %s to %s: %v", id, dest, err)
	}
	return d.State
}

// send posts a webhook to the shop route and returns its event id.
func (r *rig) send(header http.Header, body string) string {
	r.t.Helper()
	code, out := r.post("/hooks/shop", header, []byte(body))
	var ack struct{ ID string }
	if err := json.Unmarshal([]byte(out), &ack); code != http.StatusOK || err != nil || ack.ID == "" {
		r.t.Fatalf("ingress %d %s", code, out)
	}
	return ack.ID
}

// received lists, by name, the events a backend received on path, sorted;
// names maps event ids to names.
func received(b *backend, path string, names map[string]string) []string {
	var out []string
	for _, h := range b.all() {
		if h.path == path {
			out = append(out, names[h.header.Get("X-Webhook-Id")])
		}
	}
	slices.Sort(out)
	return out
}

func TestAFanOutRouteDeliversEachDestinationOnlyWhatItsFilterMatches(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	logs := &testkit.LogBuffer{}
	r := filterRig(t, fanOut(t), b.URL, logs, forward.DefaultParkAfter)

	events := []struct {
		id, event, body string
	}{
		{"invoice", "", `{"type":"invoice.paid","secret":"card-4242"}`},
		{"push", "push", `{"type":"customer.created"}`},
		{"ping", "issues", `ping card-4242`},
		{"pr-invoice", "pull_request", `{"type":"invoice.created"}`},
		{"issue-invoice", "issues", `{"type":"invoice.voided"}`},
	}
	names, idOf := map[string]string{}, map[string]string{}
	for _, e := range events {
		h := http.Header{}
		if e.event != "" {
			h.Set("X-GitHub-Event", e.event)
		}
		id := r.send(h, e.body)
		names[id], idOf[e.id] = e.id, id
	}
	storetest.Settled(t, r.store)

	want := map[string][]string{
		"/billing": {"invoice", "pr-invoice", "issue-invoice"},
		"/ci":      {"push", "pr-invoice"},
		"/all":     {"invoice", "push", "ping", "pr-invoice", "issue-invoice"},
	}
	for path, w := range want {
		got := received(b, path, names)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s received %v, want %v", path, got, w)
		}
	}
	for _, e := range events {
		for dest, path := range map[string]string{"billing": "/billing", "ci": "/ci", "all": "/all"} {
			wantState := store.StateFiltered
			if slices.Contains(want[path], e.id) {
				wantState = store.StateDelivered
			}
			if got := r.state("shop", idOf[e.id], dest); got != wantState {
				t.Errorf("event %s at %s: %s, want %s", e.id, dest, got, wantState)
			}
		}
	}

	// The attempt log says why: one record, no request, and for a filter
	// that failed on the event, the kind of failure.
	as, err := r.store.Attempts(context.Background(), idOf["ping"])
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		switch a.Destination {
		case "billing":
			if a.Outcome != "filtered" || a.Attempt != 1 || a.Status != 0 || a.Error != "filter failed: no such key" {
				t.Errorf("ping at billing logged %+v", a)
			}
		case "ci":
			if a.Outcome != "filtered" || a.Error != "" {
				t.Errorf("ping at ci logged %+v", a)
			}
		}
	}

	if got := scrape(t, r.metrics, `jethook_filtered_total{destination="billing",route="shop"}`); got != " 2" {
		t.Errorf("billing filtered_total%s, want 2", got)
	}
	if got := scrape(t, r.metrics, `jethook_filtered_total{destination="ci",route="shop"}`); got != " 3" {
		t.Errorf("ci filtered_total%s, want 3", got)
	}
	if got := scrape(t, r.metrics, `jethook_filter_errors_total{destination="ci",kind="no such key",route="shop"}`); got != " 1" {
		t.Errorf("ci filter_errors_total%s, want 1 (the invoice without X-GitHub-Event)", got)
	}
	if got := scrape(t, r.metrics, `jethook_attempts_total{class="2xx",destination="billing",outcome="delivered",route="shop"}`); got != " 3" {
		t.Errorf("billing attempts%s, want 3: a filtered event is no attempt", got)
	}

	// billing failed on "ping" (null body) once: logged once, and never
	// with the payload.
	out := logs.String()
	if n := strings.Count(out, "filter failed"); n != 2 {
		t.Errorf("%d filter failures logged, want one per destination and kind (billing, ci):\n%s", n, out)
	}
	if strings.Contains(out, "card-4242") {
		t.Errorf("a payload reached the log:\n%s", out)
	}
}

// A reload that changes a filter applies it to events not yet attempted;
// a retry that was parked before the reload, and a replay, are delivered
// without being checked again.
func TestAReloadedFilterAppliesToNewEventsButNotToParkedRetriesOrReplays(t *testing.T) {
	t.Parallel()
	b := newBackend(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // "retried": parked for its next attempt
		case 2:
			w.WriteHeader(http.StatusGone) // "dead": dead-lettered
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	// A second between attempts, each wait parked.
	yaml := func(filter string) string {
		cfg := edit(t, fastRetry, "backoff: exponential, base: 20ms, multiplier: 2, max_delay: 200ms, jitter: none",
			"backoff: fixed, delay: 1s, jitter: none")
		return edit(t, cfg, `      - {name: app, url: "${BACKEND}/hook"}`,
			"      - {name: app, url: \"${BACKEND}/hook\", filter: '"+filter+"'}")
	}
	r := filterRig(t, yaml(`body.kind == "a"`), b.URL, io.Discard, 100*time.Millisecond)

	names, idOf := map[string]string{}, map[string]string{}
	post := func(name, kind string) {
		t.Helper()
		id := r.send(nil, `{"name":"`+name+`","kind":"`+kind+`"}`)
		names[id], idOf[name] = name, id
	}
	post("retried", "a")
	eventually(t, "the first event parked after a 503", func() bool { return r.store.ParkedCount("shop", "app") == 1 })
	post("dead", "a")
	eventually(t, "the second event dead-lettered after a 410", func() bool { return len(r.deadLetters()) == 1 })

	if err := r.fwd.Reload(context.Background(), parseConfig(t, yaml(`body.kind == "b"`), b.URL)); err != nil {
		t.Fatal(err)
	}
	post("old-kind", "a")
	post("new-kind", "b")
	if _, err := r.store.Replay(context.Background(), r.deadLetters()); err != nil {
		t.Fatal(err)
	}
	storetest.Settled(t, r.store)

	got := received(b, "/hook", names)
	want := []string{"dead", "dead", "new-kind", "retried", "retried"}
	if !slices.Equal(got, want) {
		t.Errorf("backend received %v, want %v", got, want)
	}
	for id, want := range map[string]string{"retried": store.StateDelivered, "old-kind": store.StateFiltered, "new-kind": store.StateDelivered} {
		if got := r.state("shop", idOf[id], "app"); got != want {
			t.Errorf("event %s: %s, want %s", id, got, want)
		}
	}
}
