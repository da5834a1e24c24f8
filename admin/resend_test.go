package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/store/storetest"
)

func (r *rig) resend(id string, req admin.ResendRequest) admin.ResendResult {
	r.t.Helper()
	var res admin.ResendResult
	if code := r.call(http.MethodPost, "/v1/events/"+url.PathEscape(id)+"/resend", req, &res); code != http.StatusOK {
		r.t.Fatalf("resend %s: %d", id, code)
	}
	return res
}

func outcomes(res admin.ResendResult) string {
	var s []string
	for _, o := range res.Destinations {
		s = append(s, o.Destination+"="+o.State+":"+o.Action)
	}
	return strings.Join(s, " ")
}

func TestResendDeliversADeliveredEventAgainAsAReplayWould(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.post(`{"order":1}`, nil)
	eventually(t, "both delivered", func() bool {
		var ev admin.Event
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=delivered audit=delivered"
	})
	res := r.resend(id, admin.ResendRequest{Destination: "app"})
	if got := outcomes(res); got != "app=delivered:queued" {
		t.Fatalf("resend to app: %s", got)
	}
	eventually(t, "app got it again", func() bool { return r.app.count(id) == 2 })
	storetest.Settled(t, r.store)
	if got := r.app.attemptsOf(id); got != "1,1" {
		t.Errorf("app's X-Webhook-Attempt: %s, want 1,1 (a resend starts its attempts again, as a replay)", got)
	}
	if r.audit.count(id) != 1 {
		t.Errorf("audit got the event %d times; a resend to app must not reach it", r.audit.count(id))
	}
	if !strings.Contains(r.log.String(), "event resent by operator") || !strings.Contains(r.log.String(), "action=queued") {
		t.Errorf("no audit line for the resend:\n%s", r.log.String())
	}
	// To every destination: both deliver it again.
	if got := outcomes(r.resend(id, admin.ResendRequest{})); got != "app=delivered:queued audit=delivered:queued" {
		t.Fatalf("resend to all: %s", got)
	}
	eventually(t, "both got it again", func() bool { return r.app.count(id) == 3 && r.audit.count(id) == 2 })
}

func TestResendReplaysADeadLetterOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.audit.failWith(http.StatusUnprocessableEntity)
	id := r.post(`{"order":2}`, nil)
	r.waitDeadLetters(1)
	r.audit.failWith(0)
	res := r.resend(id, admin.ResendRequest{Destination: "audit"})
	if got := outcomes(res); got != "audit=dead_lettered:replayed" {
		t.Fatalf("resend: %s", got)
	}
	eventually(t, "audit got the replay", func() bool { return r.audit.count(id) == 2 })
	if code := r.call(http.MethodPost, "/v1/events/nope/resend", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown event: %d, want 404", code)
	}
	if code := r.call(http.MethodPost, "/v1/events/"+url.PathEscape(id)+"/resend", map[string]string{"destination": "nowhere"}, nil); code != http.StatusBadRequest {
		t.Errorf("unknown destination: %d, want 400", code)
	}
}

// longBackoff parks a failed attempt for an hour.
var longBackoff = fanOutRetrying("{backoff: fixed, delay: 1h, jitter: none, max_attempts: 5, max_age: 24h}")

func TestResendRetriesAnEventInBackoffNowWithItsNextAttemptNumber(t *testing.T) {
	t.Parallel()
	r := newRigOf(t, longBackoff)
	r.app.failWith(http.StatusServiceUnavailable)
	id := r.post(`{"order":3}`, nil)
	var ev admin.Event
	eventually(t, "app's first attempt failed and waits an hour", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=in_backoff audit=delivered" && len(ev.Destinations[0].Attempts) == 1
	})
	r.app.failWith(0)
	res := r.resend(id, admin.ResendRequest{})
	if got := outcomes(res); got != "app=in_backoff:retrying audit=delivered:queued" {
		t.Fatalf("resend: %s", got)
	}
	eventually(t, "app delivered at its second attempt", func() bool { return r.app.attemptsOf(id) == "1,2" })
	eventually(t, "app delivered", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=delivered audit=delivered"
	})
	eventually(t, "no parked retry left to come due in an hour", func() bool { return r.store.ParkedCount("shop", "app") == 0 })
	storetest.Settled(t, r.store)
	if got := r.app.attemptsOf(id); got != "1,2" {
		t.Errorf("app's X-Webhook-Attempt: %s, want 1,2: the parked retry brought forward, once", got)
	}
}

// shortBackoff has a failed attempt wait 5 minutes nak'd in its consumer:
// the rig's ParkAfter is longer.
var shortBackoff = fanOutRetrying("{backoff: fixed, delay: 5m, jitter: none, max_attempts: 5, max_age: 24h}")

func TestResendRetriesAnEventNakDelayedInItsConsumerNow(t *testing.T) {
	t.Parallel()
	r := newRigOf(t, shortBackoff, func(o *app.Options) { o.ParkAfter = time.Hour })
	r.app.failWith(http.StatusServiceUnavailable)
	id := r.post(`{"order":4}`, nil)
	var ev admin.Event
	eventually(t, "app's first attempt failed and waits 5 minutes", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=in_backoff audit=delivered" && len(ev.Destinations[0].Attempts) == 1
	})
	if n := r.store.ParkedCount("shop", "app"); n != 0 {
		t.Fatalf("%d parked: the wait must be a nak's delay for this test", n)
	}
	r.app.failWith(0)
	// The attempt's record can be read a moment before its message is
	// nak'd; until then a resend finds nothing to bring forward and waits.
	eventually(t, "a resend brings app's attempt forward", func() bool {
		return outcomes(r.resend(id, admin.ResendRequest{Destination: "app"})) == "app=in_backoff:retrying"
	})
	// Long before the 5 minutes are over.
	eventually(t, "app delivered at its second attempt", func() bool { return r.app.attemptsOf(id) == "1,2" })
	eventually(t, "app delivered", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=delivered audit=delivered"
	})
	storetest.Settled(t, r.store)
	if got := r.app.attemptsOf(id); got != "1,2" {
		t.Errorf("app's X-Webhook-Attempt: %s, want 1,2: the waiting message brought forward, once", got)
	}
}
