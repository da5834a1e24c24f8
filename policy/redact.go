package policy

import (
	"net/url"
	"strings"
)

// RedactURL returns a destination URL as it may be shown in an error, a
// log line, a status field or a page: scheme, host and path only. User
// info, query and fragment are dropped, since that is where credentials
// live (http://user:password@host/path?token=...). A string that does not
// parse as a URL is cut the same way by hand, so that an error about an
// invalid URL still says which one without quoting its secrets.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		safe := url.URL{Scheme: u.Scheme, Opaque: u.Opaque, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
		if safe.Opaque != "" {
			// mailto:user@host, host:port without a scheme: an opaque
			// part may hold anything.
			safe.Opaque = "…"
		}
		return safe.String()
	}
	s, _, _ := strings.Cut(raw, "#")
	s, _, _ = strings.Cut(s, "?")
	prefix := "" // "scheme://" or "//"
	if i := strings.Index(s, "//"); i >= 0 && !strings.Contains(s[:i], "/") {
		prefix, s = s[:i+2], s[i+2:]
	}
	authority, path, hasPath := strings.Cut(s, "/")
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if hasPath {
		return prefix + authority + "/" + path
	}
	return prefix + authority
}
