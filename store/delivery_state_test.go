package store

import (
	"testing"
	"time"
)

func TestASearchForAttemptingMatchesInFlightAndInBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want, state string
		match       bool
	}{
		{StateAttempting, StateInFlight, true},
		{StateAttempting, StateInBackoff, true},
		{StateAttempting, StatePending, false},
		{StateInBackoff, StateInBackoff, true},
		{StateInBackoff, StateInFlight, false},
		{StateDelivered, StateDelivered, true},
	} {
		if got := StateMatches(tc.want, tc.state); got != tc.match {
			t.Errorf("StateMatches(%q, %q) = %v, want %v", tc.want, tc.state, got, tc.match)
		}
	}
}

func TestAnEventWaitsInBackoffUntilItsNextAttemptIsDue(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	failed := &Attempt{Time: at, Outcome: "transient", Next: time.Minute}
	for _, tc := range []struct {
		name    string
		a       *Attempt
		now     time.Time
		waiting bool
	}{
		{"no attempt logged yet: the first is in flight", nil, at, false},
		{"a failed attempt whose next is not due", failed, at.Add(30 * time.Second), true},
		{"a failed attempt whose next is due: in flight", failed, at.Add(time.Minute), false},
		{"a failed attempt with no next one", &Attempt{Time: at, Outcome: "permanent"}, at, false},
	} {
		if got := waitsInBackoff(tc.a, tc.now); got != tc.waiting {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.waiting)
		}
	}
}
