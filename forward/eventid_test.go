package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// idRoutes has one route per place a provider puts its event id.
const idRoutes = `
defaults:
  retry: {backoff: exponential, base: 20ms, multiplier: 2, max_delay: 200ms, jitter: none, max_attempts: 6, max_age: 1h}
  timeout: 2s
routes:
  - {name: gh, path: /hooks/gh, provider: github, secret: gh-secret, destinations: [{name: app, url: "${BACKEND}/gh"}]}
  - {name: sw, path: /hooks/sw, provider: standard-webhooks, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, destinations: [{name: app, url: "${BACKEND}/sw"}]}
  - name: partner
    path: /hooks/partner
    provider: hmac
    secret: partner-secret
    hmac: {header: X-Signature, id_header: X-Event-Id}
    destinations: [{name: app, url: "${BACKEND}/partner"}]
`

// Provider event ids become the dedup key and the X-Webhook-Id the backend
// sees, but never a subject token: whatever they hold, the webhook is
// stored under webhooks.<route>.<hash> (the destination's consumer reads
// only webhooks.<route>.*), found by its id, and delivered once. Ids that
// are not printable ASCII without spaces, or longer than 200 bytes, are
// replaced by a SHA-256 of route and id. Every route gets the same ids:
// an id seen on one route does not make another route's event a duplicate.
func TestEventIDsWithSubjectCharactersAreStoredUnderOneTokenAndDelivered(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	cfg := parseConfig(t, idRoutes, b.URL)
	r := newRig(t, cfg, store.Options{})
	idHeaders := map[string]string{"gh": "X-Github-Delivery", "sw": "Webhook-Id", "partner": "X-Event-Id"}
	secrets := map[string]string{"gh": "gh-secret", "sw": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "partner": "partner-secret"}
	ids := []string{"a.b.c", "*", ">", "evt.>", "webhooks.gh.>", "with space", "tab\there", "quote\"and\\slash",
		strings.Repeat("x.", 100), strings.Repeat(">", 201), strings.Repeat("long.", 1600)}

	type sent struct{ route, raw, stored string }
	var all []sent
	post := func(route, id string, n int) (int, string) {
		t.Helper()
		body := fmt.Appendf(nil, `{"route":%q,"n":%d}`, route, n)
		rt, _ := cfg.Route(route)
		p, err := provider.New(rt.ProviderConfig())
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Content-Type": {"application/json"}, idHeaders[route]: {id}}
		if err := p.Sign(&provider.Request{Method: http.MethodPost, Header: h, Body: body}, secrets[route], time.Now()); err != nil {
			t.Fatal(err)
		}
		return r.post("/hooks/"+route, h, body)
	}
	for _, route := range []string{"gh", "sw", "partner"} {
		for n, id := range ids {
			code, resp := post(route, id, n)
			var ack struct {
				ID        string
				Duplicate bool
			}
			if code != http.StatusOK || json.Unmarshal([]byte(resp), &ack) != nil || ack.Duplicate {
				t.Fatalf("%s id %.40q: ingress answered %d %s", route, id, code, resp)
			}
			usable := len(id) <= 200 && !strings.ContainsAny(id, " \t")
			if usable && ack.ID != id || !usable && (!strings.HasPrefix(ack.ID, "sha256:") || len(ack.ID) != len("sha256:")+64) {
				t.Errorf("%s id %.40q stored as %q", route, id, ack.ID)
			}
			all = append(all, sent{route, id, ack.ID})
		}
	}
	// A provider's redelivery of an id full of wildcards is still one event.
	if code, resp := post("gh", "evt.>", 3); code != http.StatusOK || !strings.Contains(resp, `"duplicate":true`) {
		t.Errorf("redelivery of evt.>: %d %s, want a duplicate", code, resp)
	}

	eventually(t, "every event delivered", func() bool { return b.count() >= len(all) })
	storetest.Settled(t, r.store) // every event acked: no second delivery can come
	got := map[string][]hit{}
	for _, h := range b.all() {
		k := h.path + " " + h.header.Get("X-Webhook-Id")
		got[k] = append(got[k], h)
	}
	for _, s := range all {
		hits := got["/"+s.route+" "+s.stored]
		if len(hits) != 1 {
			t.Errorf("%s id %.40q delivered %d times, want once", s.route, s.raw, len(hits))
			continue
		}
		h := hits[0]
		if v := h.header.Values("X-Webhook-Id"); len(v) != 1 {
			t.Errorf("%s id %.40q: X-Webhook-Id %q", s.route, s.raw, v)
		}
		if v := h.header.Get(idHeaders[s.route]); v != s.raw {
			t.Errorf("%s: the provider's %s arrived as %.40q, want %.40q", s.route, idHeaders[s.route], v, s.raw)
		}
		// The three routes share the ids: the lookup names the route.
		if e, _, err := r.store.Event(context.Background(), s.stored, s.route); err != nil || e.EventID != s.stored || e.Route != s.route {
			t.Errorf("%s id %.40q: looked up as %v, %v", s.route, s.raw, e, err)
		}
	}
	if n := b.count(); n != len(all) {
		t.Errorf("%d deliveries, want %d", n, len(all))
	}
}
