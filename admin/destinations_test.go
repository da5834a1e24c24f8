package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestPauseStopsDeliveriesAndResumeRestartsThem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var out struct{ Paused bool }
	if code := r.call(http.MethodPost, "/v1/destinations/shop/app/pause", nil, &out); code != http.StatusOK || !out.Paused {
		t.Fatalf("pause: %d %+v", code, out)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, r.post(fmt.Sprintf(`{"p":%d}`, i), nil))
	}
	eventually(t, "audit got all three", func() bool { return r.audit.total() == 3 })
	storetest.Backlog(t, r.store, "audit settled, the paused app holding all three", func(b store.Backlog) bool {
		if b.Destination == "app" {
			return b.Pending == 3 && b.AckPending == 0
		}
		return b.Pending == 0 && b.AckPending == 0
	})
	if n := r.app.total(); n != 0 {
		t.Fatalf("app got %d requests while paused", n)
	}
	var st admin.Status
	r.call(http.MethodGet, "/v1/status", nil, &st)
	if app := st.Destinations[0]; !app.Paused || app.Pending != 3 {
		t.Errorf("paused app's status %+v, want paused with 3 pending", app)
	}
	if code := r.call(http.MethodPost, "/v1/destinations/shop/app/resume", nil, &out); code != http.StatusOK || out.Paused {
		t.Fatalf("resume: %d %+v", code, out)
	}
	eventually(t, "app got all three after resume", func() bool { return r.app.total() == 3 })
	for _, want := range []string{
		`msg="destination paused by operator" route=shop destination=app paused=true`,
		`msg="destination resumed by operator" route=shop destination=app paused=false`,
	} {
		if !strings.Contains(r.log.String(), want) {
			t.Errorf("log has no %s:\n%s", want, r.log)
		}
	}
	for _, id := range ids {
		if n := r.app.count(id); n != 1 {
			t.Errorf("event %s delivered %d times to app", id, n)
		}
	}
	if code := r.call(http.MethodPost, "/v1/destinations/shop/nope/pause", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown destination: %d, want 404", code)
	}
}

func TestReloadWithoutAReloaderIsNotImplemented(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	if code := r.call(http.MethodPost, "/v1/reload", nil, nil); code != http.StatusNotImplemented {
		t.Errorf("%d, want 501", code)
	}
}
