package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// orderBackend checks, from {"key": k, "seq": n} bodies, that each key's
// events are delivered in the order they were posted. It fails a random
// fifth of the attempts with a 500. An inversion is the first delivery of
// an event after a later event of its key was delivered; a second
// delivery of an event (a kill between the backend's 200 and jethook's
// ack) is a duplicate, allowed.
type orderBackend struct {
	mu         sync.Mutex
	rnd        *rand.Rand
	delivered  map[string]map[int]bool
	highest    map[string]int
	first      int
	duplicates int
	inversions []string
	inverted   []string            // the keys of inversions, in order
	history    map[string][]string // each key's attempts, for a failure to show
}

func newOrderBackend(t *testing.T) (*orderBackend, *httptest.Server) {
	b := &orderBackend{rnd: rand.New(rand.NewPCG(3, 4)), delivered: map[string]map[int]bool{}, highest: map[string]int{}, history: map[string][]string{}}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Key string `json:"key"`
			Seq int    `json:"seq"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		attempt := fmt.Sprintf("%s #%d id=%s", time.Now().Format("15:04:05.000000"), ev.Seq, r.Header.Get("X-Webhook-Id"))
		if b.rnd.IntN(5) == 0 {
			b.history[ev.Key] = append(b.history[ev.Key], attempt+" 500")
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		b.history[ev.Key] = append(b.history[ev.Key], attempt+" 200")
		seen := b.delivered[ev.Key]
		if seen == nil {
			seen = map[int]bool{}
			b.delivered[ev.Key] = seen
		}
		switch {
		case seen[ev.Seq]:
			b.duplicates++
		case ev.Seq < b.highest[ev.Key]:
			b.inversions = append(b.inversions, fmt.Sprintf("%s#%d after %s#%d", ev.Key, ev.Seq, ev.Key, b.highest[ev.Key]))
			b.inverted = append(b.inverted, ev.Key)
			fallthrough
		default:
			seen[ev.Seq] = true
			b.first++
			b.highest[ev.Key] = max(b.highest[ev.Key], ev.Seq)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return b, s
}

// missing says which of events 1..perKey of keys keys were not delivered,
// and what the backend saw of the first one's key, which it also returns.
func (b *orderBackend) missing(keys, perKey int) (string, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var gone []string
	first := ""
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		for seq := 1; seq <= perKey; seq++ {
			if !b.delivered[key][seq] {
				gone = append(gone, fmt.Sprintf("%s#%d", key, seq))
				first = cmp.Or(first, key)
			}
		}
	}
	if first == "" {
		return "none missing", nil
	}
	history := slices.Clone(b.history[first])
	return fmt.Sprintf("missing %s; the attempts of %s:\n%s", strings.Join(gone, " "), first, strings.Join(history, "\n")), history
}

func (b *orderBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first
}

// postOrdered posts events 1..perKey of each of keys keys, one worker per
// few keys, each key's in order: the next only once jethook acknowledged
// the one before (a post cut by a kill is posted again; a copy already
// stored is answered as a duplicate and keeps its place).
func postOrdered(ctx context.Context, url string, keys, perKey int, acked func()) error {
	const workers = 8
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for seq := 1; seq <= perKey; seq++ {
				for k := w; k < keys; k += workers {
					if err := postEvent(ctx, url, fmt.Sprintf("k%d", k), seq); err != nil {
						errs <- err
						return
					}
					acked()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// postEvent posts event seq of key until jethook acknowledges it.
func postEvent(ctx context.Context, url, key string, seq int) error {
	body := fmt.Appendf(nil, `{"key":%q,"seq":%d}`, key, seq)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// orderedPosting is postOrdered running in the background while a test
// kills processes under it, as posting is postAll; done gets its result.
type orderedPosting struct {
	done chan error

	mu    sync.Mutex
	acked int
}

func postOrderedInBackground(ctx context.Context, url string, keys, perKey int) *orderedPosting {
	p := &orderedPosting{done: make(chan error, 1)}
	go func() {
		p.done <- postOrdered(ctx, url, keys, perKey, func() { p.mu.Lock(); p.acked++; p.mu.Unlock() })
	}()
	return p
}

// reached waits until jethook has acknowledged at least acked events, or
// posting has ended (no more acks will come).
func (p *orderedPosting) reached(acked int) {
	for {
		p.mu.Lock()
		n := p.acked
		p.mu.Unlock()
		if n >= acked || len(p.done) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKillNineNeverReordersAKey is the kill -9 loop on a destination with
// ordering: events of 100 keys, posted interleaved, each key's in order,
// against a backend that fails a fifth of the attempts at random, while
// jethook is killed four times. Every event must be delivered, and no
// event of a key after a later one.
func TestKillNineNeverReordersAKey(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop: skipped with -short")
	}
	const keys, perKey, kills = 100, 10, 4
	be, srv := newOrderBackend(t)
	jh := newProcess(t, orderedPolicies(srv.URL), nil)
	jh.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	posting := postOrderedInBackground(ctx, jh.url("/hooks/crash"), keys, perKey)
	var lastKill time.Time
	for k := range kills {
		posting.reached((k + 1) * keys * perKey / (kills + 1))
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		jh.kill()
		lastKill = time.Now()
		jh.start()
	}
	if err := <-posting.done; err != nil {
		t.Fatalf("posting: %v", err)
	}
	allIn, twice := be.awaitInOrder(t, jh, keys, perKey, lastKill)
	t.Logf("%d events of %d keys, %d kills: all delivered %s after the last kill; %d delivered twice",
		keys*perKey, keys, kills, allIn.Round(time.Millisecond), twice)
}

// TestKillNineOfTheReplicaThatDeliversNeverReordersAKey: two replicas
// share a NATS server and an ordered destination, which one of them
// delivers. It is killed while events of 50 keys are posted, each key's
// in order, against a backend that fails a fifth of the attempts: the
// other replica takes the destination over and delivers every event, none
// after a later one of its key.
func TestKillNineOfTheReplicaThatDeliversNeverReordersAKey(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 of a replica: skipped with -short")
	}
	t.Parallel()
	const keys, perKey = 50, 10
	be, owner, other := orderedReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	posting := postOrderedInBackground(ctx, other.url("/hooks/crash"), keys, perKey)
	posting.reached(keys * perKey / 3)
	owner.kill()
	killed := time.Now()
	if err := <-posting.done; err != nil {
		t.Fatalf("posting: %v", err)
	}
	allIn, twice := be.awaitInOrder(t, other, keys, perKey, killed)
	t.Logf("%d events of %d keys, the replica that delivered them killed: all delivered %s after the kill, by the other; %d delivered twice",
		keys*perKey, keys, allIn.Round(time.Millisecond), twice)
}

// orderedReplicas starts two replicas sharing a NATS server and an
// ordered destination delivering to a new order backend, and returns the
// backend, the replica that delivers the destination and the other one.
func orderedReplicas(t *testing.T) (be *orderBackend, owner, other *process) {
	t.Helper()
	be, srv := newOrderBackend(t)
	env := map[string]string{"JETHOOK_NATS_URL": testkit.NATSServer(t), "JETHOOK_WAITING_EVERY": "2s"}
	replicas := []*process{newProcess(t, orderedPolicies(srv.URL), env), newProcess(t, orderedPolicies(srv.URL), env)}
	for _, p := range replicas {
		p.start()
	}
	owner, other = deliverer(t, replicas)
	return be, owner, other
}

// TestAFrozenReplicaThatDeliversNeverReordersAKey: the replica that
// delivers an ordered destination is frozen (SIGSTOP) for longer than a
// fetch waits, while the first events of a few keys are posted to the
// other; then it is thawed and their second events are posted. The server
// sends the first events to the frozen replica's open fetch, which nats.go
// ends on its own clock as the replica thaws, dropping what it had not
// handed over: those come back only after their ack wait. No second event
// may go first. A freeze is what a stall of the process (a pause, a
// starved CPU) looks like to NATS; the ordering must outlast it.
func TestAFrozenReplicaThatDeliversNeverReordersAKey(t *testing.T) {
	if testing.Short() {
		t.Skip("frozen replica: skipped with -short")
	}
	t.Parallel()
	const rounds, keysPerRound = 5, 5
	be, owner, other := orderedReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	post := func(k0, seq int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, keysPerRound)
		for k := k0; k < k0+keysPerRound; k++ {
			wg.Go(func() { errs <- postEvent(ctx, other.url("/hooks/crash"), fmt.Sprintf("k%d", k), seq) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("posting: %v", err)
			}
		}
	}
	// The freeze outlasts the fetch's wait (2 s) and nats.go's second
	// after it, but not the lease (6 s with JETHOOK_WAITING_EVERY=2s).
	const freeze = 4 * time.Second
	for r := range rounds {
		k0 := r * keysPerRound
		owner.signal(syscall.SIGSTOP)
		frozen := time.Now()
		post(k0, 1)
		time.Sleep(time.Until(frozen.Add(freeze)))
		owner.signal(syscall.SIGCONT)
		post(k0, 2)
		be.awaitCount(t, owner, 2*(k0+keysPerRound), time.Minute)
	}
	_, twice := be.awaitInOrder(t, owner, rounds*keysPerRound, 2, time.Now())
	t.Logf("%d keys, the replica that delivered them frozen for %s %d times: all delivered, %d twice",
		rounds*keysPerRound, freeze, rounds, twice)
}

// awaitCount waits until n events are delivered, p staying alive.
func (b *orderBackend) awaitCount(t *testing.T, p *process, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for b.count() < n {
		p.checkAlive()
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered after %s", b.count(), n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deliverer waits until each replica says whether it delivers crash/app,
// and returns the one that does and another.
func deliverer(t *testing.T, replicas []*process) (owner, other *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		owner, other = nil, nil
		for _, p := range replicas {
			var st struct {
				Destinations []struct {
					DeliveredBy string `json:"delivered_by"`
				} `json:"destinations"`
			}
			if code := p.adminJSON(t, http.MethodGet, "/v1/status", &st); code != http.StatusOK || len(st.Destinations) != 1 {
				continue
			}
			switch st.Destinations[0].DeliveredBy {
			case "this replica":
				if owner != nil {
					t.Fatal("two replicas deliver crash/app")
				}
				owner = p
			case "another replica":
				other = p
			}
		}
		if owner != nil && other != nil {
			return owner, other
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica says it delivers crash/app after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orderedPolicies is the kill tests' configuration (policies) with the
// destination ordered by the body's key.
func orderedPolicies(backendURL string) string {
	return policies(backendURL, "{backoff: exponential, base: 50ms, multiplier: 2, max_delay: 500ms, jitter: full, max_attempts: 1000, max_age: 1h}") +
		"        order: {key: 'body.key'}\n"
}

// awaitInOrder waits until the events posted (1..perKey of each of keys
// keys) are delivered, p's jethook
// staying alive meanwhile, and its destination crash/app has nothing left
// to attempt; it fails the test if an event of a key came after a later
// one. It returns how long after since the last event came, and how many
// were delivered twice.
func (b *orderBackend) awaitInOrder(t *testing.T, p *process, keys, perKey int, since time.Time) (allIn time.Duration, twice int) {
	t.Helper()
	n := keys * perKey
	deadline := time.Now().Add(2 * time.Minute)
	for b.count() < n {
		p.checkAlive()
		if time.Now().After(deadline) {
			missing, history := b.missing(keys, perKey)
			explain(t, p, history)
			t.Fatalf("%d of %d events delivered two minutes after posting ended; %s", b.count(), n, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	allIn = time.Since(since)
	p.awaitSettled(t, "crash", "app", time.Minute)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.inversions) > 0 {
		k := b.inverted[0]
		t.Errorf("%d inversions, the first: %s; the attempts of %s:\n%s",
			len(b.inversions), b.inversions[0], k, strings.Join(b.history[k], "\n"))
		explain(t, p, b.history[k])
	}
	return allIn, b.duplicates
}

// explain logs, for each event the attempts of a key's history (as the
// backend records them) name, what the admin API says of it and the
// lines of p's log that name it: what a failed test leaves to read.
func explain(t *testing.T, p *process, history []string) {
	t.Helper()
	log, _ := os.ReadFile(p.LogPath)
	logged := map[string]bool{}
	for _, a := range history {
		id := a[strings.Index(a, "id=")+3 : strings.LastIndexByte(a, ' ')]
		if logged[id] {
			continue
		}
		logged[id] = true
		var ev json.RawMessage
		p.adminJSON(t, http.MethodGet, "/v1/events/"+url.PathEscape(id), &ev)
		t.Logf("event %s: %s", id, ev)
		var lines []string
		n := 0
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, id) {
				if n++; len(lines) < 40 {
					lines = append(lines, strings.TrimRight(line, "\n"))
				}
			}
		}
		t.Logf("jethook's log on %s, %d lines (the first 40 at most):\n%s", id, n, strings.Join(lines, "\n"))
	}
}
