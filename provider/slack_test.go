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

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func slackSig(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func TestSlack(t *testing.T) {
	t.Parallel()
	c := provider.Config{Name: "slack", Secrets: []string{slackSecret}}
	checkPreset(t, preset{cfg: c, wrong: "0000000000000000abcd99yyyzzz85a5", sigHeader: "X-Slack-Signature"})
	t.Run("with the default tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
	c.Tolerance = time.Minute
	t.Run("with a one-minute tolerance", func(t *testing.T) { t.Parallel(); checkStale(t, c) })
}

// TestSlackVector is Slack's published example.
// https://docs.slack.dev/authentication/verifying-requests-from-slack
func TestSlackVector(t *testing.T) {
	t.Parallel()
	const (
		ts   = "1531420618"
		body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
		sig  = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	)
	then := time.Unix(1531420618, 0)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", sig)
	t.Run("the published signature verifies at its time", func(t *testing.T) {
		p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}, Now: fixed(then.Add(time.Minute))})
		if err := p.Verify(req(h, []byte(body))); err != nil {
			t.Fatal(err)
		}
		if id := p.EventID(req(h, []byte(body))); id != "" {
			t.Fatalf("a slash command has no event id, got %q", id)
		}
		if _, _, _, ok := p.Handshake(req(h, []byte(body))); ok {
			t.Fatal("a slash command is not a handshake")
		}
	})
	t.Run("the published signature is stale today", func(t *testing.T) {
		p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}})
		if got := reason(t, p.Verify(req(h, []byte(body)))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("reason %q, want %q", got, provider.ReasonStaleTimestamp)
		}
	})
	t.Run("Sign produces the published signature", func(t *testing.T) {
		p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}})
		signed := http.Header{}
		if err := p.Sign(req(signed, []byte(body)), slackSecret, then); err != nil {
			t.Fatal(err)
		}
		if signed.Get("X-Slack-Signature") != sig || signed.Get("X-Slack-Request-Timestamp") != ts {
			t.Fatalf("Sign set %v", signed)
		}
	})
}

func TestSlackHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event_id":"Ev1"}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := slackSig(slackSecret, ts, body)
	p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}, Now: fixed(epoch)})
	for _, tc := range []struct {
		name, sig, ts, want string
	}{
		{"a correct request", good, ts, ""},
		{"no timestamp", good, "", provider.ReasonMissingTimestamp},
		{"a timestamp that is not a number", good, "now", provider.ReasonMalformedSignature},
		{"a timestamp with a fraction", good, ts + ".0", provider.ReasonMalformedSignature},
		{"no v0= prefix", strings.TrimPrefix(good, "v0="), ts, provider.ReasonMalformedSignature},
		{"another version", "v1=" + strings.TrimPrefix(good, "v0="), ts, provider.ReasonMalformedSignature},
		{"a signature for another timestamp", good, strconv.FormatInt(epoch.Unix()+1, 10), provider.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			h.Set("X-Slack-Signature", tc.sig)
			if tc.ts != "" {
				h.Set("X-Slack-Request-Timestamp", tc.ts)
			}
			if got := reason(t, p.Verify(req(h, body))); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSlackURLVerification(t *testing.T) {
	t.Parallel()
	// https://docs.slack.dev/reference/events/url_verification
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}, Now: fixed(epoch)})
	h := http.Header{}
	if err := p.Sign(req(h, body), slackSecret, epoch); err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(req(h, body)); err != nil {
		t.Fatal(err)
	}
	status, ct, resp, ok := p.Handshake(req(h, body))
	if !ok || status != http.StatusOK || !strings.HasPrefix(ct, "text/plain") || string(resp) != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("Handshake = %d %q %q %v", status, ct, resp, ok)
	}
	for _, other := range []string{
		`{"type":"event_callback","event_id":"Ev1","challenge":"x"}`,
		`{"type":"url_verification"}`,
		`{"type":"url_verification","challenge":7}`,
		`payload=%7B%22type%22%3A%22url_verification%22%7D`,
	} {
		if _, _, _, ok := p.Handshake(req(h, []byte(other))); ok {
			t.Errorf("Handshake answered %s", other)
		}
	}
}

func TestSlackEventID(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "slack", Secrets: []string{slackSecret}})
	body := []byte(`{"type":"event_callback","event_id":"Ev0PV52K21","event":{"type":"app_mention"}}`)
	if got := p.EventID(req(http.Header{}, body)); got != "Ev0PV52K21" {
		t.Fatalf("EventID = %q", got)
	}
}

// FuzzSlackHeader checks that no signature and timestamp pair is accepted
// unless the timestamp is canonical, within tolerance, and signed correctly.
func FuzzSlackHeader(f *testing.F) {
	body := []byte(`{"event_id":"Ev1"}`)
	ts := strconv.FormatInt(epoch.Unix(), 10)
	good := slackSig(slackSecret, ts, body)
	for _, s := range [][2]string{
		{good, ts},
		{strings.ToUpper(good), ts},
		{good, "0" + ts},
		{good, "+" + ts},
		{good, ts + " "},
		{good[:len(good)-1], ts},
		{"v0=", ts},
		{"v0", ""},
		{"", ""},
		{good, "99999999999999999999"},
	} {
		f.Add(s[0], s[1])
	}
	p := mustNew(f, provider.Config{Name: "slack", Secrets: []string{slackSecret}, Now: fixed(epoch)})
	f.Fuzz(func(t *testing.T, sig, ts string) {
		h := http.Header{}
		h.Set("X-Slack-Signature", sig)
		h.Set("X-Slack-Request-Timestamp", ts)
		err := p.Verify(req(h, body))
		reason(t, err)
		if err != nil {
			return
		}
		n, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || strconv.FormatInt(n, 10) != ts || n < epoch.Unix()-300 || n > epoch.Unix()+300 {
			t.Fatalf("accepted timestamp %q", ts)
		}
		if want := slackSig(slackSecret, ts, body); !strings.EqualFold(sig, want) {
			t.Fatalf("accepted %q, the correct signature is %q", sig, want)
		}
	})
}
