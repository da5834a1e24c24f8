package proxy

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/jethook/jethook/store"
)

// proxyHeaders are the headers by which a proxy tells the next hop who
// called, how and where (RFC 7239 and the X-Forwarded-* family). From a
// client outside TrustedProxies they are claims nobody checked, so they
// are not stored and never reach a backend; jethook's own X-Forwarded-For,
// -Proto and -Host replace them (forward.newRequest).
var proxyHeaders = []string{
	"Forwarded", "X-Real-Ip", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port",
	"X-Forwarded-Prefix", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Scheme",
	"X-Url-Scheme", "Front-End-Https", "X-Client-Ip", "True-Client-Ip", "X-Original-Url", "X-Rewrite-Url",
}

// vouch sets what env tells the backend of how the provider called, from
// evidence jethook can stand behind. A client in TrustedProxies is a load
// balancer: its X-Forwarded-Proto and -Host name the scheme and host
// (forwarded), and the headers it adds pass on. From any other client the
// scheme is what jethook saw, the host is PublicHost (none when it is not
// set: a client's Host says only what the client claims), and the
// client's proxyHeaders are dropped from the headers stored.
func (h *Handler) vouch(r *http.Request, env *store.Envelope) {
	if h.trusted(r.RemoteAddr) {
		if h.PublicHost != "" {
			env.Host = h.PublicHost
		}
		env.Proto, env.Host = forwarded(r.Header, env.Proto, env.Host)
		return
	}
	env.Host = h.PublicHost
	for _, name := range proxyHeaders {
		delete(env.Header, name)
	}
}

// client is the address of the client that sent r: the connection's
// address, or, from a client in TrustedProxies, the address the proxies
// in front saw, which is the last X-Forwarded-For entry that is not a
// trusted proxy itself (a client may put anything before it). ok is false
// when that entry is not an address.
func (h *Handler) client(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if !h.trusted(r.RemoteAddr) {
		return addr, true
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.Addr{}, false
		}
		addr = a.Unmap().WithZone("")
		if !h.trustedAddr(addr) {
			return addr, true
		}
	}
	return addr, true
}

// allowedSource reports whether r's client (client) is in one of ranges.
func (h *Handler) allowedSource(r *http.Request, ranges []netip.Prefix) bool {
	addr, ok := h.client(r)
	if !ok {
		return false
	}
	for _, p := range ranges {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
