package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

const stripeSecret = "whsec_test_0123456789abcdef"

func stripeSig(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestStripe(t *testing.T) {
	t.Parallel()
	c := provider.Config{Name: "stripe", Secrets: []string{stripeSecret}}
	checkPreset(t, preset{cfg: c, wrong: "whsec_test_fedcba9876543210", sigHeader: "Stripe-Signature"})
	t.Run("with the default tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
	c.Tolerance = 30 * time.Second
	t.Run("with a 30s tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
}

func TestStripeHeader(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1","object":"event"}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := stripeSig(stripeSecret, ts, body)
	other := stripeSig("whsec_other", ts, body)
	p := mustNew(t, provider.Config{Name: "stripe", Secrets: []string{stripeSecret}, Now: fixed(epoch)})
	for _, tc := range []struct {
		name, header, want string
	}{
		{"the whsec_ secret is the key as it is", "t=" + ts + ",v1=" + good, ""},
		{"any v1 may match", "t=" + ts + ",v1=" + other + ",v1=" + good, ""},
		{"v0 and unknown schemes are ignored", "t=" + ts + ",v1=" + good + ",v0=" + other + ",x=y", ""},
		{"order does not matter", "v1=" + good + ",t=" + ts, ""},
		{"a v0 signature alone is not enough", "t=" + ts + ",v0=" + good, provider.ReasonMissingSignature},
		{"no timestamp", "v1=" + good, provider.ReasonMissingTimestamp},
		{"two timestamps", "t=" + ts + ",t=" + ts + ",v1=" + good, provider.ReasonMalformedSignature},
		{"an empty timestamp", "t=,v1=" + good, provider.ReasonMalformedSignature},
		{"a signed timestamp", "t=+" + ts + ",v1=" + good, provider.ReasonMalformedSignature},
		{"an element without =", "t=" + ts + ",v1" + good, provider.ReasonMalformedSignature},
		{"a trailing comma", "t=" + ts + ",v1=" + good + ",", provider.ReasonMalformedSignature},
		{"spaces are not trimmed", "t=" + ts + ", v1=" + good, provider.ReasonMissingSignature},
		{"a wrong v1", "t=" + ts + ",v1=" + other, provider.ReasonBadSignature},
		{"a signature for another timestamp", "t=" + strconv.FormatInt(epoch.Unix()-1, 10) + ",v1=" + good, provider.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := reason(t, p.Verify(req(http.Header{"Stripe-Signature": {tc.header}}, body))); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStripeEventID(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "stripe", Secrets: []string{stripeSecret}})
	for _, tc := range []struct{ body, want string }{
		{`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","data":{"object":{"id":"pi_1"}}}`, "evt_1NG8Du2eZvKYlo2CUI79vXWy"},
		{`{"object":"event","data":{"object":{"id":"pi_1"}}}`, ""},
		{`{"ID":"evt_upper"}`, ""},
		{`{"id":42}`, ""},
		{`not json`, ""},
		{``, ""},
	} {
		if got := p.EventID(req(http.Header{}, []byte(tc.body))); got != tc.want {
			t.Errorf("EventID(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// FuzzStripeHeader checks that no Stripe-Signature is accepted unless it holds
// a canonical t within tolerance and the correct v1 for that t.
func FuzzStripeHeader(f *testing.F) {
	body := []byte(`{"id":"evt_1"}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := stripeSig(stripeSecret, ts, body)
	for _, s := range []string{
		"t=" + ts + ",v1=" + good,
		"t=" + ts + ",v1=" + strings.ToUpper(good) + ",v0=00",
		"v1=" + good + ",t=" + ts,
		"t=" + ts + ",v1=" + good[1:],
		"t=0" + ts + ",v1=" + good,
		"t=" + ts + ",v1=" + good + ",",
		"t=,v1=",
		",,,",
		"=",
		"t=99999999999999999999,v1=00",
		"",
	} {
		f.Add(s)
	}
	p := mustNew(f, provider.Config{Name: "stripe", Secrets: []string{stripeSecret}, Now: fixed(epoch)})
	f.Fuzz(func(t *testing.T, header string) {
		err := p.Verify(req(http.Header{"Stripe-Signature": {header}}, body))
		reason(t, err)
		if err != nil {
			return
		}
		parts := strings.Split(header, ",")
		for _, tp := range parts {
			v, ok := strings.CutPrefix(tp, "t=")
			if !ok {
				continue
			}
			n, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil || strconv.FormatInt(n, 10) != v || n < epoch.Unix()-300 || n > epoch.Unix()+300 {
				continue
			}
			want := "v1=" + stripeSig(stripeSecret, v, body)
			for _, sp := range parts {
				if strings.EqualFold(sp, want) {
					return
				}
			}
		}
		t.Fatalf("accepted %q, which holds no correct t and v1 pair", header)
	})
}
