package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

func TestTheEventsPageSearchesAsTheAPIDoesAndResends(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	for _, order := range []string{"1003", "1004", "1005"} {
		r.publish(&store.Envelope{EventID: "evt-" + order, Header: map[string][]string{"X-Github-Event": {"push"}},
			Body: []byte(`{"order":{"id":"` + order + `"}}`)})
	}
	testkit.Eventually(t, 10*time.Second, "the three delivered", func() bool { return r.hits.Load() == 3 })
	c := r.client()
	csrf := r.login(c)
	search := url.Values{"q": {`body.order.id == "1004"`}, "route": {"shop"}, "since": {"24h"}}
	got := r.do(c, http.MethodGet, "/events?"+search.Encode(), nil, nil)
	if got.code != http.StatusOK || !strings.Contains(got.body, `href="/events/evt-1004`) ||
		strings.Count(got.body, `href="/events/evt-`) != 1 {
		t.Fatalf("search for order 1004: %d, want its one event: %s", got.code, got.body)
	}
	for _, want := range []string{`<td data-label="Type" class="type">push</td>`, "Scanned 3 webhooks", `value="body.order.id == &#34;1004&#34;"`} {
		if !strings.Contains(got.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	page := r.do(c, http.MethodGet, "/events?limit=2", nil, nil)
	if strings.Count(page.body, `href="/events/evt-`) != 2 || !strings.Contains(page.body, `id="more" href="/events?cursor=`) {
		t.Fatalf("a page of 2 of every route: %s", page.body)
	}
	bad := r.do(c, http.MethodGet, "/events?q="+url.QueryEscape("body.order =="), nil, nil)
	if bad.code != http.StatusBadRequest || !strings.Contains(bad.body, "does not compile") {
		t.Fatalf("an expression that does not compile: %d, want 400 saying so", bad.code)
	}

	if got := r.do(c, http.MethodPost, "/events/evt-1004/resend", url.Values{"destination": {"app"}}, nil); got.code != http.StatusForbidden {
		t.Fatalf("resend without the CSRF token: %d, want 403", got.code)
	}
	res := r.do(c, http.MethodPost, "/events/evt-1004/resend", url.Values{"csrf": {csrf}, "route": {"shop"}, "destination": {"app"}}, nil)
	if res.code != http.StatusSeeOther || !strings.Contains(res.header.Get("Location"), "resent=app") {
		t.Fatalf("resend: %d to %q", res.code, res.header.Get("Location"))
	}
	testkit.Eventually(t, 10*time.Second, "the backend got order 1004 again", func() bool { return r.hits.Load() == 4 })
	ev := r.do(c, http.MethodGet, res.header.Get("Location"), nil, nil)
	if !strings.Contains(ev.body, `class="notice"`) || !strings.Contains(ev.body, "queued to be delivered again now") {
		t.Fatalf("the event page does not say what the resend did: %s", ev.body)
	}
}

func TestTheEventsPageSaysWhatASearchPassedOver(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	for i := range 3 * 512 {
		r.publish(&store.Envelope{EventID: fmt.Sprintf("evt-%d", i), Body: []byte(fmt.Sprintf(`{"order":{"id":"o-%d"}}`, i))})
	}
	c := r.client()
	r.login(c)
	got := r.do(c, http.MethodGet, "/events?"+url.Values{"q": {`body.order.id == "o-900"`}, "route": {"shop"}}.Encode(), nil, nil)
	if got.code != http.StatusOK || strings.Count(got.body, `href="/events/evt-`) != 1 {
		t.Fatalf("search for order o-900: %d, want its one event: %s", got.code, got.body)
	}
	if !regexp.MustCompile(`Scanned \d+ webhooks \([^)]*\), passed over \d+ unread`).MatchString(got.body) {
		t.Errorf("the page does not say what the search passed over: %s", got.body)
	}
}
