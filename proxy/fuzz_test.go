package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// FuzzIngress throws arbitrary paths, methods, headers and bodies at the
// ingress over a real store: it never panics, every answer is one of the
// documented statuses with a reason, and a 200 always names an id.
func FuzzIngress(f *testing.F) {
	f.Add("/hooks/plain", "POST", "Content-Type", "application/json", []byte(`{"a":1}`))
	f.Add("/hooks/github", "POST", "X-Hub-Signature-256", "sha256=00", []byte("hello"))
	f.Add("/hooks/stripe", "POST", "Stripe-Signature", "t=1,v1=zz,v1=", []byte(`{"id":"evt_1"}`))
	f.Add("/hooks/slack", "POST", "X-Slack-Request-Timestamp", "99999999999999999999", []byte("\xff\x00"))
	f.Add("/hooks/sw", "PUT", "webhook-signature", "v1,!!! v1a,", []byte{})
	f.Add("/hooks/partner", "POST", "X-Signature", "sha512=", bytes.Repeat([]byte("x"), 2000))
	f.Add("/nope/../hooks/plain", "GET", "Connection", "close", []byte(nil))
	cfg, err := policy.Parse("routes.yaml", []byte(routes), nil)
	if err != nil {
		f.Fatal(err)
	}
	st := storetest.Open(f, store.Options{PublishTimeout: time.Second})
	h, err := proxy.New(cfg, st, nil)
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 404: true, 405: true, 413: true}
	f.Fuzz(func(t *testing.T, path, method, hk, hv string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t?#") {
			return
		}
		req, err := http.NewRequest(method, "http://jethook"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		if hk != "" && !strings.ContainsAny(hk+hv, "\r\n\x00") {
			req.Header.Set(hk, hv)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if !allowed[w.Code] {
			t.Fatalf("%s %s: status %d: %s", method, path, w.Code, w.Body)
		}
		var answer map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil && w.Code != 200 {
			t.Fatalf("%s %s: %d answer is not JSON: %q", method, path, w.Code, w.Body)
		}
		switch {
		case w.Code == 200 && answer != nil && answer["id"] == "":
			t.Fatalf("200 without an id: %s", w.Body)
		case w.Code != 200 && (answer["error"] == "" || answer["error"] == nil):
			t.Fatalf("%d without a reason: %s", w.Code, w.Body)
		}
	})
}
