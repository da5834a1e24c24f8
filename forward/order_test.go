package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// orderedRetry is fastRetry with ordering on body.key and attempts enough
// that random failures dead-letter nothing. The breaker and the learned
// limit are off: these tests are about order, and a slow start after the
// random failures opened the breaker would only slow them down.
func orderedRetry(t *testing.T, order string) string {
	cfg := edit(t, fastRetry, "max_attempts: 6", "max_attempts: 30")
	return edit(t, cfg, `url: "${BACKEND}/hook"}`, `url: "${BACKEND}/hook", concurrency: 16, breaker: {failures: 0}, slow_start: 0s, order: `+order+`}`)
}

// orderChecker is a backend that checks, from {"key": k, "seq": n} bodies,
// that each key's events arrive one at a time and in order. An attempt of
// an event whose key has a later event delivered, or that overlaps
// another attempt of its key, is an inversion; a second delivery of an
// event (allowed: delivery is at least once) is not.
type orderChecker struct {
	fail func(key string, seq int) int // the status to answer, 200 to accept

	mu         sync.Mutex
	inflight   map[string]bool
	delivered  map[string]int // key → highest seq delivered
	count      int            // first deliveries, in any order
	inversions []string
	overlaps   int
	at         map[string]time.Time // key#seq → when first delivered
	tried      map[string]time.Time // key#seq → when first attempted
	attempts   map[string]int       // key#seq → attempts
}

func newOrderChecker(t *testing.T, fail func(key string, seq int) int) (*orderChecker, *httptest.Server) {
	c := &orderChecker{fail: fail, inflight: map[string]bool{}, delivered: map[string]int{}, at: map[string]time.Time{}, tried: map[string]time.Time{}, attempts: map[string]int{}}
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Key string `json:"key"`
			Seq int    `json:"seq"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(c.attempt(ev.Key, ev.Seq))
	}))
	t.Cleanup(b.Close)
	return c, b
}

func (c *orderChecker) attempt(key string, seq int) int {
	c.mu.Lock()
	if c.inflight[key] {
		c.overlaps++
	}
	c.inflight[key] = true
	c.attempts[fmt.Sprintf("%s#%d", key, seq)]++
	if _, ok := c.tried[fmt.Sprintf("%s#%d", key, seq)]; !ok {
		c.tried[fmt.Sprintf("%s#%d", key, seq)] = time.Now()
	}
	if last := c.delivered[key]; seq < last {
		c.inversions = append(c.inversions, fmt.Sprintf("%s: %d attempted after %d was delivered", key, seq, last))
	}
	c.mu.Unlock()
	code := c.fail(key, seq)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight[key] = false
	if id := fmt.Sprintf("%s#%d", key, seq); code == http.StatusOK && c.at[id].IsZero() {
		c.delivered[key] = max(c.delivered[key], seq)
		c.count++
		c.at[id] = time.Now()
	}
	return code
}

func (c *orderChecker) deliveries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

func (c *orderChecker) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inversions) > 0 {
		t.Errorf("%d inversions, the first: %s", len(c.inversions), c.inversions[0])
	}
	if c.overlaps > 0 {
		t.Errorf("%d attempts overlapped another of their key", c.overlaps)
	}
}

// postKeyed posts events seq 1..perKey of each key, interleaved across
// keys, each key's in order.
func postKeyed(r *rig, keys []string, perKey int) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for seq := 1; seq <= perKey; seq++ {
				for i := w; i < len(keys); i += 4 {
					if code, body := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":%q,"seq":%d}`, keys[i], seq)); code != http.StatusOK {
						r.t.Errorf("post: %d %s", code, body)
					}
				}
			}
		})
	}
	wg.Wait()
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%d", i)
	}
	return out
}

