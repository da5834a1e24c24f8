package provider_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
	paddle "github.com/PaddleHQ/paddle-go-sdk/v4"
	"github.com/PagerDuty/go-pagerduty/webhookv3"
	"github.com/mailgun/mailgun-go/v4"
	razorpay "github.com/razorpay/razorpay-go/utils"
	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	svix "github.com/svix/svix-webhooks/go"
	twilioclient "github.com/twilio/twilio-go/client"

	"github.com/jethook/jethook/provider"
)

// The senders' official Go SDKs are oracles in both directions: they
// sign (or publish a vector) and we verify; we sign and they verify.

// Twilio's vectors, from twilio-go's request_validator_test.go: auth token
// 12345, this URL and these parameters.
const (
	twilioToken     = "12345"
	twilioPublicURL = "https://mycompany.com/myapp.php"
	twilioQuery     = "foo=1&bar=2"
	twilioForm      = "Digits=1234&CallSid=CA1234567890ABCDE&To=%2B18005551212&Caller=%2B14158675309&From=%2B14158675309&ReasonConferenceEnded=test&Reason=Participant"
)

func twilioRequest(sig, query string, body []byte) *provider.Request {
	return &provider.Request{Method: http.MethodPost, URL: &url.URL{Path: "/myapp.php", RawQuery: query},
		Header: http.Header{"X-Twilio-Signature": {sig}}, Body: body}
}

