package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestEventsShowSaysWhereAnEventIsAtEachDestination(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	_, id := r.post("/hooks/shop", `{"e":1}`, map[string]string{"audit": "410"})
	eventually(t, "a dead letter", func() bool { return r.deadLetterCount() == 1 })
	var out string
	eventually(t, "app's attempt logged", func() bool {
		var err error
		out, err = r.run(events, "show", id)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, "delivered")
	})
	for _, want := range []string{
		"event " + id,
		"route:     shop",
		"destination app: delivered",
		"destination audit: dead lettered (dead letter 1: permanent, last status 410 after 1 attempts)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := r.run(events, "show", "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown event: %v", err)
	}
	if _, err := r.run(events, "list"); !errors.Is(err, errUsage) {
		t.Errorf("events list: %v, want a usage error", err)
	}
}