func TestEventsOfAKeyArriveOneAtATimeInOrderDespiteRandomFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	c, b := newOrderChecker(t, func(string, int) int {
		mu.Lock()
		defer mu.Unlock()
		if rnd.IntN(5) == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	r := newRig(t, parseConfig(t, orderedRetry(t, `{key: 'body.key'}`), b.URL), store.Options{})
	ks := keys(100)
	postKeyed(r, ks, 10)
	testkit.Eventually(t, time.Minute, "every event delivered", func() bool { return c.deliveries() == len(ks)*10 })
	c.check(t)
	if dls := r.deadLetters(); len(dls) > 0 {
		t.Errorf("%d dead letters, the first %s: %s", len(dls), dls[0].Reason, dls[0].LastError)
	}
	// Nothing is left on disk once every key is delivered.
	r.awaitNoKeyBlocked(t)
}

func TestAFailingHeadHoldsOnlyItsKeyUntilMaxBlocked(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if key == "bad" && seq == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := edit(t, orderedRetry(t, `{key: 'body.key', max_blocked: 10s}`), "max_attempts: 30", "max_attempts: 1000")
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{})
	for seq := 1; seq <= 3; seq++ {
		r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":"bad","seq":%d}`, seq))
	}
	postKeyed(r, keys(50), 4)
	testkit.Eventually(t, 30*time.Second, "the other keys delivered", func() bool { return c.deliveries() == 200 })
	if dls := r.deadLetters(); len(dls) > 0 {
		t.Fatalf("the other keys were delivered only after bad#1 was dead-lettered")
	}
	bs, err := r.store.Blocked("shop", "app")
	if err != nil {
		t.Fatal(err)
	}
	if bs.Keys != 1 || bs.Waiting != 2 || bs.Oldest.IsZero() {
		t.Errorf("blocked %+v, want 1 key with 2 events waiting", bs)
	}
	c.mu.Lock()
	if c.delivered["bad"] != 0 {
		t.Errorf("bad#%d delivered while bad#1 holds the key", c.delivered["bad"])
	}
	c.mu.Unlock()
	// max_blocked runs from bad#1's first failure, which may come after
	// the other keys were delivered.
	testkit.Eventually(t, 30*time.Second, "bad#2 and bad#3 delivered after bad#1 is dead-lettered", func() bool { return c.deliveries() == 202 })
	c.check(t)
	dls := r.deadLetters()
	if len(dls) != 1 || dls[0].Reason != "max_blocked" || dls[0].OrderKey != "bad" {
		t.Fatalf("dead letters %+v, want bad#1 for max_blocked", dls)
	}
	if held := c.at["bad#2"].Sub(c.tried["bad#1"]); held < 10*time.Second {
		t.Errorf("bad#2 delivered %v after bad#1 first failed, before max_blocked", held)
	}
}

// A head whose message is deleted from the stream while it waits for its
// next attempt never comes back; after max_blocked its key goes on.
func TestAKeyWhoseHeadWasDeletedFromTheStreamGoesOnAfterMaxBlocked(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if seq == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := edit(t, orderedRetry(t, `{key: 'body.key', max_blocked: 3s}`), "max_attempts: 30", "max_attempts: 1000")
	addr := testkit.FreeAddr(t)
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{ClientListen: addr})
	_, answer := r.post("/hooks/shop", nil, []byte(`{"key":"lost","seq":1}`))
	r.post("/hooks/shop", nil, []byte(`{"key":"lost","seq":2}`))
	var ack struct{ ID string }
	if err := json.Unmarshal([]byte(answer), &ack); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, seq, err := r.store.Event(ctx, ack.ID, "shop")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "lost#1 failing, lost#2 waiting behind it", func() bool {
		bs, err := r.store.Blocked("shop", "app")
		return err == nil && bs.Keys == 1 && bs.Waiting == 1
	})
	js := newCrafted(t, addr).js // a NATS client of the rig's store
	st, err := js.Stream(ctx, store.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "lost#2 delivered", func() bool { return c.deliveries() == 1 })
	c.check(t)
	if dls := r.deadLetters(); len(dls) > 0 {
		t.Errorf("%d dead letters, want none (lost#1 is gone, and lost#2 was delivered): %s", len(dls), dls[0].Reason)
	}
	r.awaitNoKeyBlocked(t)
}

