package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/jethook/jethook/admin"
)

func TestStatusReportsEachDestinationsDeadLettersAndLastOutcome(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i := range 3 {
		r.post(fmt.Sprintf(`{"n":%d}`, i), map[string]string{"Audit": "422"})
	}
	r.waitDeadLetters(3)
	var st admin.Status
	eventually(t, "app's success and audit's failure in the status", func() bool {
		if code := r.call(http.MethodGet, "/v1/status", nil, &st); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		// Settled at app: delivered and no longer in flight.
		return len(st.Destinations) == 2 && st.Destinations[0].LastSuccessAt != nil && st.Destinations[1].LastFailureAt != nil &&
			st.Destinations[0].AckPending == 0 && st.Destinations[0].Pending == 0 && st.Destinations[0].InFlight == 0
	})
	app, audit := st.Destinations[0], st.Destinations[1]
	if app.Route != "shop" || app.Destination != "app" || audit.Destination != "audit" {
		t.Fatalf("destinations %+v", st.Destinations)
	}
	if app.DeadLetters != 0 || audit.DeadLetters != 3 {
		t.Errorf("dead letters app %d audit %d, want 0 and 3", app.DeadLetters, audit.DeadLetters)
	}
	if audit.LastStatus != 422 || audit.LastError != "status 422" || audit.LastSuccessAt != nil {
		t.Errorf("audit last outcome %+v", audit)
	}
	if app.Breaker != "closed" || app.Paused || app.Pending != 0 || app.InFlight != 0 || app.InBackoff != 0 {
		t.Errorf("app %+v", app)
	}
}

func TestStatusCountsMessagesWaitingInBackoff(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.app.failWith(http.StatusServiceUnavailable)
	r.post("{}", nil)
	var st admin.Status
	eventually(t, "one message in backoff at app", func() bool {
		r.call(http.MethodGet, "/v1/status", nil, &st)
		return st.Destinations[0].AckPending == 1 && st.Destinations[0].LastFailureAt != nil
	})
	app := st.Destinations[0]
	if app.InBackoff+app.InFlight != 1 || app.OldestPendingAt == nil {
		t.Errorf("app %+v", app)
	}
}
