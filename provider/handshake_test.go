package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

func get(query string, h http.Header) *provider.Request {
	return &provider.Request{Method: http.MethodGet, URL: &url.URL{Path: "/", RawQuery: query}, Header: h}
}

// status returns the HTTP status an error is answered with.
func status(t *testing.T, err error) int {
	t.Helper()
	var e *provider.Error
	if !errorsAs(err, &e) {
		t.Fatalf("error %v is not a *provider.Error", err)
	}
	if e.Status == 0 {
		return http.StatusUnauthorized
	}
	return e.Status
}

func TestMetaSubscriptionHandshake(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "meta", Secrets: []string{"app-secret"}, VerifyToken: "my-token"})
	t.Run("the right token gets the challenge", func(t *testing.T) {
		t.Parallel()
		r := get("hub.mode=subscribe&hub.verify_token=my-token&hub.challenge=1158201444", http.Header{})
		if err := p.Verify(r); err != nil {
			t.Fatal(err)
		}
		code, ctype, body, ok := p.Handshake(r)
		if !ok || code != http.StatusOK || ctype != "text/plain; charset=utf-8" || string(body) != "1158201444" {
			t.Fatalf("Handshake = %d %q %q %v", code, ctype, body, ok)
		}
	})
	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"a wrong token is forbidden", "hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1", http.StatusForbidden},
		{"no token is forbidden", "hub.mode=subscribe&hub.challenge=1", http.StatusForbidden},
		{"no challenge is a bad request", "hub.mode=subscribe&hub.verify_token=my-token", http.StatusBadRequest},
		{"a GET that is no handshake is a bad request", "x=1", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := status(t, p.Verify(get(tc.query, http.Header{}))); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("a POST with the handshake query is an event and needs its signature", func(t *testing.T) {
		t.Parallel()
		r := &provider.Request{Method: http.MethodPost, URL: &url.URL{RawQuery: "hub.mode=subscribe&hub.verify_token=my-token&hub.challenge=1"}, Header: http.Header{}, Body: []byte("{}")}
		if got := reason(t, p.Verify(r)); got != provider.ReasonMissingSignature {
			t.Fatalf("reason %q", got)
		}
	})
}

func TestOktaVerificationHandshake(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "okta", Secrets: []string{"Bearer okta-shared"}})
	h := http.Header{"Authorization": {"Bearer okta-shared"}, "X-Okta-Verification-Challenge": {"gWq2l8ywd0UYIGGOpzvbvdMD5YQ-6PHx9gYfWvmUOjOX"}}
	r := get("", h)
	if err := p.Verify(r); err != nil {
		t.Fatal(err)
	}
	code, ctype, body, ok := p.Handshake(r)
	var v map[string]string
	if !ok || code != 200 || ctype != "application/json" || json.Unmarshal(body, &v) != nil || v["verification"] != "gWq2l8ywd0UYIGGOpzvbvdMD5YQ-6PHx9gYfWvmUOjOX" {
		t.Fatalf("Handshake = %d %q %s %v", code, ctype, body, ok)
	}
	bad := get("", http.Header{"Authorization": {"Bearer guess"}, "X-Okta-Verification-Challenge": {"x"}})
	if got := reason(t, p.Verify(bad)); got != provider.ReasonBadSignature {
		t.Fatalf("a wrong Authorization: reason %q", got)
	}
	if got := status(t, p.Verify(get("", http.Header{"Authorization": {"Bearer okta-shared"}}))); got != http.StatusBadRequest {
		t.Fatalf("a GET without the challenge: status %d, want 400", got)
	}
}

func TestZoomURLValidation(t *testing.T) {
	t.Parallel()
	const secret = "zoom-secret-token"
	p := mustNew(t, provider.Config{Name: "zoom", Secrets: []string{secret}})
	body := []byte(`{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
	r := req(http.Header{}, body)
	if err := p.Sign(r, secret, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(r); err != nil {
		t.Fatal(err)
	}
	code, ctype, resp, ok := p.Handshake(r)
	var v map[string]string
	if !ok || code != 200 || ctype != "application/json" || json.Unmarshal(resp, &v) != nil {
		t.Fatalf("Handshake = %d %q %s %v", code, ctype, resp, ok)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("qgg8vlvZRS6UYooatFL8Aw"))
	if v["plainToken"] != "qgg8vlvZRS6UYooatFL8Aw" || v["encryptedToken"] != hex.EncodeToString(m.Sum(nil)) {
		t.Fatalf("answer %s", resp)
	}
	unsigned := req(http.Header{}, body)
	if got := reason(t, p.Verify(unsigned)); got != provider.ReasonMissingSignature {
		t.Fatalf("an unsigned url_validation: reason %q", got)
	}
}

func TestTwitchCallbackVerification(t *testing.T) {
	t.Parallel()
	const secret = "twitch-secret"
	p := mustNew(t, provider.Config{Name: "twitch", Secrets: []string{secret}})
	body := []byte(`{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}`)
	for _, tc := range []struct {
		kind      string
		handshake bool
	}{{"webhook_callback_verification", true}, {"notification", false}, {"revocation", false}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			r := req(http.Header{"Twitch-Eventsub-Message-Type": {tc.kind}}, body)
			if err := p.Sign(r, secret, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(r); err != nil {
				t.Fatal(err)
			}
			code, ctype, resp, ok := p.Handshake(r)
			if ok != tc.handshake {
				t.Fatalf("handshake %v, want %v", ok, tc.handshake)
			}
			if ok && (code != 200 || ctype != "text/plain; charset=utf-8" || string(resp) != "pogchamp-kappa-360noscope-vohiyo") {
				t.Fatalf("Handshake = %d %q %q", code, ctype, resp)
			}
		})
	}
}

// TestTwitchSignedStringIsIDTimestampBody checks the scheme against an
// independent HMAC of the documented message.
func TestTwitchSignedStringIsIDTimestampBody(t *testing.T) {
	t.Parallel()
	const secret = "twitch-secret"
	id, ts, body := "e76c6bd4-55c9-4987-8304-da1588d8988b", "2019-11-16T10:11:12.634234626Z", []byte(`{"subscription":{}}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id + ts))
	m.Write(body)
	h := http.Header{"Twitch-Eventsub-Message-Id": {id}, "Twitch-Eventsub-Message-Timestamp": {ts},
		"Twitch-Eventsub-Message-Signature": {"sha256=" + hex.EncodeToString(m.Sum(nil))}}
	at, _ := time.Parse(time.RFC3339Nano, ts)
	p := mustNew(t, provider.Config{Name: "twitch", Secrets: []string{secret}, Now: fixed(at.Add(9 * time.Minute))})
	if err := p.Verify(req(h, body)); err != nil {
		t.Fatal(err)
	}
	if got := p.EventID(req(h, body)); got != id {
		t.Fatalf("EventID = %q", got)
	}
	late := mustNew(t, provider.Config{Name: "twitch", Secrets: []string{secret}, Now: fixed(at.Add(11 * time.Minute))})
	if got := reason(t, late.Verify(req(h, body))); got != provider.ReasonStaleTimestamp {
		t.Fatalf("11 minutes later: reason %q, want stale (Twitch's limit is 10)", got)
	}
}