func TestAPermanentFailureOfTheHeadLetsTheNextEventGo(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if seq == 2 {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	})
	r := newRig(t, parseConfig(t, orderedRetry(t, `{key: 'body.key'}`), b.URL), store.Options{})
	postKeyed(r, keys(10), 4)
	eventually(t, "3 of each key's 4 delivered", func() bool { return c.deliveries() == 30 })
	c.check(t)
	eventually(t, "10 dead letters", func() bool { return len(r.deadLetters()) == 10 })
	for _, dl := range r.deadLetters() {
		if dl.Reason != "permanent" || dl.OrderKey == "" {
			t.Errorf("dead letter %s for %s, key %q", dl.Envelope.EventID, dl.Reason, dl.OrderKey)
		}
	}
}

func TestAnEventWithoutAKeyIsDeliveredUnordered(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, orderedRetry(t, `{key: 'body.key'}`), b.URL), store.Options{})
	r.post("/hooks/shop", nil, []byte(`{"seq":1}`))
	r.post("/hooks/shop", nil, []byte(`{"key":"","seq":2}`))
	r.post("/hooks/shop", nil, []byte(`not json`))
	eventually(t, "3 deliveries", func() bool { return b.count() == 3 })
}

func TestAReloadThatTakesOrderAwayReleasesTheEventsWaitingBehindTheirKey(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if seq == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := edit(t, orderedRetry(t, `{key: 'body.key'}`), "max_attempts: 30", "max_attempts: 1000")
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{})
	postKeyed(r, []string{"a"}, 3)
	eventually(t, "a#2 and a#3 waiting behind a#1", func() bool {
		bs, err := r.store.Blocked("shop", "app")
		return err == nil && bs.Waiting == 2
	})
	unordered := edit(t, cfg, ", order: {key: 'body.key'}", "")
	if err := r.fwd.Reload(context.Background(), parseConfig(t, unordered, b.URL)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a#2 and a#3 delivered while a#1 keeps failing", func() bool { return c.deliveries() == 2 })
	if bs, err := r.store.Blocked("shop", "app"); err != nil || bs != (store.Blocked{}) {
		t.Errorf("blocked %+v (%v) after ordering was taken away", bs, err)
	}
}

// A head parked for its next attempt whose parked record is lost (the
// parked stream's max age passed, or an operator purged it) would never
// be attempted again and would hold its key for good: the sweep finds it
// carried by nothing and attempts it again, and the key goes on in order.
func TestAKeyWhoseHeadLostItsParkedRecordGoesOn(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	headAttempts := 0
	c, b := newOrderChecker(t, func(key string, seq int) int {
		mu.Lock()
		defer mu.Unlock()
		if seq == 1 {
			if headAttempts++; headAttempts == 1 {
				return http.StatusServiceUnavailable
			}
		}
		return http.StatusOK
	})
	// The head's next attempt is an hour away, moved up to max_blocked
	// (4s) after its failure: it waits parked.
	cfg := edit(t, orderedRetry(t, `{key: 'body.key', max_blocked: 4s}`), "base: 20ms, multiplier: 2, max_delay: 200ms", "base: 1h, multiplier: 2, max_delay: 1h")
	cfg = edit(t, cfg, "max_age: 1h", "max_age: 5h")
	addr := testkit.FreeAddr(t)
	logs := &testkit.LogBuffer{}
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{ClientListen: addr}, parkAfter(100*time.Millisecond),
		func(o *app.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	r.post("/hooks/shop", nil, []byte(`{"key":"lost","seq":1}`))
	r.post("/hooks/shop", nil, []byte(`{"key":"lost","seq":2}`))

	js := newCrafted(t, addr).js // a NATS client of the rig's store
	ctx := context.Background()
	parked, err := js.Stream(ctx, store.ParkedStreamName)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "lost#1 parked after its failed attempt, lost#2 waiting behind it", func() bool {
		info, err := parked.Info(ctx)
		bs, berr := r.store.Blocked("shop", "app")
		return err == nil && info.State.Msgs == 1 && berr == nil && bs.Keys == 1 && bs.Waiting == 1
	})
	if err := parked.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "lost#1, then lost#2 delivered", func() bool { return c.deliveries() == 2 })
	c.check(t)
	mu.Lock()
	if headAttempts != 2 {
		t.Errorf("lost#1 attempted %d times, want 2", headAttempts)
	}
	mu.Unlock()
	if !strings.Contains(logs.String(), "reason=head_lost") {
		t.Errorf("no head_lost in the log:\n%s", logs)
	}
	if dls := r.deadLetters(); len(dls) > 0 {
		t.Errorf("%d dead letters, want none: %s", len(dls), dls[0].Reason)
	}
	r.awaitNoKeyBlocked(t)
}

