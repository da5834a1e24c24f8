package forward_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// replicaOptions are the store options of a replica on the NATS server at
// url, with waiting records (and so the destination's lease) on.
func replicaOptions(t *testing.T, url string) store.Options {
	return store.Options{URL: url, DataDir: t.TempDir(), WaitingEvery: 500 * time.Millisecond}
}

// Two replicas share a NATS server and an ordered destination, and each
// receives half of the webhooks. While the first event of key a fails,
// the later ones wait behind it whichever replica received them: only
// the replica that holds the destination's lease fetches, so no replica
// without a#1 takes the key for a later event.
func TestTwoReplicasKeepAKeyBehindItsFailingEvent(t *testing.T) {
	t.Parallel()
	up, c, cfg := aFailsFirstUntilUp(t)
	url := testkit.NATSServer(t)
	// Fetches that end at different times, so that each replica's fetch
	// would often be the one waiting first for the next message.
	replicas := []*rig{newRig(t, cfg, replicaOptions(t, url)), newRig(t, cfg, replicaOptions(t, url), fetchWait(70*time.Millisecond))}
	post := func(r *rig, seq int) {
		t.Helper()
		if code, body := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":"a","seq":%d}`, seq)); code != http.StatusOK {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	awaitOneDelivers(t, replicas)
	post(replicas[0], 1)
	eventually(t, "a#1 attempted twice", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.attempts["a#1"] >= 2
	})
	const events = 10
	for seq := 2; seq <= events; seq++ {
		post(replicas[seq%2], seq)
		time.Sleep(30 * time.Millisecond) // webhooks that come apart, as a sender's do
	}
	eventually(t, "a#2 to a#10 waiting behind a#1", func() bool {
		waiting := 0
		for _, r := range replicas {
			bs, err := r.store.Blocked("shop", "app")
			if err != nil {
				return false
			}
			waiting += bs.Waiting
		}
		return waiting == events-1
	})
	up.Store(true)
	testkit.Eventually(t, time.Minute, "every event delivered", func() bool { return c.deliveries() == events })
	c.check(t)
}

// When the replica that delivers an ordered destination stops, the other
// takes the destination at once (the lease is given up) and delivers
// the events that waited behind a failing key there, before the events
// that come to it after, in order.
func TestAnOrderedDestinationMovesToTheOtherReplicaWhenItsOwnerStops(t *testing.T) {
	t.Parallel()
	up, c, cfg := aFailsFirstUntilUp(t)
	url := testkit.NATSServer(t)
	replicas := []*rig{newRig(t, cfg, replicaOptions(t, url)), newRig(t, cfg, replicaOptions(t, url))}
	for seq := 1; seq <= 3; seq++ {
		if code, body := replicas[seq%2].post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":"a","seq":%d}`, seq)); code != http.StatusOK {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	var owner, other *rig
	eventually(t, "a#2 and a#3 waiting behind a#1 at one replica", func() bool {
		for i, r := range replicas {
			if bs, err := r.store.Blocked("shop", "app"); err == nil && bs.Waiting == 2 {
				owner, other = r, replicas[1-i]
				return true
			}
		}
		return false
	})
	if bs, err := other.store.Blocked("shop", "app"); err != nil || bs != (store.Blocked{}) {
		t.Fatalf("the other replica holds keys too: %+v, %v", bs, err)
	}
	owner.stop()
	owner.store.Close()
	eventually(t, "the other replica delivers shop/app", func() bool {
		st := other.fwd.Status()
		return len(st) == 1 && st[0].DeliveredBy == "this replica"
	})
	up.Store(true)
	if code, body := other.post("/hooks/shop", nil, []byte(`{"key":"a","seq":4}`)); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	testkit.Eventually(t, time.Minute, "a#1 to a#4 delivered by the other replica", func() bool { return c.deliveries() == 4 })
	c.check(t)
	other.awaitNoKeyBlocked(t)
}

// awaitOneDelivers waits until each replica knows whether it delivers the
// ordered destination shop/app, and checks that exactly one does.
func awaitOneDelivers(t *testing.T, replicas []*rig) {
	t.Helper()
	by := make([]string, len(replicas))
	eventually(t, "every replica knows which delivers shop/app", func() bool {
		for i, r := range replicas {
			for _, s := range r.fwd.Status() {
				if s.Route == "shop" && s.Destination == "app" {
					by[i] = s.DeliveredBy
				}
			}
			if by[i] == "" {
				return false
			}
		}
		return true
	})
	if n := strings.Count(strings.Join(by, ","), "this replica"); n != 1 {
		t.Fatalf("%d replicas deliver shop/app: %q", n, by)
	}
}
