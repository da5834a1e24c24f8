package provider_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/provider"
)

// BenchmarkVerify measures the check of one signed 2 KiB webhook, per
// preset: the CPU each costs the ingress.
func BenchmarkVerify(b *testing.B) {
	for _, c := range presetCases(b) {
		b.Run(c.cfg.Name, func(b *testing.B) {
			sign := c.sign
			if sign == "" {
				sign = c.cfg.Secrets[0]
			}
			cfg := c.cfg
			cfg.Now = fixed(epoch)
			p := mustNew(b, cfg)
			c.body = `{"id":"evt_1","event_id":"ev_1","event":{"id":"pd-1"},"pad":"` + strings.Repeat("x", 2000) + `"}`
			if c.contentType != "" {
				c.body = "Body=" + strings.Repeat("x", 2000) + "&From=%2B14158675309"
			}
			r := c.signedRequest(b, p, sign, epoch)
			b.SetBytes(int64(len(r.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Verify(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventType measures finding a Stripe-style type in a 1 KiB
// JSON body: checked, as for a body of unknown form, and known to be
// JSON, as for what the ingress stored (the search's type filter).
//
//	go test -run '^$' -bench EventType -benchtime 200000x ./provider/
func BenchmarkEventType(b *testing.B) {
	body := []byte(`{"id":"evt_1","object":"event","data":{"object":{"id":"in_1","pad":"` + strings.Repeat("x", 900) + `"}},"type":"invoice.paid"}`)
	for _, c := range []struct {
		name string
		of   func(http.Header, []byte) string
	}{{"checked", provider.EventType}, {"known JSON", provider.EventTypeOfJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.of(nil, body) != "invoice.paid" {
					b.Fatal("no type")
				}
			}
		})
	}
}
