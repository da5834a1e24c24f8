package alert_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/alert"
	"github.com/jethook/jethook/internal/testkit"
)

// sink is a chat webhook that records each notice and when it came.
type sink struct {
	*httptest.Server
	mu      sync.Mutex
	texts   []string
	at      []time.Time
	replyOK bool
}

func newSink(t *testing.T) *sink {
	s := &sink{replyOK: true}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct{ Text string }
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &n); err != nil || r.Method != http.MethodPost {
			t.Errorf("%s %q is not a JSON notice", r.Method, body)
		}
		s.mu.Lock()
		s.texts, s.at = append(s.texts, n.Text), append(s.at, time.Now())
		ok := s.replyOK
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.texts...)
}

func (s *sink) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d notices, want %d: %q", len(s.all()), n, s.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s.all()
}

func start(t *testing.T, n *alert.Notifier) *alert.Notifier {
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

func TestABurstOfDeadLettersIsOneNoticeWithTheCount(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	const batch = 300 * time.Millisecond
	n := start(t, &alert.Notifier{URL: s.URL, Batch: batch})
	first := time.Now()
	for i := range 20 {
		dest := "app"
		if i%4 == 0 {
			dest = "crm"
		}
		n.DeadLettered("shop", dest, fmt.Sprintf("evt_%d", i), "permanent")
	}
	texts := s.waitFor(t, 1)
	s.mu.Lock()
	took := s.at[0].Sub(first)
	s.mu.Unlock()
	// Not before the window ends, so that the burst is one notice; how
	// soon after depends on the machine (waitFor bounds it).
	if took < batch {
		t.Errorf("the notice came %s after the first dead letter, before the batch window (%s) ended", took, batch)
	}
	// Nothing is left to tell: no second notice can come.
	if dead, notes := n.Pending(); dead != 0 || notes != 0 {
		t.Fatalf("%d dead letters and %d lines still pending after the notice", dead, notes)
	}
	if len(s.all()) != 1 {
		t.Fatalf("%d notices for one burst, want 1: %q", len(s.all()), s.all())
	}
	for _, want := range []string{"20 events dead-lettered", "shop → app: 15 dead letters (permanent), e.g. evt_1, evt_2, evt_3",
		"shop → crm: 5 dead letters (permanent), e.g. evt_0, evt_4, evt_8"} {
		if !strings.Contains(texts[0], want) {
			t.Errorf("notice %q does not say %q", texts[0], want)
		}
	}
}

func TestNoticesPastTheHourlyLimitAreCarriedNotDropped(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	n := start(t, &alert.Notifier{URL: s.URL, Batch: 50 * time.Millisecond, MaxPerHour: 1, Now: clock})

	n.DeadLettered("shop", "app", "evt_1", "exhausted")
	advance(time.Second)
	s.waitFor(t, 1)
	n.DeadLettered("shop", "app", "evt_2", "exhausted")
	n.DeadLettered("shop", "app", "evt_3", "exhausted")
	advance(time.Second)
	testkit.Eventually(t, 5*time.Second, "the hourly limit holding the second notice", func() bool { return n.Held() > 0 })
	if got := len(s.all()); got != 1 {
		t.Fatalf("%d notices within the hour, want 1 (max_per_hour)", got)
	}
	if dead, _ := n.Pending(); dead != 2 {
		t.Fatalf("%d dead letters held, want 2", dead)
	}
	advance(time.Hour)
	texts := s.waitFor(t, 2)
	if !strings.Contains(texts[1], "2 events dead-lettered") || !strings.Contains(texts[1], "evt_2, evt_3") {
		t.Errorf("the held notice says %q, want both held dead letters", texts[1])
	}
}

func TestABreakerThatOpensStaysOpenAndClosesIsTold(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	n := start(t, &alert.Notifier{URL: s.URL, Batch: 50 * time.Millisecond, Remind: 150 * time.Millisecond})
	n.Breaker("shop", "app", false)
	n.Breaker("shop", "app", true)
	n.Breaker("shop", "app", true) // still open after a failed probe: no new line
	texts := s.waitFor(t, 1)
	if !strings.Contains(texts[0], "breaker opened: shop → app") || strings.Count(texts[0], "breaker") != 2 {
		t.Errorf("first notice %q, want one breaker-opened line", texts[0])
	}
	texts = s.waitFor(t, 2)
	if !strings.Contains(texts[1], "breaker still open: shop → app") {
		t.Errorf("reminder %q, want breaker still open", texts[1])
	}
	n.Breaker("shop", "app", false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		texts = s.all()
		if strings.Contains(texts[len(texts)-1], "breaker closed: shop → app") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no breaker-closed notice: %q", texts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAFailedPostLogsNeitherTheURLNorThePayload(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	s.replyOK = false
	var logs testkit.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	secretURL := s.URL + "/services/T000/B000/s3cr3t"
	n := start(t, &alert.Notifier{URL: secretURL, Batch: 20 * time.Millisecond, Logger: log})
	n.DeadLettered("shop", "app", "evt_1", "permanent")
	s.waitFor(t, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := logs.String()
		if strings.Contains(out, "alert not sent") {
			if strings.Contains(out, "s3cr3t") {
				t.Errorf("log %q holds the alert URL", out)
			}
			if !strings.Contains(out, "403") {
				t.Errorf("log %q does not say what the URL answered", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a failed post was not logged")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWithoutAnAlertsBlockNothingIsSent(t *testing.T) {
	t.Parallel()
	var nilNotifier *alert.Notifier
	nilNotifier.Start()
	nilNotifier.DeadLettered("shop", "app", "evt_1", "permanent")
	nilNotifier.Reload(nil)
	nilNotifier.Stop()

	var logged bytes.Buffer
	n := start(t, alert.New(nil, slog.New(slog.NewTextHandler(&logged, nil))))
	n.DeadLettered("shop", "app", "evt_1", "permanent")
	n.Breaker("shop", "app", true)
	n.Stop()
	if n.URL != "" || logged.Len() != 0 {
		t.Errorf("a Notifier without an alerts block has URL %q and logged %q", n.URL, logged.String())
	}
	if got := alert.New(&alert.Config{URL: "https://chat.example/hook", Batch: time.Minute, MaxPerHour: 30}, nil); got.URL == "" {
		t.Errorf("New with an alerts block = %+v", got)
	}
}

// A reload's alerts block takes effect at once: a block after none starts
// the notices, a new URL gets the next one, and no block stops them and
// drops what was pending.
func TestAReloadedAlertsBlockTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	first, second := newSink(t), newSink(t)
	n := start(t, alert.New(nil, nil))
	n.DeadLettered("shop", "app", "evt_before", "permanent") // no block yet: not told

	n.Reload(&alert.Config{URL: first.URL, Batch: 50 * time.Millisecond, MaxPerHour: 30})
	n.DeadLettered("shop", "app", "evt_1", "permanent")
	if texts := first.waitFor(t, 1); !strings.Contains(texts[0], "1 event dead-lettered") || strings.Contains(texts[0], "evt_before") {
		t.Errorf("first notice %q, want evt_1 alone", texts[0])
	}

	n.Reload(&alert.Config{URL: second.URL, Batch: 50 * time.Millisecond, MaxPerHour: 30})
	n.Breaker("shop", "crm", true)
	if texts := second.waitFor(t, 1); !strings.Contains(texts[0], "breaker opened: shop → crm") {
		t.Errorf("notice at the new URL %q, want the breaker", texts[0])
	}

	n.Reload(&alert.Config{URL: second.URL, Batch: time.Hour, MaxPerHour: 30})
	n.DeadLettered("shop", "app", "evt_dropped", "permanent")
	n.Reload(nil) // the pending dead letter goes with the block
	n.DeadLettered("shop", "app", "evt_after", "permanent")
	n.Stop() // posts what is pending: nothing
	if len(first.all()) != 1 || len(second.all()) != 1 {
		t.Errorf("notices after the block was removed: %q and %q", first.all(), second.all())
	}
}

func TestAStoreThatRefusesWritesOrRunsShortOfRoomIsTold(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	n := start(t, &alert.Notifier{URL: s.URL, Batch: 50 * time.Millisecond, Remind: time.Hour})
	const gib = 1 << 30
	n.Store("", "", 15*gib, 20*gib)
	n.Store("", "", 1*gib, 20*gib) // 5 % left
	n.Store("", "", gib/2, 20*gib) // still short: no new line
	texts := s.waitFor(t, 1)
	if !strings.HasPrefix(texts[0], "jethook: store\n") || !strings.Contains(texts[0], "store short of room: 1.0 GiB left of 20.0 GiB (5 %)") ||
		strings.Count(texts[0], "•") != 1 {
		t.Errorf("first notice %q, want one short-of-room line", texts[0])
	}

	n.Store("disk_full", "1.0 MiB free on /data, below the 32.0 MiB floor", 0, 20*gib)
	n.Store("disk_full", "0 B free on /data, below the 32.0 MiB floor", 0, 20*gib)
	texts = s.waitFor(t, 2)
	if !strings.Contains(texts[1], "store refusing writes (disk_full): 1.0 MiB free on /data") || strings.Count(texts[1], "•") != 1 {
		t.Errorf("second notice %q, want one refusing line with the reason and its detail", texts[1])
	}

	n.Store("", "", 10*gib, 20*gib)
	texts = s.waitFor(t, 3)
	for _, want := range []string{"store takes writes again after", "(was disk_full)", "store has room again: 10.0 GiB left of 20.0 GiB (50 %)"} {
		if !strings.Contains(texts[2], want) {
			t.Errorf("third notice %q does not say %q", texts[2], want)
		}
	}
}

func TestAStoreThatKeepsRefusingWritesIsRemindedOf(t *testing.T) {
	t.Parallel()
	s := newSink(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	n := start(t, &alert.Notifier{URL: s.URL, Batch: 20 * time.Millisecond, Remind: 15 * time.Minute, Now: clock})
	n.Store("write_error", "the store failed to write", 0, 0)
	mu.Lock()
	now = now.Add(16 * time.Minute)
	mu.Unlock()
	n.Store("write_error", "the store failed to write", 0, 0)
	deadline := time.Now().Add(5 * time.Second)
	for all := ""; !strings.Contains(all, "store still refusing writes after 16m0s (write_error)"); all = strings.Join(s.all(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("notices %q, want a reminder", s.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(s.all()[0], "store refusing writes (write_error): the store failed to write") {
		t.Errorf("first notice %q, want the refusal", s.all()[0])
	}
}
