package proxy

import (
	"net/http"

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
