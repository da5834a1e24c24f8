package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestEventsSearchFindsAnOrderByWhatItsBodySays(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	var ids []string
	for _, order := range []string{"1003", "1004", "1005"} {
		_, id := r.post("/hooks/shop", `{"type":"order.updated","data":{"object":{"metadata":{"order_id":"`+order+`"}}}}`, nil)
		ids = append(ids, id)
	}
	out, err := r.run(events, "search", "-route", "shop", "-since", "24h", `body.data.object.metadata.order_id == "1004"`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ids[1]) || strings.Contains(out, ids[0]) || strings.Contains(out, ids[2]) {
		t.Fatalf("the search for order 1004 printed:\n%s", out)
	}
	for _, want := range []string{"RECEIVED", "order.updated", "app=", "audit=", "1 found; scanned 3 webhooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = r.run(events, "search", "-limit", "2", "-oldest")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) || strings.Contains(out, ids[2]) ||
		!strings.Contains(out, "more: jethook events search -cursor ") {
		t.Fatalf("a page of 2, oldest first, printed:\n%s", out)
	}
	out, err = r.run(events, "search", "-json", "-type", "order.updated")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, `"event":`); n != 3 || !strings.Contains(out, `"end":`) {
		t.Fatalf("-json printed %d events:\n%s", n, out)
	}
	if _, err := r.run(events, "search", "body.x ==", "-route", "shop"); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("an expression that does not compile: %v", err)
	}
	if _, err := r.run(events, "search", "a", "b"); !errors.Is(err, errUsage) {
		t.Errorf("two expressions: %v, want a usage error", err)
	}
}

func TestEventsResendDeliversAnEventAgain(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	_, id := r.post("/hooks/shop", `{"e":1}`, nil)
	eventually(t, "both delivered", func() bool { return r.count("/app", id) == 1 && r.count("/audit", id) == 1 })
	eventually(t, "the attempts logged", func() bool {
		out, _ := r.run(events, "show", id)
		return strings.Count(out, "destination app: delivered") == 1 && strings.Count(out, "destination audit: delivered") == 1
	})
	out, err := r.run(events, "resend", id, "-destination", "app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "shop → app: delivered, queued to be delivered again now") {
		t.Fatalf("resend printed:\n%s", out)
	}
	eventually(t, "app got it again", func() bool { return r.count("/app", id) == 2 })
	if r.count("/audit", id) != 1 {
		t.Errorf("audit got it %d times, want once", r.count("/audit", id))
	}
	eventually(t, "show tells the resend", func() bool {
		out, _ := r.run(events, "show", id)
		return strings.Contains(out, "destination app: delivered; resent ")
	})
}
