package cli

import (
	"errors"
	"strings"
	"testing"
	"time"
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

func TestDurationsInTablesAreShort(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		587090141 * time.Nanosecond:   "587ms",
		1234567 * time.Nanosecond:     "1.23ms",
		1254000000 * time.Nanosecond:  "1.25s",
		42149000000 * time.Nanosecond: "42.1s",
		192400 * time.Millisecond:     "3m12s",
		5 * time.Minute:               "5m",
		48 * time.Hour:                "48h",
		90 * time.Minute:              "1h30m",
		time.Hour + time.Second:       "1h0m1s",
		0:                             "0s",
	} {
		if got := brief(d); got != want {
			t.Errorf("brief(%v) = %q, want %q", d, got, want)
		}
	}
}
