package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// A route with allow_sources takes webhooks only from those addresses:
// the connection's, or behind a trusted load balancer the one it saw.
// The test's client connects from 127.0.0.1.
func TestARouteWithAllowSourcesAnswers403ToAnyOtherClientAndStoresNothing(t *testing.T) {
	t.Parallel()
	const yaml = `
routes:
  - {name: open, path: /open, allow_sources: [127.0.0.0/8], destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
  - {name: github, path: /github, allow_sources: [192.30.252.0/22, "2a0a:a440::/29"], destinations: [{name: app, url: "http://127.0.0.1:1/"}]}
`
	cfg, err := policy.Parse("routes.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		trusted string // JETHOOK_TRUSTED_PROXIES
		path    string
		xff     []string
		want    int
	}{
		{"a client in the ranges", "", "/open", nil, http.StatusOK},
		{"a client outside them", "", "/github", nil, http.StatusForbidden},
		{"a client outside them that claims an address inside", "", "/github", []string{"192.30.252.7"}, http.StatusForbidden},
		{"behind a trusted load balancer, the client it saw", "127.0.0.1/32", "/github", []string{"192.30.252.7"}, http.StatusOK},
		{"behind it, an IPv6 client it saw", "127.0.0.1/32", "/github", []string{"2a0a:a440::12"}, http.StatusOK},
		{"behind it, a client that put an allowed address before its own", "127.0.0.1/32", "/github", []string{"192.30.252.7, 203.0.113.9"}, http.StatusForbidden},
		{"behind two trusted proxies", "127.0.0.1/32,10.0.0.0/8", "/github", []string{"192.30.252.7", "10.1.1.1"}, http.StatusOK},
		{"behind it, a hop that is not an address", "127.0.0.1/32", "/github", []string{"192.30.252.7, unknown"}, http.StatusForbidden},
		{"a trusted load balancer that names nobody is not the provider", "127.0.0.1/32", "/github", nil, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := storetest.Open(t, store.Options{PublishTimeout: time.Second})
			h, err := proxy.New(cfg, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			for p := range strings.SplitSeq(tc.trusted, ",") {
				if p != "" {
					h.TrustedProxies = append(h.TrustedProxies, netip.MustParsePrefix(p))
				}
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(`{"a":1}`))
			req.Header["X-Forwarded-For"] = tc.xff
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			s, err := st.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if stored := s.Messages == 1; stored != (tc.want == http.StatusOK) {
				t.Errorf("%d messages stored", s.Messages)
			}
		})
	}
}
