package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jethook/jethook/admin"
)

// search runs GET /v1/events?query page by page to the end and returns
// the event ids found, in order.
func (r *rig) search(query string) []string {
	r.t.Helper()
	var ids []string
	q, _ := url.ParseQuery(query)
	for page := 0; ; page++ {
		if page > 50 {
			r.t.Fatal("paging does not end")
		}
		var p admin.SearchPage
		if code := r.call(http.MethodGet, "/v1/events?"+q.Encode(), nil, &p); code != http.StatusOK {
			r.t.Fatalf("search %q: %d", query, code)
		}
		for _, e := range p.Events {
			ids = append(ids, e.EventID)
		}
		if p.NextCursor == "" {
			return ids
		}
		q.Set("cursor", p.NextCursor)
	}
}

func TestSearchFindsEventsByWhatTheySayByTypeAndByState(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.audit.failWith(http.StatusUnprocessableEntity) // every event is dead-lettered at audit
	var ids []string
	for i := range 12 {
		typ := "order.created"
		if i%3 == 0 {
			typ = "order.paid"
		}
		ids = append(ids, r.post(fmt.Sprintf(`{"type":%q,"order":{"id":"%d"}}`, typ, 1000+i), nil))
	}
	r.waitDeadLetters(12)

	t.Run("an expression over the body finds the one order", func(t *testing.T) {
		got := r.search(`route=shop&q=body.order.id == "1004"`)
		if !slices.Equal(got, []string{ids[4]}) {
			t.Fatalf("found %v, want %v", got, ids[4])
		}
	})
	t.Run("newest first by default, oldest first when asked, page by page", func(t *testing.T) {
		want := slices.Clone(ids)
		slices.Reverse(want)
		if got := r.search("limit=5"); !slices.Equal(got, want) {
			t.Fatalf("newest first: %v\nwant %v", got, want)
		}
		if got := r.search("limit=5&order=oldest"); !slices.Equal(got, ids) {
			t.Fatalf("oldest first: %v\nwant %v", got, ids)
		}
	})
	t.Run("by the type the body names", func(t *testing.T) {
		got := r.search("type=order.paid&order=oldest")
		if !slices.Equal(got, []string{ids[0], ids[3], ids[6], ids[9]}) {
			t.Fatalf("order.paid: %v", got)
		}
		if got := r.search("type=order.*"); len(got) != 12 {
			t.Fatalf("order.*: %d events, want 12", len(got))
		}
	})
	t.Run("by state at a destination", func(t *testing.T) {
		if got := r.search("route=shop&destination=audit&state=dead_lettered"); len(got) != 12 {
			t.Fatalf("dead-lettered at audit: %d, want 12", len(got))
		}
		if got := r.search("route=shop&destination=audit&state=delivered"); len(got) != 0 {
			t.Fatalf("delivered at audit: %v, want none", got)
		}
		eventually(t, "app delivered them all", func() bool { return len(r.search("route=shop&destination=app&state=delivered")) == 12 })
	})
	t.Run("each event says its type and its state per destination", func(t *testing.T) {
		var p admin.SearchPage
		r.call(http.MethodGet, "/v1/events?limit=1&order=oldest", nil, &p)
		if len(p.Events) != 1 {
			t.Fatalf("page %+v", p)
		}
		e := p.Events[0]
		if e.Type != "order.paid" || e.Route != "shop" || len(e.Destinations) != 2 ||
			e.Destinations[0] != (admin.DestinationState{Destination: "app", State: "delivered"}) ||
			e.Destinations[1] != (admin.DestinationState{Destination: "audit", State: "dead_lettered"}) {
			t.Fatalf("event %+v", e)
		}
		if p.Scanned < 1 || p.Bytes == 0 || p.Reached == nil || p.NextCursor == "" || p.Stopped != "limit" {
			t.Fatalf("progress %+v", p.SearchEnd)
		}
	})
	t.Run("a streamed search sends each event, then its end", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, r.admin.URL+"/v1/events?q="+url.QueryEscape(`body.type == "order.paid"`), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("content type %q", ct)
		}
		var events, ends int
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var l struct {
				Event *admin.EventSummary
				End   *admin.SearchEnd
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			switch {
			case l.Event != nil:
				events++
			case l.End != nil:
				ends++
				if l.End.Scanned != 12 || l.End.NextCursor != "" {
					t.Fatalf("end %+v", l.End)
				}
			}
		}
		if events != 4 || ends != 1 {
			t.Fatalf("%d events and %d end lines, want 4 and 1", events, ends)
		}
	})
	t.Run("a page ends at its byte bound with a cursor", func(t *testing.T) {
		var p admin.SearchPage
		r.call(http.MethodGet, "/v1/events?max_bytes=1&order=oldest", nil, &p)
		if p.Stopped != "max_bytes" || p.NextCursor == "" || p.Scanned != 1 {
			t.Fatalf("page %+v", p.SearchEnd)
		}
	})
}