func TestTwilioPublishedVectors(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "twilio", Secrets: []string{twilioToken}, PublicURL: twilioPublicURL})
	for _, tc := range []struct {
		name, sig, query, body, want string
	}{
		{"form parameters sorted by name", "vOEb5UThFn24KEfnOFLQY2AE5FY=", twilioQuery, twilioForm, ""},
		{"a JSON body through bodySHA256", "a9nBmqA0ju/hNViExpshrM61xv4=",
			twilioQuery + "&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620", `{"property": "value", "boolean": true}`, ""},
		{"a JSON body that is not the one hashed", "a9nBmqA0ju/hNViExpshrM61xv4=",
			twilioQuery + "&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620", `{"property": "value", "boolean": false}`, provider.ReasonBadSignature},
		{"parameters sorted wrongly", "95+Bu0JVPi0r/SsESZCVf0dWAjw=", twilioQuery, twilioForm, provider.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := reason(t, p.Verify(twilioRequest(tc.sig, tc.query, []byte(tc.body)))); got != tc.want {
				t.Fatalf("reason %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("the URL with a port verifies a signature made without it", func(t *testing.T) {
		t.Parallel()
		withPort := mustNew(t, provider.Config{Name: "twilio", Secrets: []string{twilioToken}, PublicURL: "https://mycompany.com:443/myapp.php"})
		if err := withPort.Verify(twilioRequest("vOEb5UThFn24KEfnOFLQY2AE5FY=", twilioQuery, []byte(twilioForm))); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTwilioOracleVerifiesWhatWeSign(t *testing.T) {
	t.Parallel()
	v := twilioclient.NewRequestValidator(twilioToken)
	p := mustNew(t, provider.Config{Name: "twilio", Secrets: []string{twilioToken}, PublicURL: twilioPublicURL})
	t.Run("form", func(t *testing.T) {
		t.Parallel()
		r := twilioRequest("", twilioQuery, []byte(twilioForm))
		if err := p.Sign(r, twilioToken, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !v.ValidateBody(twilioPublicURL+"?"+twilioQuery, r.Body, r.Header.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go rejected our signature")
		}
		other := twilioclient.NewRequestValidator("54321")
		if other.ValidateBody(twilioPublicURL+"?"+twilioQuery, r.Body, r.Header.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go accepted our signature under another token")
		}
	})
	t.Run("JSON through bodySHA256", func(t *testing.T) {
		t.Parallel()
		q := twilioQuery + "&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
		r := twilioRequest("", q, []byte(`{"property": "value", "boolean": true}`))
		if err := p.Sign(r, twilioToken, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !v.ValidateBody(twilioPublicURL+"?"+q, r.Body, r.Header.Get("X-Twilio-Signature")) {
			t.Fatal("twilio-go rejected our signature")
		}
	})
}

func TestSvixOracle(t *testing.T) {
	t.Parallel()
	wh, err := svix.NewWebhook(swKey)
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, provider.Config{Name: "svix", Secrets: []string{swKey}})
	body := []byte(`{"type":"user.created","data":{"id":"user_1"}}`)
	t.Run("svix signs, we verify", func(t *testing.T) {
		t.Parallel()
		now := time.Now()
		sig, err := wh.Sign("msg_svix_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Svix-Id": {"msg_svix_1"}, "Svix-Timestamp": {itoa(int(now.Unix()))}, "Svix-Signature": {sig}}
		if err := p.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(req(h, body)); got != "msg_svix_1" {
			t.Fatalf("EventID = %q", got)
		}
		if got := reason(t, p.Verify(req(h, append([]byte(nil), append(body, '\n')...)))); got != provider.ReasonBadSignature {
			t.Fatalf("a changed body: reason %q", got)
		}
	})
	t.Run("we sign, svix verifies", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := p.Sign(req(h, body), swKey, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("svix rejected our signature: %v", err)
		}
		if err := wh.Verify(append(body, ' '), h); err == nil {
			t.Fatal("svix accepted a changed body")
		}
	})
	t.Run("a plain base64 secret is the same key", func(t *testing.T) {
		t.Parallel()
		plain := mustNew(t, provider.Config{Name: "svix", Secrets: []string{strings.TrimPrefix(swKey, "whsec_")}})
		h := http.Header{}
		if err := p.Sign(req(h, body), swKey, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := plain.Verify(req(h, body)); err != nil {
			t.Fatal(err)
		}
	})
}

// Paddle's vector, from paddle-go-sdk's webhook_verifier_test.go.
const (
	paddleSignature = `ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8`
	paddlePayload   = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
	paddleSecret    = `pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr`
)

func TestPaddleOracle(t *testing.T) {
	t.Parallel()
	t.Run("the published vector verifies at its time and yields event_id", func(t *testing.T) {
		t.Parallel()
		p := mustNew(t, provider.Config{Name: "paddle", Secrets: []string{paddleSecret}, Now: fixed(time.Unix(1710929255, 0))})
		h := http.Header{"Paddle-Signature": {paddleSignature}}
		if err := p.Verify(req(h, []byte(paddlePayload))); err != nil {
			t.Fatal(err)
		}
		if got := p.EventID(req(h, []byte(paddlePayload))); got != "evt_01hsdn97563968dy0szkmgjwh3" {
			t.Fatalf("EventID = %q", got)
		}
		late := mustNew(t, provider.Config{Name: "paddle", Secrets: []string{paddleSecret}})
		if got := reason(t, late.Verify(req(h, []byte(paddlePayload)))); got != provider.ReasonStaleTimestamp {
			t.Fatalf("today: reason %q, want stale", got)
		}
	})
	t.Run("we sign, paddle-go-sdk verifies", func(t *testing.T) {
		t.Parallel()
		p := mustNew(t, provider.Config{Name: "paddle", Secrets: []string{paddleSecret}})
		h := http.Header{}
		if err := p.Sign(req(h, []byte(paddlePayload)), paddleSecret, time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			secret, body string
			want         bool
		}{{paddleSecret, paddlePayload, true}, {"pdl_other", paddlePayload, false}, {paddleSecret, paddlePayload + " ", false}} {
			hr := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(tc.body)))
			hr.Header = h.Clone()
			ok, err := paddle.NewWebhookVerifier(tc.secret, paddle.VerifierWithTimestampTolerance(5*time.Minute)).Verify(hr)
			if err != nil || ok != tc.want {
				t.Fatalf("paddle-go-sdk: ok %v err %v, want %v", ok, err, tc.want)
			}
		}
	})
}

// SendGrid's vector, from sendgrid-go's helpers/eventwebhook tests.
const (
	sendgridPublicKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	sendgridSignature = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	sendgridTimestamp = "1600112502"
	sendgridPayload   = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"
)

func TestSendGridOracle(t *testing.T) {
	t.Parallel()
	t.Run("the published vector verifies at its time", func(t *testing.T) {
		t.Parallel()
		p := mustNew(t, provider.Config{Name: "sendgrid", Secrets: []string{sendgridPublicKey}, Now: fixed(time.Unix(1600112502, 0))})
		h := http.Header{provider.HeaderSendGridSignature: {sendgridSignature}, provider.HeaderSendGridTimestamp: {sendgridTimestamp}}
		if err := p.Verify(req(h, []byte(sendgridPayload))); err != nil {
			t.Fatal(err)
		}
		if got := reason(t, p.Verify(req(h, []byte(strings.Replace(sendgridPayload, "dropped", "Dropped", 1))))); got != provider.ReasonBadSignature {
			t.Fatalf("a changed body: reason %q", got)
		}
	})
	t.Run("we sign, sendgrid-go verifies", func(t *testing.T) {
		t.Parallel()
		pub, priv := sendgridKeys(t)
		p := mustNew(t, provider.Config{Name: "sendgrid", Secrets: []string{pub}})
		h := http.Header{}
		if err := p.Sign(req(h, []byte(sendgridPayload)), priv, time.Now()); err != nil {
			t.Fatal(err)
		}
		key, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(pub)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := eventwebhook.VerifySignature(key, []byte(sendgridPayload), h.Get(provider.HeaderSendGridSignature), h.Get(provider.HeaderSendGridTimestamp))
		if err != nil || !ok {
			t.Fatalf("sendgrid-go rejected our signature: %v %v", ok, err)
		}
	})
	t.Run("the route's public key cannot sign", func(t *testing.T) {
		t.Parallel()
		p := mustNew(t, provider.Config{Name: "sendgrid", Secrets: []string{sendgridPublicKey}})
		if err := p.Sign(req(http.Header{}, []byte("[]")), sendgridPublicKey, time.Now()); err == nil {
			t.Fatal("Sign with a public key succeeded")
		}
	})
}

func TestSendGridRotation(t *testing.T) {
	t.Parallel()
	pub1, priv1 := sendgridKeys(t)
	pub2, priv2 := sendgridKeys(t)
	p := mustNew(t, provider.Config{Name: "sendgrid", Secrets: []string{pub1, pub2}})
	for _, priv := range []string{priv1, priv2} {
		h := http.Header{}
		if err := p.Sign(req(h, []byte("[]")), priv, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(req(h, []byte("[]"))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := provider.New(provider.Config{Name: "sendgrid", Secrets: []string{"not a key"}}); err == nil {
		t.Fatal("New accepted a secret that is not a public key")
	}
}

// PagerDuty's vector, from go-pagerduty's webhookv3 tests.
const (
	pagerdutySecret = "lDQHScfUeXUKaQRNF+8XIiDKZ7XX3itBAYzwU0TARw8lJqRnkKl2iB1anSb0Z+IK"
	pagerdutyBody   = `{"event":{"id":"01BWDWL3NYY7LUFPZCC28QUCMK","event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2021-04-26T17:36:27.458Z","agent":{"html_url":"https://acme.pagerduty.com/users/PLH1HKV","id":"PLH1HKV","self":"https://api.pagerduty.com/users/PLH1HKV","summary":"Tenex Engineer","type":"user_reference"},"client":null,"data":{"id":"PGR0VU2","type":"incident","self":"https://api.pagerduty.com/incidents/PGR0VU2","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2","number":2,"status":"triggered","title":"A little bump in the road","service":{"html_url":"https://acme.pagerduty.com/services/PF9KMXH","id":"PF9KMXH","self":"https://api.pagerduty.com/services/PF9KMXH","summary":"API Service","type":"service_reference"},"assignees":[{"html_url":"https://acme.pagerduty.com/users/PTUXL6G","id":"PTUXL6G","self":"https://api.pagerduty.com/users/PTUXL6G","summary":"User 123","type":"user_reference"}],"escalation_policy":{"html_url":"https://acme.pagerduty.com/escalation_policies/PUS0KTE","id":"PUS0KTE","self":"https://api.pagerduty.com/escalation_policies/PUS0KTE","summary":"Default","type":"escalation_policy_reference"},"teams":[{"html_url":"https://acme.pagerduty.com/teams/PFCVPS0","id":"PFCVPS0","self":"https://api.pagerduty.com/teams/PFCVPS0","summary":"Engineering","type":"team_reference"}],"priority":{"html_url":"https://acme.pagerduty.com/account/incident_priorities","id":"PSO75BM","self":"https://api.pagerduty.com/priorities/PSO75BM","summary":"P1","type":"priority_reference"},"urgency":"high","conference_bridge":{"conference_number":1000,"conference_url":"https://example.com"},"resolve_reason":null}}}`
)

func TestPagerDutyOracle(t *testing.T) {
	t.Parallel()
	p := mustNew(t, provider.Config{Name: "pagerduty", Secrets: []string{pagerdutySecret}})
	t.Run("the published vector verifies, alone or beside another signature, and yields event.id", func(t *testing.T) {
		t.Parallel()
		for _, sig := range []string{
			"v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd",
			"v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5,v1=0c0b9495b893a39e70d1fea2fe11fbe0a825f88b9f67846f6cc07dd2bc5476cd",
		} {
			h := http.Header{"X-Pagerduty-Signature": {sig}}
			if err := p.Verify(req(h, []byte(pagerdutyBody))); err != nil {
				t.Fatalf("%s: %v", sig, err)
			}
			if got := p.EventID(req(h, []byte(pagerdutyBody))); got != "01BWDWL3NYY7LUFPZCC28QUCMK" {
				t.Fatalf("EventID = %q", got)
			}
		}
		h := http.Header{"X-Pagerduty-Signature": {"v1=7020c8a7ec668a9b7012bc3dd82e483394b038f4230acc6785efbf2a7d8bcaf5"}}
		if got := reason(t, p.Verify(req(h, []byte(pagerdutyBody)))); got != provider.ReasonBadSignature {
			t.Fatalf("the vector's wrong signature: reason %q", got)
		}
	})
	t.Run("we sign, go-pagerduty verifies", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if err := p.Sign(req(h, []byte(pagerdutyBody)), pagerdutySecret, time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			secret string
			want   bool
		}{{pagerdutySecret, true}, {"another secret", false}} {
			hr := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(pagerdutyBody))
			hr.Header = h.Clone()
			if err := webhookv3.VerifySignature(hr, tc.secret); (err == nil) != tc.want {
				t.Fatalf("go-pagerduty: %v, want ok %v", err, tc.want)
			}
		}
	})
}

func TestMailgunOracle(t *testing.T) {
	t.Parallel()
	const key = "mailgun-webhook-signing-key"
	mg := mailgun.NewMailgun("example.com", "api-key")
	mg.SetWebhookSigningKey(key)
	p := mustNew(t, provider.Config{Name: "mailgun", Secrets: []string{key}})
	r := req(http.Header{}, []byte(`{"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}`))
	if err := p.Sign(r, key, time.Now()); err != nil {
		t.Fatal(err)
	}
	var payload mailgun.WebhookPayload
	if err := json.Unmarshal(r.Body, &payload); err != nil {
		t.Fatal(err)
	}
	if ok, err := mg.VerifyWebhookSignature(payload.Signature); err != nil || !ok {
		t.Fatalf("mailgun-go rejected our signature: %v %v", ok, err)
	}
	other := mailgun.NewMailgun("example.com", "api-key")
	other.SetWebhookSigningKey("another key")
	if ok, _ := other.VerifyWebhookSignature(payload.Signature); ok {
		t.Fatal("mailgun-go accepted our signature under another key")
	}
	if err := p.Verify(req(http.Header{}, r.Body)); err != nil {
		t.Fatal(err)
	}
}

func TestGiteaOracle(t *testing.T) {
	t.Parallel()
	const secret = "gitea-hook-secret"
	body := []byte(`{"ref":"refs/heads/main","repository":{"full_name":"o/r"}}`)
	for _, name := range []string{"gitea", "forgejo"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, provider.Config{Name: name, Secrets: []string{secret}})
			h := http.Header{}
			if err := p.Sign(req(h, body), secret, time.Now()); err != nil {
				t.Fatal(err)
			}
			sig := h.Get("X-" + strings.ToUpper(name[:1]) + name[1:] + "-Signature")
			if ok, err := gitea.VerifyWebhookSignature(secret, sig, body); err != nil || !ok {
				t.Fatalf("the Gitea SDK rejected our signature: %v %v", ok, err)
			}
			if ok, _ := gitea.VerifyWebhookSignature("other", sig, body); ok {
				t.Fatal("the Gitea SDK accepted our signature under another secret")
			}
		})
	}
	t.Run("the Gitea SDK's middleware passes what we sign", func(t *testing.T) {
		t.Parallel()
		p := mustNew(t, provider.Config{Name: "gitea", Secrets: []string{secret}})
		hr := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if err := p.Sign(req(hr.Header, body), secret, time.Now()); err != nil {
			t.Fatal(err)
		}
		reached := false
		rec := httptest.NewRecorder()
		gitea.VerifyWebhookSignatureMiddleware(secret)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })).ServeHTTP(rec, hr)
		if !reached {
			t.Fatalf("middleware answered %d %s", rec.Code, rec.Body)
		}
	})
}

func TestRazorpayOracle(t *testing.T) {
	t.Parallel()
	const secret = "razorpay-webhook-secret"
	body := `{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1"}}}}`
	p := mustNew(t, provider.Config{Name: "razorpay", Secrets: []string{secret}})
	h := http.Header{"X-Razorpay-Event-Id": {"Lq1p6uCPbmjy4W"}}
	if err := p.Sign(req(h, []byte(body)), secret, time.Now()); err != nil {
		t.Fatal(err)
	}
	sig := h.Get("X-Razorpay-Signature")
	if !razorpay.VerifyWebhookSignature(body, sig, secret) {
		t.Fatal("razorpay-go rejected our signature")
	}
	if razorpay.VerifyWebhookSignature(body, sig, "another secret") || razorpay.VerifyWebhookSignature(body+" ", sig, secret) {
		t.Fatal("razorpay-go accepted our signature for another secret or body")
	}
	if got := p.EventID(req(h, []byte(body))); got != "Lq1p6uCPbmjy4W" {
		t.Fatalf("EventID = %q", got)
	}
}
