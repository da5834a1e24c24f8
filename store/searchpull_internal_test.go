package store

import (
	"testing"
	"time"
)

func TestAckFactsReadBothFormsOfTheReplySubject(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ns := "1796464800000000000"
	if got := at.UnixNano(); got != 1796464800000000000 {
		t.Fatalf("test time is %d", got)
	}
	for _, tc := range []struct{ name, reply string }{
		{"first form", "$JS.ACK.WEBHOOKS.search1.1.42.7." + ns + ".3"},
		{"with domain and account", "$JS.ACK._.ACCHASH.WEBHOOKS.search1.1.42.7." + ns + ".3.tok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq, stored, pending, ok := ackFacts(tc.reply)
			if !ok || seq != 42 || !stored.Equal(at) || pending != 3 {
				t.Fatalf("ackFacts = %d, %v, %d, %v; want 42, %v, 3, true", seq, stored, pending, ok, at)
			}
		})
	}
	for _, reply := range []string{"", "_INBOX.abc", "$JS.ACK.WEBHOOKS.search1.1.x.7." + ns + ".3"} {
		if _, _, _, ok := ackFacts(reply); ok {
			t.Errorf("ackFacts(%q) read facts from it", reply)
		}
	}
}
