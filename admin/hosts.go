package admin

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// allowedHost reports whether a request's Host names this listener: an IP
// address, localhost (or a name under .localhost, RFC 6761 §6.3), one of
// names, or nothing (HTTP/1.0). A web page that rebinds its own name to
// 127.0.0.1 (DNS rebinding) still sends that name as the Host, so it
// cannot read the API or the dashboard, nor spend the login budget. An IP
// address is allowed as it is, since no rebinding sends one.
func allowedHost(host string, names []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return true
	}
	for _, n := range names {
		if strings.EqualFold(strings.TrimSuffix(n, "."), host) {
			return true
		}
	}
	return false
}

// checkHost reports whether r's Host is allowed (allowedHost); when it is
// not, it has answered 421 Misdirected Request (RFC 9110 §15.5.20).
func (h *Handler) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if allowedHost(r.Host, h.Hosts) {
		return true
	}
	writeError(w, http.StatusMisdirectedRequest, "unknown_host",
		"this admin listener does not answer to the host "+r.Host+": use its address or localhost, or list the name in JETHOOK_ADMIN_HOSTS")
	return false
}