// TestHubSpotSignedString checks v3 against an independent HMAC of method
// + decoded URI + body + timestamp, as HubSpot documents it.
func TestHubSpotSignedString(t *testing.T) {
	t.Parallel()
	const secret = "hubspot-client-secret"
	ts := itoa(int(epoch.UnixMilli()))
	body := []byte(`[{"eventId":1}]`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("POST" + "https://hooks.example.com/hubspot?a=b:c/d" + string(body) + ts))
	h := http.Header{"X-Hubspot-Signature-V3": {b64(m.Sum(nil))}, "X-Hubspot-Request-Timestamp": {ts}}
	p := mustNew(t, provider.Config{Name: "hubspot", Secrets: []string{secret}, PublicURL: "https://hooks.example.com/hubspot", Now: fixed(epoch)})
	r := req(h, body)
	r.URL.RawQuery = "a=b%3Ac%2Fd"
	if err := p.Verify(r); err != nil {
		t.Fatal(err)
	}
}

// TestMailgunSignedString checks the scheme against Mailgun's documented
// HMAC of timestamp + token.
func TestMailgunSignedString(t *testing.T) {
	t.Parallel()
	const key = "mailgun-signing-key"
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(itoa(int(epoch.Unix())) + "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"))
	body := []byte(`{"signature":{"timestamp":"` + itoa(int(epoch.Unix())) + `","token":"a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0","signature":"` +
		hex.EncodeToString(m.Sum(nil)) + `"},"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}`)
	p := mustNew(t, provider.Config{Name: "mailgun", Secrets: []string{key}, Now: fixed(epoch)})
	if err := p.Verify(req(http.Header{}, body)); err != nil {
		t.Fatal(err)
	}
	if got := p.EventID(req(http.Header{}, body)); got != "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0" {
		t.Fatalf("EventID = %q", got)
	}
}

// TestLinearTimestampIsInTheBody checks that a body whose webhookTimestamp
// is stale is refused even though its signature matches.
func TestLinearTimestampIsInTheBody(t *testing.T) {
	t.Parallel()
	const secret = "linear-secret"
	body := []byte(`{"action":"create","type":"Issue","webhookTimestamp":` + itoa(int(epoch.Add(-2*time.Minute).UnixMilli())) + `}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	h := http.Header{"Linear-Signature": {hex.EncodeToString(m.Sum(nil))}, "Linear-Delivery": {"d-1"}}
	p := mustNew(t, provider.Config{Name: "linear", Secrets: []string{secret}, Now: fixed(epoch)})
	if got := reason(t, p.Verify(req(h, body))); got != provider.ReasonStaleTimestamp {
		t.Fatalf("reason %q, want stale", got)
	}
	lenient := mustNew(t, provider.Config{Name: "linear", Secrets: []string{secret}, Now: fixed(epoch), Tolerance: 5 * time.Minute})
	if err := lenient.Verify(req(h, body)); err != nil {
		t.Fatal(err)
	}
}

func TestZoomAnswersUnderTheSecretTheRequestIsSignedWith(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "zoom", Secrets: []string{"old-token", "new-token"}})
	r := req(http.Header{}, []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"abc"}}`))
	if err := p.Sign(r, "new-token", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(r); err != nil {
		t.Fatal(err)
	}
	_, _, resp, _ := p.Handshake(r)
	m := hmac.New(sha256.New, []byte("new-token"))
	m.Write([]byte("abc"))
	var v map[string]string
	if json.Unmarshal(resp, &v) != nil || v["encryptedToken"] != hex.EncodeToString(m.Sum(nil)) {
		t.Fatalf("answer %s, want encryptedToken under new-token", resp)
	}
}
