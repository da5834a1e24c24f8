package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

const swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func swSig(id, ts string, body []byte) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(swSecret, "whsec_"))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	c := provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}}
	checkPreset(t, preset{cfg: c, wrong: "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key")), sigHeader: "webhook-signature"})
	t.Run("with the default tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
	c.Tolerance = 10 * time.Second
	t.Run("with a 10s tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
}

// TestStandardWebhooksVector is the specification's example.
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
func TestStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	const (
		id   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts   = "1614265330"
		body = `{"test": 2432232314}`
		sig  = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	then := time.Unix(1614265330, 0)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sig)
	for _, secret := range []string{swSecret, strings.TrimPrefix(swSecret, "whsec_")} {
		p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{secret}, Now: fixed(then)})
		if err := p.Verify(req(h, []byte(body))); err != nil {
			t.Fatalf("secret with prefix %v: %v", strings.HasPrefix(secret, "whsec_"), err)
		}
		if got := p.EventID(req(h, []byte(body))); got != id {
			t.Fatalf("EventID = %q", got)
		}
	}
	t.Run("one of several signatures may match", func(t *testing.T) {
		p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}, Now: fixed(then)})
		hh := h.Clone()
		hh.Set("webhook-signature", "v1a,abc v1,AAAA "+sig+" v2,zzz")
		if err := p.Verify(req(hh, []byte(body))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the vector is stale today", func(t *testing.T) {
		p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}})
		if got := reason(t, p.Verify(req(h, []byte(body)))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("reason %q", got)
		}
	})
	t.Run("Resign reproduces the vector", func(t *testing.T) {
		hh := http.Header{"Webhook-Signature": {"v1,old"}, "Webhook-Id": {"old"}}
		if err := provider.Resign(hh, id, []byte(body), swSecret, then); err != nil {
			t.Fatal(err)
		}
		if hh.Get("webhook-signature") != sig || hh.Get("webhook-id") != id || hh.Get("webhook-timestamp") != ts {
			t.Fatalf("Resign set %v", hh)
		}
		if len(hh.Values("webhook-signature")) != 1 {
			t.Fatalf("Resign kept old signatures: %v", hh.Values("webhook-signature"))
		}
	})
}

func TestStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := swSig("msg_1", ts, body)
	p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}, Now: fixed(epoch)})
	for _, tc := range []struct {
		name, id, ts, sig, want string
	}{
		{"a correct request", "msg_1", ts, good, ""},
		{"no timestamp", "msg_1", "", good, provider.ReasonMissingTimestamp},
		{"no id", "", ts, good, provider.ReasonMalformedSignature},
		{"another id", "msg_2", ts, good, provider.ReasonBadSignature},
		{"a timestamp that is not a number", "msg_1", "1e9", good, provider.ReasonMalformedSignature},
		{"an entry without a version", "msg_1", ts, strings.TrimPrefix(good, "v1,"), provider.ReasonMalformedSignature},
		{"only an asymmetric signature", "msg_1", ts, "v1a," + strings.TrimPrefix(good, "v1,"), provider.ReasonMissingSignature},
		{"unpadded base64", "msg_1", ts, strings.TrimRight(good, "="), provider.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range map[string]string{"webhook-id": tc.id, "webhook-timestamp": tc.ts, "webhook-signature": tc.sig} {
				if v != "" {
					h.Set(k, v)
				}
			}
			if got := reason(t, p.Verify(req(h, body))); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResign(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	p := mustNew(t, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}, Now: fixed(epoch)})
	t.Run("replaces a stale signature with one the backend accepts", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := provider.Resign(h, "evt_1", body, swSecret, epoch.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := reason(t, p.Verify(req(h, body))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("before: reason %q", got)
		}
		if err := provider.Resign(h, "evt_1", body, swSecret, epoch); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("accepts a raw base64 secret", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := provider.Resign(h, "evt_1", body, strings.TrimPrefix(swSecret, "whsec_"), epoch); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("rejects a bad secret or an empty id", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct{ id, secret string }{{"evt_1", "whsec_***"}, {"evt_1", "whsec_"}, {"evt_1", ""}, {"", swSecret}} {
			if err := provider.Resign(http.Header{}, tc.id, body, tc.secret, epoch); err == nil {
				t.Errorf("Resign(id %q, secret %q) succeeded", tc.id, tc.secret)
			}
		}
	})
	t.Run("Sign sets a fresh id and keeps an existing one", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := p.Sign(req(h, body), swSecret, epoch); err != nil {
			t.Fatal(err)
		}
		if id := h.Get("webhook-id"); !strings.HasPrefix(id, "msg_") || len(id) < 20 {
			t.Fatalf("fresh id %q", id)
		}
		h.Set("webhook-id", "mine")
		if err := p.Sign(req(h, body), swSecret, epoch); err != nil {
			t.Fatal(err)
		}
		if h.Get("webhook-id") != "mine" || p.Verify(req(h, body)) != nil {
			t.Fatalf("Sign replaced the id or signed wrongly: %v", h)
		}
	})
}

// FuzzStandardWebhooksHeader checks that no header set is accepted unless
// its timestamp is canonical and within tolerance and the signature list
// holds the correct v1 entry for its id and timestamp.
func FuzzStandardWebhooksHeader(f *testing.F) {
	body := []byte(`{"a":1}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := swSig("msg_1", ts, body)
	for _, s := range [][3]string{
		{"msg_1", ts, good},
		{"msg_1", ts, "v1,AAAA " + good},
		{"msg_1", ts, good + "  v1a,xyz"},
		{"msg_1", ts, strings.Replace(good, "v1,", "v1, ", 1)},
		{"msg_1", "0" + ts, good},
		{"msg_1", ts, strings.TrimRight(good, "=")},
		{"msg_1", ts, good[:len(good)-2] + "F="},
		{"msg_1.", ts, good},
		{"", "", ""},
		{"msg_1", ts, ","},
	} {
		f.Add(s[0], s[1], s[2])
	}
	p := mustNew(f, provider.Config{Name: "standard-webhooks", Secrets: []string{swSecret}, Now: fixed(epoch)})
	f.Fuzz(func(t *testing.T, id, ts, sigs string) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sigs)
		err := p.Verify(req(h, body))
		reason(t, err)
		if err != nil {
			return
		}
		n, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || strconv.FormatInt(n, 10) != ts || n < epoch.Unix()-300 || n > epoch.Unix()+300 {
			t.Fatalf("accepted timestamp %q", ts)
		}
		want := swSig(id, ts, body)
		for _, s := range strings.Fields(sigs) {
			if s == want {
				return
			}
		}
		t.Fatalf("accepted %q, which lacks %q", sigs, want)
	})
}

func TestAnUnpaddedWhsecSecretSignsLikeItsPaddedForm(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	now := time.Unix(1_700_000_000, 0)
	padded, unpadded := http.Header{}, http.Header{}
	if err := provider.Resign(padded, "msg_1", body, "whsec_YWI=", now); err != nil {
		t.Fatal(err)
	}
	if err := provider.Resign(unpadded, "msg_1", body, "whsec_YWI", now); err != nil {
		t.Fatal(err)
	}
	if padded.Get(provider.HeaderWebhookSignature) != unpadded.Get(provider.HeaderWebhookSignature) {
		t.Fatalf("signatures differ: %q vs %q", padded.Get(provider.HeaderWebhookSignature), unpadded.Get(provider.HeaderWebhookSignature))
	}
}
