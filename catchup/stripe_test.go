package catchup_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
)

// stripeRig is a stripe route on account f, with a pass every 50ms.
func stripeRig(t *testing.T, dir string, f *fakeStripe) (r *rig, hook string) {
	return stripeRigEvery(t, dir, f, "50ms")
}

func stripeRigEvery(t *testing.T, dir string, f *fakeStripe, interval string) (r *rig, hook string) {
	r = newRig(t, dir, "routes:\n  - name: st\n    path: /st\n    provider: stripe\n    secret: "+stripeSecret+"\n"+
		"    destinations: [{name: app, url: 'http://127.0.0.1:1/'}]\n"+f.catchUp(interval))
	return r, r.ingress.URL + "/st"
}

func TestStripeStoresMissedEventsOnce(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	r, hook := stripeRigEvery(t, t.TempDir(), f, "1h") // one pass: what it costs is countable
	now := time.Now().Unix()
	for i, id := range []string{"evt_stored_1", "evt_stored_2"} {
		if code := f.send(hook, id, now-600+int64(i)*100); code != http.StatusOK {
			t.Fatalf("ingress answered %d", code)
		}
	}
	for i := range 150 { // missed while jethook was down: two pages
		f.add(fmt.Sprintf("evt_missed_%03d", i), now-400+int64(i))
	}
	if code := f.send(hook, "evt_stored_3", now-100); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	f.set(func(f *fakeStripe) { f.limitNext = 1 })

	cu, _ := r.start()
	passes(t, cu, "st", 1)

	if n := r.messages(); n != 153 {
		t.Errorf("store holds %d webhooks, want 153", n)
	}
	if got := f.retrieves.String(); got != "map[]" {
		t.Errorf("events were fetched one by one (%s); the list holds them whole", got)
	}
	if s, _ := status(cu, "st"); s.Recovered != 150 || s.LastError != "" || s.Requested != 0 {
		t.Errorf("status = %+v, want 150 recovered and no error", s)
	}
	f.set(func(f *fakeStripe) {
		if f.limited != 1 {
			t.Errorf("the API rate-limited %d requests, want 1", f.limited)
		}
	})

	// Stored as the bytes of its list element, marked, oldest first, and
	// signed with the route's secret so the backend verifies it like a
	// live one.
	ctx := context.Background()
	first, firstSeq, err := r.store.Event(ctx, "evt_missed_000", "st")
	if err != nil {
		t.Fatal(err)
	}
	_, lastSeq, err := r.store.Event(ctx, "evt_missed_149", "st")
	if err != nil {
		t.Fatal(err)
	}
	if firstSeq > lastSeq {
		t.Errorf("the oldest missed event was stored after the newest (seq %d > %d)", firstSeq, lastSeq)
	}
	f.set(func(f *fakeStripe) {
		if !bytes.Equal(first.Body, f.bodies["evt_missed_000"]) {
			t.Errorf("stored body %s, want the API's %s", first.Body, f.bodies["evt_missed_000"])
		}
	})
	if first.CaughtUp != "stripe" || http.Header(first.Header).Get(catchup.HeaderCaughtUp) != "stripe" {
		t.Errorf("caught-up event marked %q, header %v", first.CaughtUp, first.Header)
	}
	if !first.JSON {
		t.Error("the caught-up event is not recorded as JSON, as the ingress records its JSON bodies")
	}
	p, _ := provider.New(provider.Config{Name: provider.NameStripe, Secrets: []string{stripeSecret}})
	if err := p.Verify(&provider.Request{Method: http.MethodPost, Header: http.Header(first.Header), Body: first.Body}); err != nil {
		t.Errorf("the caught-up event's signature does not verify: %v", err)
	}
	if got := r.metric(`jethook_catch_up_recovered_total{provider="stripe",route="st"}`); got == "" || got[len(got)-4:] != " 150" {
		t.Errorf("recovered metric = %q, want 150", got)
	}
	// The rate-limited list call and its retry, and a second page
	// (docs/catch-up.md, What it costs).
	calls := r.metric(`jethook_catch_up_api_calls_total{provider="stripe",route="st"}`)
	if calls == "" || calls[len(calls)-2:] != " 3" {
		t.Errorf("API calls = %q, want 3", calls)
	}
	t.Logf("one pass over 153 events, 150 of them missed: %s", calls)
	r.noSecretsLogged()
}

