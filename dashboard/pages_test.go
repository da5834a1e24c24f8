package dashboard_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// evil is markup an attacker can put in an event id, a header and a body.
const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>`

func TestPayloadsHeadersAndIdsAreShownAsText(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	id := `"><img/src/onerror=alert(3)>?a=1#b`
	seq := r.deadLetter(&store.Envelope{EventID: id, Host: "h", RemoteAddr: "192.0.2.1:1",
		Header: map[string][]string{"X-Evil": {evil}, "Content-Type": {"text/html"}}, Body: []byte(evil)})
	c := r.client()
	r.login(c)
	for _, path := range []string{
		fmt.Sprintf("/deadletters/%d", seq),
		"/deadletters",
		"/events/" + url.PathEscape(id),
		"/events?route=shop",
	} {
		got := r.do(c, http.MethodGet, path, nil, nil)
		if got.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, got.code, got.body)
		}
		for _, raw := range []string{"<script>alert", "<img src=x", "<img/src", `"><img`} {
			if strings.Contains(got.body, raw) {
				t.Errorf("GET %s: the page holds %q unescaped", path, raw)
			}
		}
		if !strings.Contains(got.body, "&lt;img/src/onerror=alert(3)&gt;?a=1#b") {
			t.Errorf("GET %s: the event id is not shown as text", path)
		}
		if csp := got.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if got.header.Get("X-Frame-Options") != "DENY" || got.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", path, got.header)
		}
	}
	// The list links to the event's page, whatever its id holds.
	link := regexp.MustCompile(`href="(/events/[^"]+)"`).FindStringSubmatch(r.do(c, http.MethodGet, "/events?route=shop", nil, nil).body)
	if link == nil {
		t.Fatal("no link to the event")
	}
	if got := r.do(c, http.MethodGet, html.UnescapeString(link[1]), nil, nil); got.code != http.StatusOK || !strings.Contains(got.body, "Event <span") {
		t.Fatalf("the event's link %s: %d", link[1], got.code)
	}
	page := r.do(c, http.MethodGet, fmt.Sprintf("/deadletters/%d", seq), nil, nil).body
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "X-Evil", "<dt>Last status</dt><dd>400</dd>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the dead letter page lacks %q", want)
		}
	}
	if strings.Contains(page, "backend-credential") {
		t.Error("the dead letter page shows the destination URL's query")
	}
	if over := r.do(c, http.MethodGet, "/", nil, nil).body; strings.Contains(over, "backend-credential") || !strings.Contains(over, "/hook") {
		t.Error("the overview must show the destination without its query string")
	}
}

// After a replay the dashboard goes back to the page the form came from:
// only a path on this site, whatever the form says.
func TestAReplayGoesBackOnlyToAPageOfTheDashboard(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	seq := r.deadLetter(&store.Envelope{EventID: "evt-back", Body: []byte(`{}`)})
	c := r.client()
	csrf := r.login(c)
	for _, back := range []string{"/\t/evil.example", "//evil.example", "/%zz", "https://evil.example/"} {
		got := r.do(c, http.MethodPost, "/deadletters/replay", url.Values{"csrf": {csrf}, "seq": {fmt.Sprint(seq)}, "back": {back}}, nil)
		if loc := got.header.Get("Location"); got.code != http.StatusSeeOther || !strings.HasPrefix(loc, "/?") {
			t.Errorf("replay with back %q: %d to %q, want 303 to the overview", back, got.code, loc)
		}
	}
}

