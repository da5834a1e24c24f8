package catchup_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// githubRig is a github route whose hook is f.
func githubRig(t *testing.T, dir string, f *fakeGitHub) *rig {
	r := newRig(t, dir, "routes:\n  - name: gh\n    path: /gh\n    provider: github\n    secret: "+ghSecret+"\n"+
		"    destinations: [{name: app, url: 'http://127.0.0.1:1/'}]\n"+f.catchUp("50ms"))
	f.hook = r.ingress.URL + "/gh"
	return r
}

func TestGitHubRedeliversWhatJethookMissedOnce(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	r := githubRig(t, t.TempDir(), f)

	if code := f.send("stored"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	f.missed("missed-502", http.StatusBadGateway)
	f.missed("missed-timeout", 0)
	f.missed("missed-502", http.StatusBadGateway) // retried from GitHub's UI, failed again
	f.missed("fixed", http.StatusServiceUnavailable)
	if code := f.send("fixed"); code != http.StatusOK { // redelivered by hand since
		t.Fatalf("ingress answered %d", code)
	}
	for i := range 150 { // two pages more than the missed ones
		f.missed(fmt.Sprintf("ok-%d", i), http.StatusOK)
	}
	f.set(func(f *fakeGitHub) { f.limitNext = 1 })

	cu, _ := r.start()
	testkit.Eventually(t, 10*time.Second, "the missed deliveries stored", func() bool {
		return r.has("gh", "missed-502") && r.has("gh", "missed-timeout")
	})
	passes(t, cu, "gh", 3)

	for guid, want := range map[string]int{"missed-502": 1, "missed-timeout": 1, "stored": 0, "fixed": 0, "ok-0": 0} {
		if got := f.asks.get(guid); got != want {
			t.Errorf("redeliveries of %s asked = %d, want %d (all: %v)", guid, got, want, &f.asks)
		}
	}
	if n := r.messages(); n != 4 {
		t.Errorf("store holds %d webhooks, want 4", n)
	}
	s, _ := status(cu, "gh")
	if s.Recovered != 2 || s.Requested != 2 || s.LastError != "" || s.Provider != "github" {
		t.Errorf("status = %+v, want 2 recovered, 2 requested, no error", s)
	}
	f.set(func(f *fakeGitHub) {
		if f.limited != 1 {
			t.Errorf("the API rate-limited %d requests, want 1", f.limited)
		}
	})
	if got := r.metric(`jethook_catch_up_recovered_total{provider="github",route="gh"}`); got == "" || got[len(got)-2:] != " 2" {
		t.Errorf("recovered metric = %q, want 2", got)
	}
	r.noSecretsLogged()
}

func TestGitHubRestartWhileRedeliveryPendingStoresOnce(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	r := githubRig(t, t.TempDir(), f)
	f.missed("pending", http.StatusBadGateway)
	hold := make(chan struct{})
	f.set(func(f *fakeGitHub) { f.hold = hold })

	_, stop := r.start()
	testkit.Eventually(t, 10*time.Second, "a redelivery asked for", func() bool { return f.asks.get("pending") == 1 })
	stop() // jethook restarts before GitHub redelivers
	cu, _ := r.start()
	testkit.Eventually(t, 10*time.Second, "the redelivery asked for again", func() bool { return f.asks.get("pending") == 2 })
	close(hold) // GitHub now delivers both
	f.wg.Wait()
	if !r.has("gh", "pending") {
		t.Fatal("the redelivered event is not stored")
	}
	passes(t, cu, "gh", 2)
	if n := r.messages(); n != 1 {
		t.Errorf("store holds %d webhooks, want 1", n)
	}
	if got := f.asks.get("pending"); got != 2 {
		t.Errorf("redeliveries asked = %d, want 2 (one per process)", got)
	}
	if s, _ := status(cu, "gh"); s.Recovered != 1 {
		t.Errorf("status = %+v, want 1 recovered", s)
	}
}

func TestGitHubOutageLeavesJethookRunning(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	r := githubRig(t, t.TempDir(), f)
	f.missed("during-outage", http.StatusBadGateway)
	f.set(func(f *fakeGitHub) { f.down = true })

	cu, _ := r.start()
	passes(t, cu, "gh", 2)
	if s, _ := status(cu, "gh"); s.LastError == "" || s.LastSuccessAt != nil {
		t.Errorf("status during the outage = %+v, want an error", s)
	}
	if got := r.metric(`jethook_catch_up_errors_total{provider="github",route="gh"}`); got == "" {
		t.Error("no catch-up error counted")
	}
	if code := f.send("live"); code != http.StatusOK {
		t.Errorf("ingress answered %d during GitHub's outage", code)
	}

	f.set(func(f *fakeGitHub) { f.down = false })
	testkit.Eventually(t, 10*time.Second, "the missed delivery stored", func() bool { return r.has("gh", "during-outage") })
	passes(t, cu, "gh", 2)
	if s, _ := status(cu, "gh"); s.LastError != "" || s.Recovered != 1 {
		t.Errorf("status after the outage = %+v, want 1 recovered and no error", s)
	}
	if got := f.asks.get("during-outage"); got != 1 {
		t.Errorf("redeliveries asked = %d, want 1", got)
	}
	r.noSecretsLogged()
}

func TestGitHubOrganizationHook(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.base = "/orgs/acme/hooks/7"
	r := githubRig(t, t.TempDir(), f)
	f.missed("org-missed", http.StatusServiceUnavailable)
	cu, _ := r.start()
	testkit.Eventually(t, 10*time.Second, "the missed delivery stored", func() bool { return r.has("gh", "org-missed") })
	passes(t, cu, "gh", 2)
	if got := f.asks.get("org-missed"); got != 1 {
		t.Errorf("redeliveries asked = %d, want 1", got)
	}
	if s, _ := status(cu, "gh"); s.Recovered != 1 || s.LastError != "" {
		t.Errorf("status = %+v, want 1 recovered", s)
	}
}
