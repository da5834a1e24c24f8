package store

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// within waits up to 5 s for cond, polling.
func within(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5s: %s", msg)
		}
	}
}

// openEmbedded opens a store on its embedded server, closed when the
// test ends.
func openEmbedded(ctx context.Context, t *testing.T) *Store {
	t.Helper()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A parked webhook's message is acked, so only the parked and due records
// tell the purge near the store's limit which webhooks are still waiting.
func TestParkedRefsFindTheOldestWaitingWebhookOfEachRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openEmbedded(ctx, t)
	due := time.Now().Add(time.Hour)
	for _, p := range []struct {
		route string
		seq   uint64
	}{{"shop", 9}, {"shop", 4}, {"github", 7}} {
		if err := s.Park(ctx, p.route, "app", "evt", Parked{Seq: p.seq, Attempts: 1, FirstSeen: time.Now(), Due: due}); err != nil {
			t.Fatal(err)
		}
	}
	refs, err := s.parkedRefs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if refs["shop"] != 4 || refs["github"] != 7 || len(refs) != 2 {
		t.Errorf("refs %v, want shop 4 and github 7", refs)
	}
}

// The forwarder acks a webhook's message once its parked record is
// stored. From then on the webhook must count as parked: counted only from
// the mover's next look, it was for up to a tick neither pending, in
// flight nor parked (Backlogs), and a wait for a settled store ended while
// it waited for its next attempt.
func TestAParkedWebhookCountsFromItsParking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openEmbedded(ctx, t)
	for seq := range uint64(2) {
		if err := s.Park(ctx, "shop", "app", "evt", Parked{Seq: seq + 1, Attempts: 1, FirstSeen: time.Now(), Due: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// More only if a look of the mover overlapped the parking.
		if n := s.ParkedCount("shop", "app"); n < seq+1 {
			t.Fatalf("right after parking webhook %d: %d parked", seq+1, n)
		}
	}
	within(t, "the mover counts each parked webhook once", func() bool { return s.ParkedCount("shop", "app") == 2 })
}

// A release makes every record its destination parked so far due at once,
// and leaves other destinations' records and later ones to their due time.
func TestAReleaseMakesADestinationsParkedWebhooksDueAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openEmbedded(ctx, t)
	later := time.Now().Add(time.Hour)
	park := func(dest string, seq uint64, due time.Time) {
		t.Helper()
		if err := s.Park(ctx, "shop", dest, "evt", Parked{Seq: seq, Attempts: 3, FirstSeen: time.Now(), Due: due}); err != nil {
			t.Fatal(err)
		}
	}
	for seq := range uint64(5) {
		park("app", seq+1, later.Add(time.Duration(seq)*time.Minute))
	}
	park("crm", 9, later)
	s.Release("shop", "app")
	dues := func() map[string]int {
		out := map[string]int{}
		info, err := s.main.Info(ctx, jetstream.WithSubjectFilter("due.>"))
		if err != nil {
			return nil
		}
		for subj, n := range info.State.Subjects {
			out[subj] = int(n)
		}
		return out
	}
	within(t, "five due records for app", func() bool {
		return dues()[DueSubject("shop", "app")] == 5
	})
	if n := dues()[DueSubject("shop", "crm")]; n != 0 {
		t.Errorf("%d due records for crm, which was not released", n)
	}
	within(t, "app's count of parked webhooks at 0, crm's at 1", func() bool {
		return s.ParkedCount("shop", "app") == 0 && s.ParkedCount("shop", "crm") == 1
	})
	park("app", 7, later) // parked after the release: waits for its due time
	within(t, "the later record counted as parked", func() bool {
		return s.ParkedCount("shop", "app") == 1
	})
	if n := dues()[DueSubject("shop", "app")]; n != 5 {
		t.Errorf("%d due records for app after a later park, want the 5 released", n)
	}
}

// A release reaches every parked record of its destination even when a
// read of them ends before the server answers, as nats.go ends a
// FetchNoWait a second after asking: here a proxy holds back the server's
// first delivery for longer than that, as a stalled server or process
// would. Taking the empty read for the end left the records in their
// slots until their own due time, an hour here, with the destination back.
func TestAReleaseMovesEveryRecordWhenAReadEndsBeforeTheServerAnswers(t *testing.T) {
	t.Parallel()
	ctx, s, px := storeBehindProxy(t)
	const parked = 3
	for seq := range uint64(parked) {
		if err := s.Park(ctx, "shop", "app", "evt", Parked{Seq: seq + 1, Attempts: 3, FirstSeen: time.Now(), Due: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "the records counted as parked", func() bool { return s.ParkedCount("shop", "app") == parked })
	px.HoldNext(1500 * time.Millisecond)
	s.Release("shop", "app")
	within(t, "every parked record due, none left parked", func() bool {
		info, err := s.main.Info(ctx, jetstream.WithSubjectFilter(DueSubject("shop", "app")))
		return err == nil && info.State.Msgs == parked && s.ParkedCount("shop", "app") == 0
	})
	if !px.Held() {
		t.Error("the proxy held back no delivery: the read was not cut short")
	}
}
