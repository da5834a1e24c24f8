package policy

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// parseDuration parses Go duration syntax ("2s", "1h30m") extended with a
// "d" unit of 24 hours ("3d", "1d12h"). Negative durations are rejected.
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("invalid duration %q", s)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	if strings.ContainsRune(s, 'd') {
		var err error
		if s, err = daysToHours(s); err != nil {
			return 0, bad
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}

// daysToHours rewrites each "<number>d" term of a duration as hours, leaving
// the other terms for time.ParseDuration.
func daysToHours(s string) (string, error) {
	var b strings.Builder
	for s != "" {
		i := 0
		for i < len(s) && (s[i] == '.' || s[i] >= '0' && s[i] <= '9') {
			i++
		}
		j := i
		for j < len(s) && s[j] != '.' && (s[j] < '0' || s[j] > '9') {
			j++
		}
		num, unit := s[:i], s[i:j]
		if num == "" || unit == "" {
			return "", fmt.Errorf("malformed")
		}
		if unit == "d" {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v*24 > float64(math.MaxInt64/int64(time.Hour)) {
				return "", fmt.Errorf("malformed")
			}
			num, unit = strconv.FormatFloat(v*24, 'f', -1, 64), "h"
		}
		b.WriteString(num)
		b.WriteString(unit)
		s = s[j:]
	}
	return b.String(), nil
}

// parseRate parses "N/s", "N/m" or "N/h" into events per second.
func parseRate(s string) (float64, error) {
	bad := fmt.Errorf("invalid rate %q: want N/s, N/m or N/h, e.g. \"50/s\"", s)
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, bad
	}
	num, per = strings.TrimSpace(num), strings.TrimSpace(per)
	if !isDecimal(num) {
		return 0, bad
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, bad
	}
	switch per {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, bad
}

// isDecimal reports whether s is a plain decimal number such as "50" or
// "0.5" (no sign, exponent, hex, NaN or Inf, which strconv would accept).
func isDecimal(s string) bool {
	digits := 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c != '.':
			return false
		}
	}
	return digits > 0 && strings.Count(s, ".") <= 1
}

// parseStatus parses one retry_on entry: a code 400–599 or a class "4xx"/"5xx".
func parseStatus(s string) (StatusMatch, error) {
	if len(s) == 3 && strings.EqualFold(s[1:], "xx") && (s[0] == '4' || s[0] == '5') {
		return StatusMatch{Class: int(s[0] - '0')}, nil
	}
	code, err := strconv.Atoi(s)
	if err != nil {
		return StatusMatch{}, fmt.Errorf("invalid status %q: want a code like 429 or a class like \"5xx\"", s)
	}
	if code < 400 || code > 599 {
		return StatusMatch{}, fmt.Errorf("status %d is not an error status (want 400-599)", code)
	}
	return StatusMatch{Code: code}, nil
}

// validName reports whether s matches [A-Za-z0-9_-]+. Names become NATS
// subject tokens and consumer names, so ".", "*", ">" and spaces must never
// get through.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// checkPath validates a route path: absolute, no spaces or control
// characters, no query or fragment, no braces (http.ServeMux wildcards), and
// already clean, since http.ServeMux redirects unclean paths away.
// PullPrefix is where the public listener serves pull destinations
// (docs/pull.md); no route may take a path under it.
const PullPrefix = "/v1/pull/"

func checkPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q must start with \"/\"", p)
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("path %q must not contain spaces or control characters", p)
	case strings.ContainsAny(p, "?#"):
		return fmt.Errorf("path %q must not contain \"?\" or \"#\"", p)
	case strings.ContainsAny(p, "{}"):
		return fmt.Errorf("path %q must not contain \"{\" or \"}\"", p)
	case strings.HasPrefix(p, PullPrefix):
		return fmt.Errorf("path %q is under %s, where clients fetch from pull destinations", p, PullPrefix)
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p {
		return fmt.Errorf("path %q is not clean (want %q)", p, clean)
	}
	return nil
}

// checkURL validates a destination URL: absolute http or https with a
// host. Its errors quote the URL redacted (RedactURL): a config error is
// printed and logged, and the URL may hold a credential.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("invalid URL %q", RedactURL(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q must be absolute http or https", RedactURL(s))
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("URL %q has no host", RedactURL(s))
	}
	return nil
}

// httpMethods are the methods a route may accept.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// validHeader reports whether s is an HTTP field name (an RFC 9110 token).
func validHeader(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// validWhsec reports whether s has the Standard Webhooks secret form
// "whsec_<base64>" with a non-empty key.
func validWhsec(s string) bool {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok || b64 == "" {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	return err == nil && len(key) > 0
}