func TestStripeRestartMidPassStoresOnceAndResumes(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	dir := t.TempDir()
	r, hook := stripeRig(t, dir, f)
	now := time.Now().Unix()
	if code := f.send(hook, "evt_before", now-500); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	for i := range 150 { // two pages
		f.add(fmt.Sprintf("evt_missed_%03d", i), now-400+int64(i))
	}
	holding := make(chan string, 1)
	f.set(func(f *fakeStripe) { f.holdNext, f.holding = true, holding })

	// jethook stops while the first pass asks for the second page.
	_, stop := r.start()
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the first pass never asked for a second page")
	}
	stop()
	if n := r.messages(); n != 1 {
		t.Fatalf("a pass stopped while listing stored %d webhooks, want only the one ingress stored", n)
	}
	f.set(func(f *fakeStripe) { f.holdNext = false })

	cu, stop := r.start()
	testkit.Eventually(t, 10*time.Second, "the missed events stored", func() bool { return r.has("st", "evt_missed_149") })
	passes(t, cu, "st", 2)
	if s, _ := status(cu, "st"); s.Recovered != 150 {
		t.Errorf("status after the restart = %+v, want 150 recovered", s)
	}
	stop()
	if n := r.messages(); n != 151 {
		t.Errorf("store holds %d webhooks, want 151", n)
	}
	if got := f.retrieves.String(); got != "map[]" {
		t.Errorf("events were fetched one by one: %s", got)
	}

	// A complete pass saved its cursor: the next start lists from there.
	var before int
	f.set(func(f *fakeStripe) { before = len(f.gte) })
	cu, _ = r.start()
	passes(t, cu, "st", 1)
	f.set(func(f *fakeStripe) {
		if want := now - 251 - 300; len(f.gte) <= before || f.gte[before] != want {
			t.Errorf("after a restart the first list asks created[gte]=%v, want %d", f.gte[before:], want)
		}
	})
	if n := r.messages(); n != 151 {
		t.Errorf("store holds %d webhooks after another restart, want 151", n)
	}
}

func TestStripeOutageLeavesJethookRunning(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	r, hook := stripeRig(t, t.TempDir(), f)
	now := time.Now().Unix()
	if code := f.send(hook, "evt_before", now-500); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	f.add("evt_missed", now-400)
	f.set(func(f *fakeStripe) { f.down = true })

	cu, _ := r.start()
	passes(t, cu, "st", 2)
	if s, _ := status(cu, "st"); s.LastError == "" || s.LastSuccessAt != nil {
		t.Errorf("status during the outage = %+v, want an error", s)
	}
	if code := f.send(hook, "evt_live", now-10); code != http.StatusOK {
		t.Errorf("ingress answered %d during Stripe's outage", code)
	}
	f.set(func(f *fakeStripe) { f.down = false })
	testkit.Eventually(t, 10*time.Second, "the missed event stored", func() bool { return r.has("st", "evt_missed") })
	passes(t, cu, "st", 1)
	if s, _ := status(cu, "st"); s.LastError != "" || s.Recovered != 1 {
		t.Errorf("status after the outage = %+v, want 1 recovered and no error", s)
	}
	if n := r.messages(); n != 3 {
		t.Errorf("store holds %d webhooks, want 3", n)
	}
	r.noSecretsLogged()
}

func TestStripeStoresOnlyTheEventTypesTheEndpointWants(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	f.types = ", events: ['invoice.*', customer.created]"
	r, hook := stripeRig(t, t.TempDir(), f)
	now := time.Now().Unix()
	if code := f.send(hook, "evt_before", now-500); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	f.addType("evt_invoice", "invoice.payment_failed", now-400)
	f.addType("evt_customer", "customer.created", now-399)
	f.addType("evt_charge", "charge.succeeded", now-398)
	f.addType("evt_customer_updated", "customer.updated", now-397)

	cu, _ := r.start()
	testkit.Eventually(t, 10*time.Second, "the wanted events stored", func() bool {
		return r.has("st", "evt_invoice") && r.has("st", "evt_customer")
	})
	passes(t, cu, "st", 2)
	if r.has("st", "evt_charge") || r.has("st", "evt_customer_updated") || r.messages() != 3 {
		t.Errorf("stored events the endpoint does not want (%d webhooks)", r.messages())
	}
	if got := f.retrieves.String(); got != "map[]" {
		t.Errorf("events were fetched one by one: %s", got)
	}
}

func TestReloadKeepsAnUnchangedCatchUpAndRestartsAChangedOne(t *testing.T) {
	t.Parallel()
	f := newFakeStripe(t)
	r, hook := stripeRig(t, t.TempDir(), f)
	now := time.Now().Unix()
	if code := f.send(hook, "evt_before", now-500); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	f.add("evt_missed", now-400)
	cu, _ := r.start()
	testkit.Eventually(t, 10*time.Second, "the missed event stored", func() bool { return r.has("st", "evt_missed") })
	passes(t, cu, "st", 1)

	same, err := policy.Parse("policies.yaml", []byte(r.yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	cu.Reload(same)
	passes(t, cu, "st", 1)
	if s, _ := status(cu, "st"); s.Recovered != 1 {
		t.Errorf("after a reload of the same block: %+v, want the 1 recovered kept", s)
	}

	changed, err := policy.Parse("policies.yaml", []byte(strings.Replace(r.yaml, "interval: 50ms", "interval: 40ms", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cu.Reload(changed)
	passes(t, cu, "st", 1)
	if s, _ := status(cu, "st"); s.Recovered != 0 || s.LastError != "" {
		t.Errorf("after a reload that changed the block: %+v, want a new catch-up", s)
	}
	if n := r.messages(); n != 2 {
		t.Errorf("store holds %d webhooks, want 2", n)
	}
}