func TestADeadLetterIsReplayedFromItsPageAndThenPurged(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	seq := r.deadLetter(&store.Envelope{EventID: "evt-1", Body: []byte(`{"order":1}`)})
	c := r.client()
	csrf := r.login(c)
	page := r.do(c, http.MethodGet, fmt.Sprintf("/deadletters/%d", seq), nil, nil)
	if !strings.Contains(page.body, "&#34;order&#34;: 1") {
		t.Fatalf("the JSON body is not shown indented: %s", page.body)
	}
	r.status.Store(http.StatusOK)
	hits := r.hits.Load()
	back := fmt.Sprintf("/deadletters/%d", seq)
	got := r.do(c, http.MethodPost, "/deadletters/replay", url.Values{"csrf": {csrf}, "seq": {fmt.Sprint(seq)}, "back": {back}}, nil)
	if got.code != http.StatusSeeOther || got.header.Get("Location") != back+"?missing=0&queued=1&skipped=0" {
		t.Fatalf("replay: %d to %q", got.code, got.header.Get("Location"))
	}
	testkit.Eventually(t, 10*time.Second, "the replay is delivered", func() bool { return r.hits.Load() > hits })
	after := r.do(c, http.MethodGet, got.header.Get("Location"), nil, nil).body
	if !strings.Contains(after, "Queued 1 for replay.") || !strings.Contains(after, "replayed") {
		t.Errorf("the page after the replay does not say so")
	}
	testkit.Eventually(t, 10*time.Second, "the event page shows it delivered", func() bool {
		return strings.Contains(r.do(c, http.MethodGet, "/events/evt-1", nil, nil).body, `class="badge ok">delivered`)
	})

	// Purge asks first, then deletes.
	ask := r.do(c, http.MethodPost, "/deadletters/purge", url.Values{"csrf": {csrf}, "seq": {fmt.Sprint(seq)}}, nil)
	if ask.code != http.StatusOK || !strings.Contains(ask.body, "Purge <strong>1</strong> dead letter") {
		t.Fatalf("purge without confirm: %d, want a question", ask.code)
	}
	if _, err := r.store.DeadLetter(t.Context(), seq); err != nil {
		t.Fatalf("the question alone purged it: %v", err)
	}
	done := r.do(c, http.MethodPost, "/deadletters/purge", url.Values{"csrf": {csrf}, "seq": {fmt.Sprint(seq)}, "confirm": {"1"}}, nil)
	if done.code != http.StatusSeeOther || !strings.Contains(done.header.Get("Location"), "purged=1") {
		t.Fatalf("purge: %d to %q", done.code, done.header.Get("Location"))
	}
	if got := r.do(c, http.MethodGet, fmt.Sprintf("/deadletters/%d", seq), nil, nil); got.code != http.StatusNotFound {
		t.Fatalf("a purged dead letter: %d, want 404", got.code)
	}
}

func TestReplayingAllMatchingGoesPageByPageForTheScript(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	for i := range 3 {
		r.deadLetter(&store.Envelope{EventID: fmt.Sprintf("evt-%d", i), Body: []byte("x")})
	}
	c := r.client()
	csrf := r.login(c)
	list := r.do(c, http.MethodGet, "/deadletters?route=shop&reason=permanent", nil, nil)
	if !strings.Contains(list.body, "3 match") || !strings.Contains(list.body, `data-count="3"`) {
		t.Fatalf("the list does not count 3: %s", list.body)
	}
	r.status.Store(http.StatusOK)
	got := r.do(c, http.MethodPost, "/deadletters/replay", url.Values{"matching": {"1"}, "route": {"shop"}, "reason": {"permanent"}},
		map[string]string{"Accept": "application/json", "X-CSRF-Token": csrf})
	if got.code != http.StatusOK || !strings.Contains(got.body, `"queued":3`) {
		t.Fatalf("replay matching: %d %s", got.code, got.body)
	}
	bad := r.do(c, http.MethodGet, "/deadletters?status=abc", nil, nil)
	if bad.code != http.StatusBadRequest || !strings.Contains(bad.body, "want a status") {
		t.Fatalf("a bad filter: %d, want 400 with the reason", bad.code)
	}
	ev := r.do(c, http.MethodGet, "/events?route=shop", nil, nil)
	if ev.code != http.StatusOK || strings.Count(ev.body, `href="/events/evt-`) != 3 {
		t.Fatalf("recent events: %d, want the 3 events listed: %s", ev.code, ev.body)
	}
}

func TestTheOverviewRefreshesEveryFiveSecondsAndSaysWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	r.login(c)
	if got := r.do(c, http.MethodGet, "/", nil, nil); !strings.Contains(got.body, `data-refresh="5000"`) {
		t.Fatalf("the overview does not ask the script to refresh every 5000 ms")
	}
	r.fwd.Stop(time.Second)
	r.store.Close()
	for _, path := range []string{"/", "/deadletters", "/events?route=shop"} {
		got := r.do(c, http.MethodGet, path, nil, nil)
		if got.code != http.StatusServiceUnavailable || !strings.Contains(got.body, "store is unavailable") {
			t.Errorf("GET %s with the store closed: %d, want 503 saying so", path, got.code)
		}
	}
}
