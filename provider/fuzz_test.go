package provider_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/provider"
)

// listPresets sign with a header of several elements, parsed by the same
// list parser.
var listPresets = []struct{ name, header, secret string }{
	{"stripe", "Stripe-Signature", "whsec_x"},
	{"paddle", "Paddle-Signature", "pdl_x"},
	{"calendly", "Calendly-Webhook-Signature", "cal_x"},
	{"pagerduty", "X-PagerDuty-Signature", "pd_x"},
	{"svix", "svix-signature", swKey},
}

// FuzzSignatureHeader feeds arbitrary signature headers to every preset
// whose header is a list: none may panic, and none may verify a header
// that does not hold the signature Sign makes.
func FuzzSignatureHeader(f *testing.F) {
	for _, seed := range []string{
		"t=1700000000,v1=abc", "ts=1700000000;h1=abc", "v1,abc v1,def", "v1=abc,v1=def", "t=,v1=", ",,,", "t=1,t=2",
		"v1=" + strings.Repeat("a", 64), "t=1700000000," + strings.Repeat("v1=x,", 100), " v1,  ", "=;=;=", "v1,", "t=01700000000,v1=ab",
	} {
		for i := range listPresets {
			f.Add(uint8(i), seed)
		}
	}
	body := []byte(`{"id":"evt_1"}`)
	f.Fuzz(func(t *testing.T, which uint8, header string) {
		lp := listPresets[int(which)%len(listPresets)]
		p := mustNew(t, provider.Config{Name: lp.name, Secrets: []string{lp.secret}, Now: fixed(epoch)})
		signed := http.Header{}
		if err := p.Sign(req(signed, body), lp.secret, epoch); err != nil {
			t.Fatal(err)
		}
		h := signed.Clone()
		h.Set(lp.header, header)
		err := p.Verify(req(h, body))
		if err == nil {
			sig := signed.Get(lp.header)
			sig = sig[strings.LastIndexAny(sig, "=,")+1:]
			if !strings.Contains(header, sig) {
				t.Fatalf("%s verified header %q, which lacks the signature", lp.name, header)
			}
			return
		}
		reason(t, err)
	})
}

// FuzzSignedTemplate feeds arbitrary `signed:` templates to the signature
// scheme: New either refuses one with an error or accepts it, and then
// what Sign makes verifies and a changed body does not (when signed).
func FuzzSignedTemplate(f *testing.F) {
	for _, seed := range []string{"", "{body}", "{timestamp}.{body}", "{id}.{timestamp}.{body}", "{method}{url}{body}{timestamp}",
		"v0:{timestamp}:{body}", "{header:X-Extra}{body}", "{json:/a/b}{body}", "{", "}", "{unknown}", "{header:}", "{json:x}", "{{body}}", "plain"} {
		f.Add(seed)
	}
	body := []byte(`{"a":{"b":"c"},"id":"x"}`)
	f.Fuzz(func(t *testing.T, signed string) {
		s := provider.Scheme{Headers: []string{"X-Sig"}, Signed: signed, TimestampHeader: "X-Ts", IDHeaders: []string{"X-Id"}}
		p, err := provider.New(provider.Config{Name: "signature", Secrets: []string{"k"}, Scheme: s, PublicURL: "https://h.example/p", Now: fixed(epoch)})
		if err != nil {
			return
		}
		h := http.Header{"X-Extra": {"e"}}
		r := req(h, append([]byte(nil), body...))
		if err := p.Sign(r, "k", epoch); err != nil {
			if reason(t, err) != provider.ReasonMalformedSignature {
				t.Fatalf("Sign: %v", err)
			}
			return // a {header:Name} the request lacks
		}
		if err := p.Verify(req(h, r.Body)); err != nil {
			t.Fatalf("template %q: our own signature does not verify: %v", signed, err)
		}
	})
}

// FuzzJSONPointer feeds arbitrary bodies and pointers to the event id
// lookup: it never panics, and finds nothing in a body that is not JSON.
func FuzzJSONPointer(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"id":"x"}`, "/id"}, {`{"a":{"b":"c"}}`, "/a/b"}, {`{"a":[1,"two"]}`, "/a/1"}, {`{"a~b":"x","c/d":"y"}`, "/a~0b"},
		{`{"c/d":"y"}`, "/c~1d"}, {`[`, "/"}, {`{"id":5}`, "/id"}, {`{"":"e"}`, "/"}, {`{"a":[]}`, "/a/-1"}, {`{"a":[]}`, "/a/99999999999999999999"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, body, ptr string) {
		s := provider.Scheme{Headers: []string{"X-Sig"}, IDJSON: ptr}
		p, err := provider.New(provider.Config{Name: "signature", Secrets: []string{"k"}, Scheme: s})
		if err != nil {
			return
		}
		id := p.EventID(req(http.Header{}, []byte(body)))
		if id != "" && !strings.Contains(body, "\"") {
			t.Fatalf("found %q in %q, which has no JSON string", id, body)
		}
	})
}

// FuzzTwilioParameters feeds arbitrary form bodies and queries to Twilio's
// parameter sorting: what Sign signs verifies, and what Sign refuses to
// sign Verify refuses too.
func FuzzTwilioParameters(f *testing.F) {
	for _, seed := range [][2]string{
		{twilioForm, twilioQuery}, {"a=1&a=2&b=", ""}, {"=x&%zz", "q"}, {"", "bodySHA256=00"}, {"a=1;b=2", "x=%20"}, {"b=2&a=1&A=0", "foo=1&bar=2"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, body, query string) {
		p := mustNew(t, provider.Config{Name: "twilio", Secrets: []string{twilioToken}, PublicURL: twilioPublicURL})
		r := twilioRequest("", query, []byte(body))
		if err := p.Sign(r, twilioToken, epoch); err != nil {
			if err := p.Verify(twilioRequest("AAAA", query, []byte(body))); err == nil {
				t.Fatalf("Sign refused body %q query %q, but Verify accepted it", body, query)
			}
			return
		}
		if err := p.Verify(r); err != nil {
			t.Fatalf("body %q query %q: our own signature does not verify: %v", body, query, err)
		}
	})
}
