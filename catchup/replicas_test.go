package catchup_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// Two replicas on one NATS server run both catch-ups at once: each
// missed event is stored once.
func TestTwoReplicasStoreEachMissedEventOnce(t *testing.T) {
	t.Parallel()
	url := testkit.NATSServer(t)
	gh, sp := newFakeGitHub(t), newFakeStripe(t)
	yaml := "routes:\n" +
		"  - name: gh\n    path: /gh\n    provider: github\n    secret: " + ghSecret + "\n" +
		"    destinations: [{name: app, url: 'http://127.0.0.1:1/'}]\n" + gh.catchUp("50ms") +
		"  - name: st\n    path: /st\n    provider: stripe\n    secret: " + stripeSecret + "\n" +
		"    destinations: [{name: app, url: 'http://127.0.0.1:1/'}]\n" + sp.catchUp("50ms")
	a := newRigWith(t, store.Options{URL: url, DataDir: t.TempDir()}, yaml)
	b := newRigWith(t, store.Options{URL: url, DataDir: t.TempDir()}, yaml)
	gh.hook = a.ingress.URL + "/gh" // the load balancer in front picks a replica

	gh.missed("missed-1", http.StatusBadGateway)
	gh.missed("missed-2", 0)
	now := time.Now().Unix()
	if code := sp.send(b.ingress.URL+"/st", "evt_before", now-500); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	for i := range 30 {
		sp.add(fmt.Sprintf("evt_missed_%02d", i), now-400+int64(i))
	}

	ca, _ := a.start()
	cb, _ := b.start()
	testkit.Eventually(t, 10*time.Second, "the missed events stored", func() bool {
		return b.has("gh", "missed-1") && b.has("gh", "missed-2") && a.has("st", "evt_missed_00") && a.has("st", "evt_missed_29")
	})
	for _, route := range []string{"gh", "st"} {
		passes(t, ca, route, 2)
		passes(t, cb, route, 2)
	}
	if n := a.messages(); n != 33 {
		t.Errorf("the stream holds %d webhooks, want 33", n)
	}
	for _, guid := range []string{"missed-1", "missed-2"} {
		if n := gh.asks.get(guid); n < 1 || n > 2 {
			t.Errorf("redeliveries of %s asked = %d, want one per replica at most", guid, n)
		}
	}
	sa, _ := status(ca, "st")
	sb, _ := status(cb, "st")
	if sa.Recovered+sb.Recovered != 30 {
		t.Errorf("the replicas recovered %d and %d Stripe events, want 30 in all", sa.Recovered, sb.Recovered)
	}
}
