package proxy

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestATrustedProxysForwardedHeadersNameTheSchemeAndHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		header              http.Header
		wantProto, wantHost string
	}{
		{"the proxy's values", http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"hooks.example.com"}}, "https", "hooks.example.com"},
		{"the entry the proxy appended, not the client's before it",
			http.Header{"X-Forwarded-Proto": {"http, HTTPS"}, "X-Forwarded-Host": {"forged.example", "hooks.example.com"}}, "https", "hooks.example.com"},
		{"none keeps jethook's own", http.Header{}, "http", "own:8080"},
		{"a scheme that is not http or https keeps jethook's", http.Header{"X-Forwarded-Proto": {"gopher"}}, "http", "own:8080"},
		{"a host with a space or control character keeps jethook's", http.Header{"X-Forwarded-Host": {"a b\x01"}}, "http", "own:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if proto, host := forwarded(tc.header, "http", "own:8080"); proto != tc.wantProto || host != tc.wantHost {
				t.Errorf("forwarded = %q, %q; want %q, %q", proto, host, tc.wantProto, tc.wantHost)
			}
		})
	}
	h := &Handler{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for remote, want := range map[string]bool{"10.1.2.3:443": true, "[::1]:80": true, "[::ffff:10.0.0.1]:80": true,
		"192.0.2.1:443": false, "not an address": false} {
		if got := h.trusted(remote); got != want {
			t.Errorf("trusted(%q) = %v, want %v", remote, got, want)
		}
	}
}
