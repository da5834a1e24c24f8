package admin_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// sevenDeadLetters makes five dead letters at audit (422) and two at app
// (410), and returns the time before the first.
func sevenDeadLetters(r *rig) time.Time {
	start := time.Now().Add(-time.Second)
	for i := range 5 {
		r.post(fmt.Sprintf(`{"audit":%d}`, i), map[string]string{"Audit": "422"})
	}
	for i := range 2 {
		r.post(fmt.Sprintf(`{"app":%d}`, i), map[string]string{"App": "410"})
	}
	r.waitDeadLetters(7)
	return start
}

func TestDeadLettersAreFiltered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	start := sevenDeadLetters(r)
	for _, tc := range []struct {
		name  string
		query url.Values
		want  int
	}{
		{"by route", url.Values{"route": {"shop"}}, 7},
		{"by destination", url.Values{"route": {"shop"}, "destination": {"audit"}}, 5},
		{"by another route", url.Values{"route": {"github"}}, 0},
		{"by status", url.Values{"status": {"410"}}, 2},
		{"by status class", url.Values{"status": {"4xx"}}, 7},
		{"by no response", url.Values{"status": {"none"}}, 0},
		{"by reason", url.Values{"reason": {"permanent"}}, 7},
		{"by another reason", url.Values{"reason": {"exhausted"}}, 0},
		{"since a time", url.Values{"since": {start.Format(time.RFC3339Nano)}}, 7},
		{"since a duration ago", url.Values{"since": {"1h"}}, 7},
		{"until before the first", url.Values{"until": {start.Format(time.RFC3339Nano)}}, 0},
		{"by destination and status", url.Values{"route": {"shop"}, "destination": {"app"}, "status": {"422"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := r.deadLetters(tc.query.Encode())
			if len(p.DeadLetters) != tc.want || p.NextCursor != "" {
				t.Errorf("%d dead letters (next %q), want %d", len(p.DeadLetters), p.NextCursor, tc.want)
			}
			var c struct{ Count int }
			r.call(http.MethodGet, "/v1/deadletters/count?"+tc.query.Encode(), nil, &c)
			if c.Count != tc.want {
				t.Errorf("count %d, want %d", c.Count, tc.want)
			}
		})
	}
	for _, bad := range []string{"status=abc", "since=yesterday", "destination=app", "limit=0", "cursor=x", "route=a.b"} {
		if code := r.call(http.MethodGet, "/v1/deadletters?"+bad, nil, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
}

func TestDeadLettersArePagedOldestFirstByCursor(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sevenDeadLetters(r)
	var seen []uint64
	q := url.Values{"limit": {"3"}}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 3 for 7 dead letters")
		}
		p := r.deadLetters(q.Encode())
		for _, d := range p.DeadLetters {
			seen = append(seen, d.Seq)
		}
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
	}
	if len(seen) != 7 {
		t.Fatalf("pages held %v, want 7 dead letters", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("not oldest first, or a dead letter twice: %v", seen)
		}
	}
}

func TestADeadLetterShowsItsRequestAndWhy(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.post("{\"bin\":\"\xff\xfe\"}", map[string]string{"Audit": "422"})
	r.waitDeadLetters(1)
	seq := r.deadLetters("").DeadLetters[0].Seq
	var d admin.DeadLetterDetail
	if code := r.call(http.MethodGet, fmt.Sprintf("/v1/deadletters/%d", seq), nil, &d); code != http.StatusOK {
		t.Fatalf("show: %d", code)
	}
	if d.EventID != id || d.Route != "shop" || d.Destination != "audit" || d.Reason != "permanent" ||
		d.LastStatus != 422 || d.Attempts != 1 || d.Method != "POST" || d.DeadLetteredAt == nil || d.ReceivedAt == nil {
		t.Errorf("dead letter %+v", d)
	}
	if d.Headers["X-Status-Audit"][0] != "422" {
		t.Errorf("headers %v", d.Headers)
	}
	body, err := base64.StdEncoding.DecodeString(d.Body)
	if d.BodyEncoding != "base64" || err != nil || string(body) != "{\"bin\":\"\xff\xfe\"}" {
		t.Errorf("body %q (%s)", d.Body, d.BodyEncoding)
	}
	if code := r.call(http.MethodGet, "/v1/deadletters/999999", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown seq: %d, want 404", code)
	}
	if code := r.call(http.MethodGet, "/v1/deadletters/abc", nil, nil); code != http.StatusBadRequest {
		t.Errorf("bad seq: %d, want 400", code)
	}
}

