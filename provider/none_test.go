package provider_test

import (
	"net/http"
	"testing"

	"github.com/jethook/jethook/provider"
)

func TestNone(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "none"})
	body := []byte(`{"id":"evt_1"}`)
	h := http.Header{"X-Hub-Signature-256": {"sha256=00"}, "Webhook-Id": {"msg_1"}}
	t.Run("every request verifies", func(t *testing.T) {
		for _, hh := range []http.Header{{}, h} {
			if err := p.Verify(req(hh, body)); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		}
	})
	t.Run("there is no event id", func(t *testing.T) {
		if id := p.EventID(req(h, body)); id != "" {
			t.Fatalf("EventID = %q", id)
		}
	})
	t.Run("Sign sets nothing and round-trips", func(t *testing.T) {
		hh := http.Header{}
		if err := p.Sign(req(hh, body), "", epoch); err != nil || len(hh) != 0 {
			t.Fatalf("Sign: %v, headers %v", err, hh)
		}
		if err := p.Verify(req(hh, body)); err != nil {
			t.Fatal(err)
		}
	})
}
