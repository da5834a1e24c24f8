package provider_test

import (
	"strings"
	"testing"
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