func TestPurgeRemovesDeadLettersByIDOrFilter(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sevenDeadLetters(r)
	// One of audit's: the two destinations' dead letters interleave.
	first := r.deadLetters("route=shop&destination=audit").DeadLetters[0].Seq
	var out struct{ Purged int }
	if code := r.call(http.MethodDelete, "/v1/deadletters", map[string]any{}, &out); code != http.StatusBadRequest {
		t.Fatalf("a purge naming nothing: %d, want 400", code)
	}
	if r.call(http.MethodDelete, "/v1/deadletters", map[string]any{"seqs": []uint64{first, 999999}}, &out); out.Purged != 1 {
		t.Errorf("by seqs purged %d, want 1", out.Purged)
	}
	if r.call(http.MethodDelete, "/v1/deadletters", map[string]any{"status": "410"}, &out); out.Purged != 2 {
		t.Errorf("by status purged %d, want 2", out.Purged)
	}
	if r.call(http.MethodDelete, "/v1/deadletters", map[string]any{"route": "shop", "destination": "audit"}, &out); out.Purged != 4 {
		t.Errorf("by destination purged %d, want 4", out.Purged)
	}
	if n := len(r.deadLetters("").DeadLetters); n != 0 {
		t.Errorf("%d dead letters left", n)
	}
	r.post(`{"again":1}`, map[string]string{"Audit": "422"})
	r.waitDeadLetters(1)
	if r.call(http.MethodDelete, "/v1/deadletters", map[string]any{"all": true}, &out); out.Purged != 1 {
		t.Errorf("all purged %d, want 1", out.Purged)
	}
}

// A route or destination name becomes a subject token, so a name no
// policy could hold (a newline, a dot, a wildcard) is the caller's
// mistake: 400 with the reason, never a store error.
func TestAFilterNamingNoPossibleRouteIsABadRequest(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}, Token: token})
	t.Cleanup(srv.Close)
	for _, q := range []url.Values{
		{"route": {"a\nb"}},
		{"route": {"a\rb"}},
		{"route": {"a\x00b"}},
		{"route": {"a*"}},
		{"route": {">"}},
		{"route": {"café"}},
		{"route": {"shop"}, "destination": {"a\nb"}},
	} {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/v1/deadletters?" + q.Encode()},
			{http.MethodGet, "/v1/deadletters/count?" + q.Encode()},
		} {
			var e struct{ Error, Message string }
			if code := call(t, srv.URL, token, req.method, req.path, nil, &e); code != http.StatusBadRequest || e.Error != "bad_request" || e.Message == "" {
				t.Errorf("%s %s: %d %+v, want 400 with a reason", req.method, req.path, code, e)
			}
		}
		sel := map[string]any{"route": q.Get("route"), "destination": q.Get("destination")}
		for _, method := range []string{http.MethodPost, http.MethodDelete} {
			path := "/v1/deadletters"
			if method == http.MethodPost {
				path += "/replay"
			}
			var e struct{ Error, Message string }
			if code := call(t, srv.URL, token, method, path, sel, &e); code != http.StatusBadRequest || e.Message == "" {
				t.Errorf("%s %s %v: %d %+v, want 400 with a reason", method, path, sel, code, e)
			}
		}
	}
}

func TestASelectionTravelsAsAQueryStringAndBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sel   admin.Selection
		query string
	}{
		{"nothing selects every dead letter", admin.Selection{}, ""},
		{"a route and a destination", admin.Selection{Route: "shop", Destination: "app"}, "destination=app&route=shop"},
		{"every field of the query, and a cursor",
			admin.Selection{Route: "shop", Destination: "app", Status: "5xx", Reason: "exhausted", Since: "2h", Until: "2026-01-02T15:04:05Z", Cursor: "7"},
			"cursor=7&destination=app&reason=exhausted&route=shop&since=2h&status=5xx&until=2026-01-02T15%3A04%3A05Z"},
		{"values that need escaping", admin.Selection{Route: "a&b=c", Since: "1h 2m"}, "route=a%26b%3Dc&since=1h+2m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sel.Values().Encode(); got != tc.query {
				t.Errorf("Values = %q, want %q", got, tc.query)
			}
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if got := admin.ParseSelection(q); !reflect.DeepEqual(got, tc.sel) {
				t.Errorf("ParseSelection(%q) = %+v, want %+v", tc.query, got, tc.sel)
			}
		})
	}
}
