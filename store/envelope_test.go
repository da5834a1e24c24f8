package store_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/jethook/jethook/store"
)

// Event ids come from providers and may hold anything; the subjects built
// from them keep exactly one token per part, the event's being 32 hex
// digits, so no id can add tokens or wildcards to a subject.
func TestSubjectsKeepOneTokenPerPartWhateverTheEventID(t *testing.T) {
	t.Parallel()
	ids := []string{"evt_1", "a.b.c", "*", ">", "a.>", "evt.*.>", "with space", " ", "tab\there", "",
		"new\r\nline", "\x00nul", "ünïcödé", strings.Repeat("x.", 5000)}
	for _, id := range ids {
		parts := map[string][]string{
			"webhooks": strings.Split(store.Subject("shop", id), "."),
			"replay":   strings.Split(store.ReplaySubject("shop", "app", id), "."),
			"dlq":      strings.Split(store.DLQSubject("shop", "app", id), "."),
		}
		want := map[string][]string{"webhooks": {"webhooks", "shop"}, "replay": {"replay", "shop", "app"}, "dlq": {"dlq", "shop", "app"}}
		for kind, got := range parts {
			w := want[kind]
			if len(got) != len(w)+1 || strings.Join(got[:len(w)], ".") != strings.Join(w, ".") {
				t.Errorf("%s subject of %q has tokens %q", kind, id, got)
				continue
			}
			tok := got[len(w)]
			if b, err := hex.DecodeString(tok); err != nil || len(b) != 16 || tok != store.EventToken(id) {
				t.Errorf("%s subject of %q ends in %q, want 32 hex digits", kind, id, tok)
			}
		}
	}
	if store.EventToken("a.b") == store.EventToken("a_b") {
		t.Error("different ids share a token")
	}
}
