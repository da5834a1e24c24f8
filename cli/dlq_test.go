package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jethook/jethook/internal/testkit"
)

// deadLetters makes n dead letters at audit (422) and returns their ids.
func (r *opsRig) deadLetters(n int) []string {
	r.t.Helper()
	var ids []string
	for i := range n {
		_, id := r.post("/hooks/shop", fmt.Sprintf(`{"d":%d}`, i), map[string]string{"audit": "422"})
		ids = append(ids, id)
	}
	eventually(r.t, fmt.Sprintf("%d dead letters", n), func() bool { return r.deadLetterCount() == n })
	return ids
}

func TestDLQListShowsATableAndTheNextPage(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	ids := r.deadLetters(3)
	out, err := r.run(dlq, "ls", "-route", "shop", "-destination", "audit", "-limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SEQ") || !strings.HasPrefix(lines[3], "more: jethook dlq ls -cursor 3") {
		t.Fatalf("want a header, two rows and the next page:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "1" || f[1] != "shop" || f[2] != "audit" || !slices.Contains(ids, f[3]) || f[4] != "permanent" || f[5] != "422" {
		t.Errorf("first row: %s", lines[1])
	}
	out, err = r.run(dlq, "ls", "-status", "5xx")
	if err != nil || strings.TrimSpace(out) != "no dead letters" {
		t.Errorf("a filter matching nothing: %v %q", err, out)
	}
	out, err = r.run(dlq, "ls", "-json")
	var page struct {
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.DeadLetters) != 3 {
		t.Errorf("-json: %v\n%s", err, out)
	}
	if _, err := r.run(dlq, "ls", "-status", "teapot"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a bad filter: %v", err)
	}
}

func TestDLQShowPrintsWhyAndTheRequest(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	ids := r.deadLetters(1)
	out, err := r.run(dlq, "show", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dead letter 1", "event:         " + ids[0], "route:         shop -> audit",
		"reason:        permanent, last status 422", "attempts:      1", "X-Status-Audit: 422",
		"request:       POST http://hooks.example.com/hooks/shop\n", "body:\n{\"d\":0}"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := r.run(dlq, "show"); !errors.Is(err, errUsage) {
		t.Errorf("show without a seq: %v", err)
	}
}

func TestDLQReplayPrintsProgressAndReplaysOnlyOnce(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	ids := r.deadLetters(5)
	out, err := r.run(dlq, "replay", "-route", "shop", "-destination", "audit", "-page", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replayed 2/5\n", "replayed 4/5\n", "replayed 5/5\n", "queued 5, skipped 0 already replayed\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, id := range ids {
		eventually(t, "the replay reached audit", func() bool { return r.count("/audit", id) == 2 })
		if n := r.count("/app", id); n != 1 {
			t.Errorf("app got %s %d times, want once", id, n)
		}
	}
	out, err = r.run(dlq, "replay", "-seq", "1,2")
	if err != nil || !strings.Contains(out, "queued 0, skipped 2 already replayed") {
		t.Errorf("replaying again: %v\n%s", err, out)
	}
	if _, err := r.run(dlq, "replay", "-seq", "1", "-route", "shop"); !errors.Is(err, errUsage) {
		t.Errorf("-seq with a filter: %v", err)
	}
}

// The production webhook on a laptop: audit's dead letters replayed to a
// pull destination added since, which a listener delivers to a local app.
func TestDLQReplayToAPullDestinationReachesItsListener(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	ids := r.deadLetters(3)
	r.write(opsConfig + `      - {name: laptop, pull: {token: "` + laptopToken + `"}}` + "\n")
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	l := newLocal(t, nil)
	var terminal testkit.LogBuffer
	listen(t, r.ingress.URL, l.URL+"/webhooks", &terminal)

	out, err := r.run(dlq, "replay", "-route", "shop", "-destination", "audit", "-to", "laptop")
	if err != nil || !strings.Contains(out, "queued 3 to laptop, skipped 0 already replayed") {
		t.Fatalf("replay to laptop: %v\n%s", err, out)
	}
	eventually(t, "the listener delivered the 3 replays", func() bool { return l.delivered() == 3 })
	l.mu.Lock()
	for i, req := range l.got {
		if want := fmt.Sprintf(`{"d":%d}`, slices.Index(ids, req.Header.Get("X-Webhook-Id"))); string(l.bodies[i]) != want ||
			req.Header.Get("X-Status-Audit") != "422" || req.Header.Get("X-Webhook-Attempt") != "1" {
			t.Errorf("the local app got %v %q, want the stored webhook %s with its headers", req.Header, l.bodies[i], want)
		}
	}
	l.mu.Unlock()
	// The listener prints each line once the app has answered it.
	eventually(t, "a line for each delivery", func() bool { return strings.Count(terminal.String(), " → 200 in ") == 3 })
	// Audit's dead letters stay as they were: not replayed to audit.
	for _, id := range ids {
		if n := r.count("/audit", id); n != 1 {
			t.Errorf("audit got %s %d times, want once", id, n)
		}
	}
	if show, err := r.run(dlq, "show", "1"); err != nil || strings.Contains(show, "replayed:") {
		t.Errorf("audit's dead letter shows a replay: %v\n%s", err, show)
	}
	out, err = r.run(dlq, "replay", "-seq", "1,2", "-to", "laptop")
	if err != nil || !strings.Contains(out, "queued 0 to laptop, skipped 2 already replayed") {
		t.Errorf("replaying to laptop again: %v\n%s", err, out)
	}
	// To run one again on the laptop, resend it there.
	if out, err := r.run(events, "resend", ids[0], "-destination", "laptop"); err != nil {
		t.Fatalf("resend to laptop: %v\n%s", err, out)
	}
	eventually(t, "the listener delivered the resent webhook", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.ok[ids[0]] == 2
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-seq", "1", "-to", "nope"}, `dead letter 1 is of route "shop", which has no destination "nope" to replay to`},
		{[]string{"-route", "shop", "-to", "laptop"}, "give route and destination too"},
		{[]string{"-route", "shop", "-destination", "audit", "-to", "nope"}, `route "shop" has no destination "nope"`},
	} {
		if _, err := r.run(dlq, append([]string{"replay"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("replay %v: %v, want %q", c.args, err, c.want)
		}
	}
	// A replay to laptop leaves the dead letter to be replayed to audit.
	if out, err := r.run(dlq, "replay", "-seq", "1"); err != nil || !strings.Contains(out, "queued 1, skipped 0") {
		t.Errorf("replaying to audit after laptop: %v\n%s", err, out)
	}
	eventually(t, "audit got the replay", func() bool {
		n := 0
		for _, id := range ids {
			n += r.count("/audit", id)
		}
		return n == len(ids)+1
	})
}

func TestDLQPurgeNeedsASelectionAndSaysHowManyWent(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	r.deadLetters(3)
	if _, err := r.run(dlq, "purge"); !errors.Is(err, errUsage) {
		t.Errorf("purge naming nothing: %v", err)
	}
	out, err := r.run(dlq, "purge", "-seq", "1")
	if err != nil || out != "purged 1 dead letters\n" {
		t.Errorf("by seq: %v %q", err, out)
	}
	out, err = r.run(dlq, "purge", "-all")
	if err != nil || out != "purged 2 dead letters\n" {
		t.Errorf("all: %v %q", err, out)
	}
}