func TestSearchSaysWhatIsWrongWithARequest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, c := range []struct{ query, says string }{
		{"q=" + url.QueryEscape("body.order.id =="), "expression does not compile"},
		{"q=" + url.QueryEscape("body.order"), "boolean"},
		{"q=" + url.QueryEscape(strings.Repeat("a", 5000)), "at most 4096"},
		{"state=lost", "want one of delivered"},
		{"destination=app", "needs a route"},
		{"route=shop&destination=nowhere", "no destination"},
		{"since=yesterday", "since"},
		{"since=1h&until=2h", "until must be after since"},
		{"order=random", "newest or oldest"},
		{"limit=0", "limit"},
		{"max_bytes=-1", "max_bytes"},
		{"cursor=abc", "cursor"},
		{"route=a.b", "not a route name"},
	} {
		var e struct{ Error, Message string }
		if code := r.call(http.MethodGet, "/v1/events?"+c.query, nil, &e); code != http.StatusBadRequest || !strings.Contains(e.Message, c.says) {
			t.Errorf("%s: %d %q, want 400 saying %q", c.query, code, e.Message, c.says)
		}
	}
	if code := call(t, r.admin.URL, "", http.MethodGet, "/v1/events", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
}

func TestAThirdSearchAtOnceIsRefusedUntilOneEnds(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.post(`{"order":1}`, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := r.api.Search(context.Background(), admin.Search{}, func(admin.EventSummary) bool {
				started <- struct{}{}
				<-release // holds its slot, as a slow reader of a stream does
				return true
			}, nil)
			errs <- err
		}()
	}
	<-started
	<-started
	var e struct{ Error, Message string }
	if code := r.call(http.MethodGet, "/v1/events", nil, &e); code != http.StatusTooManyRequests || e.Error != "too_many_searches" {
		t.Fatalf("a third search: %d %+v, want 429 too_many_searches", code, e)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if code := r.call(http.MethodGet, "/v1/events", nil, nil); code != http.StatusOK {
		t.Fatalf("a search once the others ended: %d", code)
	}
}

// orderedApp is apptest.FanOut with app ordered by the body's key; a
// failing head is parked (its message acked) for 10s between attempts.
var orderedApp = strings.Replace(fanOutRetrying("{backoff: fixed, delay: 10s, jitter: none, max_attempts: 1000, max_age: 1h}"),
	`{name: app, url: "${APP}/hook", slow_start: 0s}`, `{name: app, url: "${APP}/hook", slow_start: 0s, order: {key: 'body.key'}}`, 1)

