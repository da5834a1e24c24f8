package store_test

import (
	"strings"
	"testing"

	"github.com/jethook/jethook/store"
)

// Subjects name routes and destinations only, never an event: JetStream
// keeps every distinct subject in memory, so memory would grow with every
// retained webhook. Each subject is its kind, the names, and the layout
// token.
func TestSubjectsNameRoutesAndDestinationsNotEvents(t *testing.T) {
	t.Parallel()
	for subject, want := range map[string]string{
		store.Subject("shop"):               "webhooks.shop.v2",
		store.ReplaySubject("shop", "app"):  "replay.shop.app.v2",
		store.DLQSubject("shop", "app"):     "dlq.shop.app.v2",
		store.AttemptSubject("shop", "app"): "attempts.shop.app.v2",
	} {
		if subject != want {
			t.Errorf("subject %q, want %q", subject, want)
		}
	}
	if store.EventToken("a.b") == store.EventToken("a_b") || strings.ContainsAny(store.EventToken("a.>"), ".*>") {
		t.Error("event tokens of the earlier layout must be distinct single tokens")
	}
}