// heldHead is an ordered destination whose backend holds k#1's first
// attempt, with k#2 queued behind it, and a copy of the head parked while
// that attempt is held.
type heldHead struct {
	r        *rig
	b        *backend
	logs     *testkit.LogBuffer
	webhooks jetstream.Stream
	cons     jetstream.Consumer
	release  func() // the held attempt answers 500; at cleanup too
}

// holdAHead starts it: a failed attempt's retry waits retry (parked), the
// backend answers every other request 200, and once k#1's first attempt
// is held, a record of k#1 with attempts made so far, due now, is parked
// as a copy of the head would be.
func holdAHead(t *testing.T, retry string, attempts int) *heldHead {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := &heldHead{logs: &testkit.LogBuffer{}, release: func() { once.Do(func() { close(release) }) }}
	h.b = newBackend(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			close(held)
			<-release
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	t.Cleanup(h.release) // before the backend closes: it waits for its handlers
	// The attempt held in the backend must not time out.
	cfg := edit(t, orderedRetry(t, `{key: 'body.key', max_blocked: 1h}`), "base: 20ms, multiplier: 2, max_delay: 200ms", "base: "+retry+", multiplier: 2, max_delay: "+retry)
	cfg = edit(t, cfg, "timeout: 2s", "timeout: 1m")
	addr := testkit.FreeAddr(t)
	h.r = newRig(t, parseConfig(t, cfg, h.b.URL), store.Options{ClientListen: addr}, parkAfter(100*time.Millisecond),
		func(o *app.Options) { o.Logger = slog.New(slog.NewTextHandler(h.logs, nil)) })
	h.r.post("/hooks/shop", nil, []byte(`{"key":"k","seq":1}`))
	h.r.post("/hooks/shop", nil, []byte(`{"key":"k","seq":2}`))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("k#1 not attempted")
	}

	js := newCrafted(t, addr).js // a NATS client of the rig's store
	ctx := context.Background()
	var err error
	if h.webhooks, err = js.Stream(ctx, store.StreamName); err != nil {
		t.Fatal(err)
	}
	if h.cons, err = js.Consumer(ctx, store.StreamName, store.ConsumerName("shop", "app")); err != nil {
		t.Fatal(err)
	}
	head, err := h.webhooks.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(store.Subject("shop")))
	if err != nil {
		t.Fatal(err)
	}
	p := store.Parked{Seq: head.Sequence, Attempts: attempts, FirstSeen: head.Time, Due: time.Now(), Key: store.KeyOf("k"), Ordered: true}
	if err := h.r.store.Park(ctx, "shop", "app", head.Header.Get("Jethook-Event-Id"), p); err != nil {
		t.Fatal(err)
	}
	return h
}

// seen is what the backend saw: each body, and its attempt number.
func (h *heldHead) seen() []string {
	var out []string
	for _, x := range h.b.all() {
		out = append(out, fmt.Sprintf("%s attempt %s", x.body, x.header.Get("X-Webhook-Attempt")))
	}
	return out
}