func TestSearchByStateTellsAnEventWaitingBehindItsKeyFromADeliveredOne(t *testing.T) {
	t.Parallel()
	r := newRigOf(t, orderedApp)
	head := r.post(`{"key":"cus_1","n":1}`, map[string]string{"App": "503"})
	waiting := r.post(`{"key":"cus_1","n":2}`, nil)
	other := r.post(`{"key":"cus_2","n":1}`, nil)
	eventually(t, "the other key's event delivered at app and every event at audit", func() bool {
		return r.app.count(other) == 1 && r.audit.count(head)+r.audit.count(waiting)+r.audit.count(other) == 3
	})

	eventually(t, "the second event of the failing key found waiting at app", func() bool {
		return slices.Equal(r.search("route=shop&destination=app&state=waiting"), []string{waiting})
	})
	for query, want := range map[string][]string{
		"route=shop&destination=app&state=delivered":  {other},
		"route=shop&destination=app&state=attempting": {head},
		"state=waiting": {waiting},
		// At any destination: audit delivered them all.
		"route=shop&state=delivered&order=oldest": {head, waiting, other},
	} {
		if got := r.search(query); !slices.Equal(got, want) {
			t.Errorf("%s: found %v, want %v", query, got, want)
		}
	}
	var p admin.SearchPage
	r.call(http.MethodGet, "/v1/events?state=waiting", nil, &p)
	if len(p.Events) != 1 || !slices.Equal(p.Events[0].Destinations, []admin.DestinationState{
		{Destination: "app", State: admin.StateWaiting}, {Destination: "audit", State: "delivered"}}) {
		t.Fatalf("the waiting event's states: %+v", p.Events)
	}
	if r.app.count(waiting) != 0 {
		t.Fatalf("the waiting event reached app %d times before its key's head", r.app.count(waiting))
	}
}

// While a failing head waits for its next attempt in its consumer (not
// parked), the consumer's ack floor stays at it: an event of another key
// delivered meanwhile, acked above the floor, reads delivered all the
// same.
func TestAnEventDeliveredWhileAnOrderedHeadHoldsTheAckFloorReadsDelivered(t *testing.T) {
	t.Parallel()
	r := newRigOf(t, strings.Replace(orderedApp, "delay: 10s", "delay: 1s", 1))
	head := r.post(`{"key":"cus_1","n":1}`, map[string]string{"App": "503"})
	other := r.post(`{"key":"cus_2","n":1}`, nil)
	// A second attempt a second after the first: the head waited in its
	// consumer (a wait under the park threshold, 5s).
	eventually(t, "the other key's event delivered at app, the head attempted twice", func() bool {
		return r.app.count(other) == 1 && r.app.count(head) >= 2
	})
	eventually(t, "the other key's event found delivered at app", func() bool {
		return slices.Equal(r.search("route=shop&destination=app&state=delivered"), []string{other})
	})
	if got := r.search("route=shop&destination=app&state=attempting"); !slices.Equal(got, []string{head}) {
		t.Errorf("attempting at app: found %v, want the head %s", got, head)
	}
	var ev struct {
		Destinations []struct{ Destination, State string }
	}
	r.call(http.MethodGet, "/v1/events/"+url.PathEscape(other), nil, &ev)
	for _, d := range ev.Destinations {
		if d.State != "delivered" {
			t.Errorf("the other key's event reads %s at %s", d.State, d.Destination)
		}
	}
}

// A search for a value of the body passes over the blocks of the stream
// that cannot hold it, and says how many messages it did not read.
func TestASearchForABodyValueSaysWhatItPassedOver(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const n = 4 * 512
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range n {
			next <- i
		}
	}()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if code, _ := r.jethook.Post(t, "/hooks/shop", fmt.Sprintf(`{"type":"order.created","order":{"id":"o-%d"}}`, i), nil); code != http.StatusOK {
					t.Errorf("webhook %d: ingress answered %d", i, code)
				}
			}
		})
	}
	wg.Wait()
	var p admin.SearchPage
	if code := r.call(http.MethodGet, "/v1/events?route=shop&q="+url.QueryEscape(`body.order.id == "o-700"`), nil, &p); code != http.StatusOK {
		t.Fatalf("search: %d", code)
	}
	if len(p.Events) != 1 || p.Skipped < 512 || p.Scanned+p.Skipped > n+512 {
		t.Fatalf("found %d events, read %d, passed over %d of %d; want 1 found and whole blocks passed over", len(p.Events), p.Scanned, p.Skipped, n)
	}
}
