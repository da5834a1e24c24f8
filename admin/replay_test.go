package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store/storetest"
)

func TestReplayRedeliversToOneDestinationOfAFanOutAndTwiceDeliversOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.audit.failWith(http.StatusUnprocessableEntity)
	id := r.post(`{"order":1}`, nil)
	r.waitDeadLetters(1)
	eventually(t, "app got the event", func() bool { return r.app.count(id) == 1 })

	var ev admin.Event
	if code := r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev); code != http.StatusOK {
		t.Fatalf("event: %d", code)
	}
	if got := states(ev); got != "app=delivered audit=dead_lettered" {
		t.Fatalf("before the replay: %s", got)
	}
	if dl := ev.Destinations[1].DeadLetter; dl == nil || dl.Reason != "permanent" || dl.LastStatus != 422 {
		t.Errorf("audit's dead letter %+v", dl)
	}

	r.audit.failWith(0) // the audit backend is fixed
	seq := r.deadLetters("").DeadLetters[0].Seq
	var res admin.ReplayResult
	if code := r.call(http.MethodPost, "/v1/deadletters/replay", map[string]any{"seqs": []uint64{seq}}, &res); code != http.StatusOK || res.Queued != 1 {
		t.Fatalf("replay: %d %+v", code, res)
	}
	eventually(t, "audit got the replay", func() bool { return r.audit.count(id) == 2 })
	if code := r.call(http.MethodPost, "/v1/deadletters/replay", map[string]any{"seqs": []uint64{seq}}, &res); code != http.StatusOK ||
		res.Queued != 0 || res.SkippedDuplicates != 1 {
		t.Fatalf("second replay: %d %+v", code, res)
	}
	eventually(t, "the event delivered at audit after the replay", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=delivered audit=delivered"
	})
	if rp := ev.Destinations[1].Replay; rp == nil || rp.DeadLetter != seq {
		t.Errorf("audit's replay %+v", rp)
	}
	storetest.Settled(t, r.store) // no wrong delivery can come
	if a, b := r.app.count(id), r.audit.count(id); a != 1 || b != 2 {
		t.Errorf("app got the event %d times (want 1), audit %d (want 2: the failure and one replay)", a, b)
	}
	var d admin.DeadLetterDetail
	r.call(http.MethodGet, fmt.Sprintf("/v1/deadletters/%d", seq), nil, &d)
	if d.Replay == nil {
		t.Errorf("the dead letter does not show its replay: %+v", d)
	}
}

func TestReplayByFilterPagesAndSkipsWhatWasReplayed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	sevenDeadLetters(r)
	var seqs []uint64
	for _, d := range r.deadLetters("route=shop&destination=audit").DeadLetters {
		seqs = append(seqs, d.Seq)
	}
	// The backend still fails them, so the replays add dead letters while
	// the pages go on: the pages must not chase them.
	sel := map[string]any{"route": "shop", "destination": "audit", "limit": 2}
	queued, pages := 0, 0
	for {
		var res admin.ReplayResult
		if code := r.call(http.MethodPost, "/v1/deadletters/replay", sel, &res); code != http.StatusOK {
			t.Fatalf("replay page: %d", code)
		}
		queued += res.Queued
		pages++
		if res.NextCursor == "" {
			break
		}
		sel["cursor"] = res.NextCursor
	}
	if queued != 5 || pages != 3 {
		t.Errorf("queued %d in %d pages, want 5 in 3", queued, pages)
	}
	var res admin.ReplayResult
	r.call(http.MethodPost, "/v1/deadletters/replay", map[string]any{"seqs": seqs}, &res)
	if res.Queued != 0 || res.SkippedDuplicates != 5 {
		t.Errorf("replaying again: %+v, want nothing queued", res)
	}
	if code := r.call(http.MethodPost, "/v1/deadletters/replay", map[string]any{"seqs": []uint64{1}, "route": "shop"}, nil); code != http.StatusBadRequest {
		t.Errorf("seqs and filters: %d, want 400", code)
	}
}

func TestAnUnknownEventIsNotFound(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if code := r.call(http.MethodGet, "/v1/events/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("%d, want 404", code)
	}
}

func TestAnEventIsLookedUpOnTheRouteAsked(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.post(`{"route":"asked"}`, nil)
	var ev admin.Event
	if code := r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id)+"?route=shop", nil, &ev); code != http.StatusOK || ev.Route != "shop" {
		t.Errorf("on route shop: %d %+v", code, ev)
	}
	for _, route := range []string{"other", "*", "sh.op"} {
		if code := r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id)+"?route="+url.QueryEscape(route), nil, nil); code != http.StatusNotFound {
			t.Errorf("on route %q: %d, want 404", route, code)
		}
	}
}

func TestAPendingEventReadsPendingAndAttemptsAreListed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if code := r.call(http.MethodPost, "/v1/destinations/shop/audit/pause", nil, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	id := r.post(`{"pending":1}`, nil)
	var ev admin.Event
	eventually(t, "delivered at app, pending at audit", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return states(ev) == "app=delivered audit=pending"
	})
	if ev.Route != "shop" || ev.ReceivedAt == nil || ev.Size != len(`{"pending":1}`) {
		t.Errorf("event %+v", ev)
	}
	eventually(t, "app's attempt in the attempt log", func() bool {
		r.call(http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &ev)
		return len(ev.Destinations[0].Attempts) == 1
	})
	if a := ev.Destinations[0].Attempts[0]; a.Outcome != "delivered" || a.Status != 200 || a.Attempt != 1 {
		t.Errorf("attempt %+v", a)
	}
}

func states(ev admin.Event) string {
	s := ""
	for i, d := range ev.Destinations {
		if i > 0 {
			s += " "
		}
		s += d.Destination + "=" + d.State
	}
	return s
}