// A copy of a key's head that arrives while the head's attempt is in
// progress is given back, never dropped: the attempt may end trusting it.
// Here the copy is a due record made from a parked record with the id the
// attempt parks under (as a second copy of the head, numbered alike after
// a restart, would have parked): the attempt's own park is then a
// duplicate, and the copy is all that carries the event.
func TestACopyOfAHeadThatArrivesDuringItsAttemptIsNotDropped(t *testing.T) {
	t.Parallel()
	h := holdAHead(t, "300ms", 1)
	ctx := context.Background()
	eventually(t, "the copy sent to jethook while k#1's attempt is in progress, and settled or given back", func() bool {
		due, err := h.webhooks.GetLastMsgForSubject(ctx, store.DueSubject("shop", "app"))
		if err != nil {
			return false
		}
		info, err := h.cons.Info(ctx)
		return err == nil && info.Delivered.Stream >= due.Sequence &&
			(info.NumAckPending == 1 || strings.Contains(h.logs.String(), "came while its attempt is in progress"))
	})
	h.release()
	testkit.Eventually(t, 30*time.Second, "k#1, then k#2 delivered", func() bool { return h.b.count() >= 3 })
	want := []string{`{"key":"k","seq":1} attempt 1`, `{"key":"k","seq":1} attempt 2`, `{"key":"k","seq":2} attempt 1`}
	if got := h.seen(); !slices.Equal(got, want) {
		t.Errorf("the backend saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if dls := h.r.deadLetters(); len(dls) > 0 {
		t.Errorf("%d dead letters, want none: %s", len(dls), dls[0].Reason)
	}
	h.r.awaitNoKeyBlocked(t)
}

// A copy of a key's head given back during the head's attempt that an
// attempt made since has overtaken (here a release due record published
// twice: the head's attempt 1 parked it again meanwhile) is settled when
// it comes back, not attempted as a second line: the backend sees the
// head's attempts numbered 1, then 2.
func TestAnOvertakenCopyOfAHeadIsNotAttemptedAgain(t *testing.T) {
	t.Parallel()
	// Attempt 1's retry is parked for 10 s, so the copy (back after 5 s)
	// comes first.
	h := holdAHead(t, "10s", 0)
	eventually(t, "the copy given back during k#1's attempt", func() bool {
		return strings.Contains(h.logs.String(), "came while its attempt is in progress")
	})
	h.release()
	testkit.Eventually(t, 60*time.Second, "k#1, then k#2 delivered", func() bool { return h.b.count() >= 3 })
	want := []string{`{"key":"k","seq":1} attempt 1`, `{"key":"k","seq":1} attempt 2`, `{"key":"k","seq":2} attempt 1`}
	if got := h.seen(); !slices.Equal(got, want) {
		t.Errorf("the backend saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(h.logs.String(), "overtaken by a later attempt") {
		t.Errorf("the stale copy's settling is not logged:\n%s", h.logs)
	}
	h.r.awaitNoKeyBlocked(t)
}

// An event that is away when a later event of its key takes the key (a
// fetch that ended held it, or dropped it and the server sent it again
// after its ack wait) and comes back while that one is head was never
// settled: it is not dropped, but goes next, after the head.
func TestAnEventThatComesBackAfterALaterOneOfItsKeyTookTheKeyIsDelivered(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if seq == 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := edit(t, orderedRetry(t, `{key: 'body.key', max_blocked: 2s}`), "max_attempts: 30", "max_attempts: 1000")
	addr := testkit.FreeAddr(t)
	logs := &testkit.LogBuffer{}
	r := newRig(t, parseConfig(t, cfg, b.URL), store.Options{ClientListen: addr},
		func(o *app.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	js := newCrafted(t, addr).js // a NATS client of the rig's store
	ctx := context.Background()
	cons, err := js.Consumer(ctx, store.StreamName, store.ConsumerName("shop", "app"))
	if err != nil {
		t.Fatal(err)
	}
	// jethook stops fetching; another fetch (here the test's) takes a#1.
	if err := r.fwd.Pause("shop", "app"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "jethook's fetches ended", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting == 0
	})
	r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":1}`))
	if _, err := js.ResumeConsumer(ctx, store.StreamName, store.ConsumerName("shop", "app")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	away, ok := <-batch.Messages()
	if !ok {
		t.Fatalf("a#1 not fetched: %v", batch.Error())
	}
	// a#2 takes the key and keeps failing; then a#1 comes back.
	r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":2}`))
	if err := r.fwd.Resume("shop", "app"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a#2 attempted as its key's head", func() bool {
		// a#1 stays away however long this takes on a loaded machine:
		// its ack wait running out would bring it back too early.
		_ = away.InProgress()
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.tried["a#2"].IsZero()
	})
	if err := away.Nak(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "a#1 delivered", func() bool { return c.deliveries() == 1 })
	c.mu.Lock()
	if c.tried["a#1"].Before(c.tried["a#2"]) {
		t.Errorf("a#1 attempted before a#2 took the key: the test did not make a#1 come back late")
	}
	c.mu.Unlock()
	if !strings.Contains(logs.String(), "came back after a later event of its key took the key") {
		t.Errorf("a#1's coming back is not logged:\n%s", logs)
	}
	if dls := r.deadLetters(); len(dls) != 1 || dls[0].Reason != "max_blocked" {
		t.Errorf("dead letters %+v, want a#2 for max_blocked", dls)
	}
	r.awaitNoKeyBlocked(t)
}

// awaitNoKeyBlocked waits until the shop route's app destination has no
// key blocked and no event waiting behind one.
func (r *rig) awaitNoKeyBlocked(t *testing.T) {
	t.Helper()
	eventually(t, "no key blocked or waiting", func() bool {
		bs, err := r.store.Blocked("shop", "app")
		return err == nil && bs == store.Blocked{}
	})
}

// aFailsFirstUntilUp is the backend and config of the waiting-record
// tests: an ordered destination, retried every 300 ms, whose backend fails
// the first event of key "a" until up is set, so that the key's later
// events wait behind it.
func aFailsFirstUntilUp(t *testing.T) (up *atomic.Bool, c *orderChecker, cfg *policy.Config) {
	up = new(atomic.Bool)
	c, b := newOrderChecker(t, func(key string, seq int) int {
		if key == "a" && seq == 1 && !up.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	yaml := edit(t, orderedRetry(t, `{key: 'body.key'}`), "max_attempts: 30", "max_attempts: 1000")
	yaml = edit(t, yaml, "base: 20ms", "base: 300ms")
	yaml = edit(t, yaml, "max_delay: 200ms", "max_delay: 300ms")
	return up, c, parseConfig(t, yaml, b.URL)
}

// An index made anew (lost with the disk of a pod, or deleted by hand)
// does not know the events queued behind a failing head, whose messages
// are acked: their waiting records bring them back to their key, in
// order, after the head.
func TestEventsWaitingBehindTheirKeyOutliveTheLossOfTheIndex(t *testing.T) {
	t.Parallel()
	up, c, pc := aFailsFirstUntilUp(t)
	dir := t.TempDir()
	opts := store.Options{DataDir: dir, WaitingEvery: time.Second}
	r := newRig(t, pc, opts)
	for seq := 1; seq <= 3; seq++ {
		if code, body := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":"a","seq":%d}`, seq)); code != http.StatusOK {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	eventually(t, "a#2 and a#3 waiting behind a#1", func() bool {
		bs, err := r.store.Blocked("shop", "app")
		return err == nil && bs.Waiting == 2
	})
	r.stop()
	r.store.Close()
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	up.Store(true)
	logs := &testkit.LogBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("jethook's log after the index was lost:\n%s", logs)
		}
	})
	r = newRig(t, pc, opts, func(o *app.Options) { o.Logger = opts.Logger })
	testkit.Eventually(t, time.Minute, "a#1, a#2 and a#3 delivered", func() bool { return c.deliveries() == 3 })
	c.check(t)
	r.awaitNoKeyBlocked(t)
	if !strings.Contains(logs.String(), `msg="the events that waited behind their ordering keys go back behind them here, in the order they were stored" route=shop destination=app events=2`) {
		t.Errorf("the log does not say that a#2 and a#3 were taken back:\n%s", logs)
	}
}

// While an event waits behind its key, its waiting record is renewed
// rather than bringing it to an attempt; once the event is delivered, the
// records still parked come due and are dropped: each event is attempted
// once, in order.
func TestWaitingRecordsAreRenewedAndThenDroppedWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	up, c, pc := aFailsFirstUntilUp(t)
	addr := testkit.FreeAddr(t)
	r := newRig(t, pc, store.Options{ClientListen: addr, WaitingEvery: 500 * time.Millisecond})
	for seq := 1; seq <= 3; seq++ {
		if code, body := r.post("/hooks/shop", nil, fmt.Appendf(nil, `{"key":"a","seq":%d}`, seq)); code != http.StatusOK {
			t.Fatalf("post: %d %s", code, body)
		}
	}
	ctx := context.Background()
	parked, err := newCrafted(t, addr).js.Stream(ctx, store.ParkedStreamName)
	if err != nil {
		t.Fatal(err)
	}
	// Two records, then each renewed at least twice.
	testkit.Eventually(t, 30*time.Second, "the waiting records of a#2 and a#3 renewed twice", func() bool {
		info, err := parked.Info(ctx)
		return err == nil && info.State.LastSeq >= 6
	})
	if n := c.deliveries(); n != 0 {
		t.Fatalf("%d events delivered while a#1 fails", n)
	}
	up.Store(true)
	testkit.Eventually(t, 30*time.Second, "a#1, a#2 and a#3 delivered", func() bool { return c.deliveries() == 3 })
	testkit.Eventually(t, 30*time.Second, "no waiting record left", func() bool {
		info, err := parked.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
	storetest.Settled(t, r.store)
	c.check(t)
	c.mu.Lock()
	for _, id := range []string{"a#2", "a#3"} {
		if n := c.attempts[id]; n != 1 {
			t.Errorf("%s attempted %d times, want once", id, n)
		}
	}
	c.mu.Unlock()
	r.awaitNoKeyBlocked(t)
}

// A delivered head passes its key on and its message is acked in the
// background, once the change is on disk: when the events of a key are
// all delivered, nothing of the key is left, neither a head on disk nor a
// message pending in the consumer.
func TestADeliveredHeadsKeyIsPassedOnAndItsMessageAcked(t *testing.T) {
	t.Parallel()
	c, b := newOrderChecker(t, func(string, int) int { return http.StatusOK })
	addr := testkit.FreeAddr(t)
	r := newRig(t, parseConfig(t, orderedRetry(t, `{key: 'body.key'}`), b.URL), store.Options{ClientListen: addr})
	js := newCrafted(t, addr).js
	ks := keys(4)
	postKeyed(r, ks, 5)
	testkit.Eventually(t, 30*time.Second, "every event delivered", func() bool { return c.deliveries() == len(ks)*5 })
	c.check(t)
	ctx := context.Background()
	cons, err := js.Consumer(ctx, store.StreamName, store.ConsumerName("shop", "app"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "every message acked", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
	eventually(t, "no key with a head left", func() bool {
		heads, _, err := r.store.OldHeads("shop", "app", store.OrderKey{}, time.Now().Add(time.Hour), 10)
		return err == nil && len(heads) == 0
	})
}

// A key's head is kept in memory during its first attempt; when that
// attempt is cut short (jethook stops) its message goes back to its
// consumer, and the head goes to the index, where the sweep of lost heads
// and the status reads find it.
func TestAHeadWhoseAttemptIsCutShortKeepsItsKeyInTheIndex(t *testing.T) {
	t.Parallel()
	attempted, release := make(chan struct{}, 1), make(chan struct{})
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case attempted <- struct{}{}:
		default:
		}
		select { // until jethook gives up on it, or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(b.Close)
	t.Cleanup(func() { close(release) })
	yaml := edit(t, orderedRetry(t, `{key: 'body.key'}`), "timeout: 2s", "timeout: 1m")
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{DataDir: t.TempDir()})
	if code, body := r.post("/hooks/shop", nil, []byte(`{"key":"a","seq":1}`)); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	select {
	case <-attempted:
	case <-time.After(30 * time.Second):
		t.Fatal("after 30s: a#1 not attempted")
	}
	r.stop() // cuts the attempt short after a second
	heads, _, err := r.store.OldHeads("shop", "app", store.OrderKey{}, time.Now().Add(time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 1 || heads[0].Key != store.KeyOf("a") {
		t.Errorf("heads in the index: %+v, want a's", heads)
	}
}
