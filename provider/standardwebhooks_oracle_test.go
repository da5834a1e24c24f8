package provider_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jethook/jethook/provider"
)

// The Standard Webhooks reference Go library is the oracle: it signs and we
// verify; we sign (and Resign) and it verifies. It reads the real clock, so
// these tests do too.

func TestStandardWebhooksOracleSignsWeVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","data":{"n":42}}`)
	now := time.Now()
	wh, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(wh *standardwebhooks.Webhook, id string, at time.Time) http.Header {
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(standardwebhooks.HeaderWebhookID, id)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
		return h
	}
	p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}})

	t.Run("a fresh signature verifies and yields the id", func(t *testing.T) {
		t.Parallel()
		h := signed(wh, "msg_oracle", now)
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(req(h, body)); got != "msg_oracle" {
			t.Fatalf("EventID = %q", got)
		}
	})
	t.Run("a one-byte body change is bad", func(t *testing.T) {
		t.Parallel()
		changed := append([]byte(nil), body...)
		changed[0] = '['
		if got := reason(t, p.Verify(req(signed(wh, "msg_oracle", now), changed))); got != provider.ReasonBadSignature {
			t.Fatalf("reason %q", got)
		}
	})
	t.Run("another key is bad, and rotation accepts both", func(t *testing.T) {
		t.Parallel()
		other, err := standardwebhooks.NewWebhookRaw([]byte("another key"))
		if err != nil {
			t.Fatal(err)
		}
		h := signed(other, "msg_oracle", now)
		if got := reason(t, p.Verify(req(h, body))); got != provider.ReasonBadSignature {
			t.Fatalf("reason %q", got)
		}
		rotated := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret, "YW5vdGhlciBrZXk="}})
		for _, hh := range []http.Header{h, signed(wh, "msg_oracle", now)} {
			if err := rotated.Verify(req(hh, body)); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("an old or future signature is stale", func(t *testing.T) {
		t.Parallel()
		for _, at := range []time.Time{now.Add(-10 * time.Minute), now.Add(10 * time.Minute)} {
			if got := reason(t, p.Verify(req(signed(wh, "msg_oracle", at), body))); got != provider.ReasonStaleTimestamp {
				t.Fatalf("reason %q", got)
			}
		}
	})
}

func TestStandardWebhooksOracleVerifiesWhatWeSign(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","data":{"n":42}}`)
	wh, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}})

	t.Run("Sign", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := p.Sign(req(h, body), swSecret, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("reference library rejected our signature: %v", err)
		}
	})
	t.Run("Resign over a stale signature", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := provider.Resign(h, "evt_1", body, swSecret, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err == nil {
			t.Fatal("reference library accepted an hour-old signature")
		}
		if err := provider.Resign(h, "evt_1", body, swSecret, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("reference library rejected our re-signature: %v", err)
		}
	})
	t.Run("another key is rejected", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := provider.Resign(h, "evt_1", body, "whsec_YW5vdGhlciBrZXk=", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err == nil {
			t.Fatal("reference library accepted a signature under another key")
		}
	})
}
