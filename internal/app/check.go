package app

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
)

// Limits are what [Check] holds a configuration to besides the rules of
// its own file: the settings jethook runs with and what its store takes.
// A zero field checks nothing.
type Limits struct {
	// Retention is how long the store keeps a message
	// (JETHOOK_RETENTION): every retry must end before.
	Retention time.Duration
	// MaxInFlightBytes is the ingress's budget of bodies being read
	// (JETHOOK_MAX_INFLIGHT_BYTES): every route's max_body must fit.
	MaxInFlightBytes int64
	// MaxPayload is the NATS server's max_payload (store.Store.MaxPayload):
	// every route's largest body, with its headers, must fit.
	MaxPayload int64
	// Egress are the rules on the addresses jethook connects to; nil is
	// egress.Default().
	Egress *egress.Rules
}

// headerRoom is what a stored message may need beyond its body for the
// original headers and jethook's own.
const headerRoom = 256 << 10

// Check runs every rule a configuration must pass before jethook serves
// it, beyond those policy.Load applies as it reads the file (which build
// each route's provider to check its settings): the limits l, and that
// each client certificate loads. `jethook check`, New and Reload run it,
// so a file check passes, serve starts and a reload takes alike. Each
// error names the file, the route's line and the key at fault; all of
// them are returned, one per line, so that one run shows every fix.
func Check(cfg *policy.Config, l Limits) error {
	var errs []error
	if maxAge := cfg.MaxAge(); l.Retention > 0 && maxAge >= l.Retention {
		errs = append(errs, fmt.Errorf("%s: a route's retry max_age (%s) must be shorter than JETHOOK_RETENTION (%s), or messages would expire while still being retried", cfg.File, maxAge, l.Retention))
	}
	rules := cmp.Or(l.Egress, egress.Default())
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			if err := checkEgress(rules, d); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: route %q destination %q: %w", cfg.File, r.Line, r.Name, d.Name, err))
			}
		}
		if l.MaxInFlightBytes > 0 && r.MaxBody > l.MaxInFlightBytes {
			errs = append(errs, fmt.Errorf("%s:%d: route %q: max_body %d is more than JETHOOK_MAX_INFLIGHT_BYTES (%d): a body that large would never find room and always get 503", cfg.File, r.Line, r.Name, r.MaxBody, l.MaxInFlightBytes))
		}
		if l.MaxPayload > 0 && r.MaxBody+headerRoom > l.MaxPayload {
			errs = append(errs, fmt.Errorf("%s:%d: route %q: max_body %d is more than the NATS server's max_payload (%d) allows", cfg.File, r.Line, r.Name, r.MaxBody, l.MaxPayload))
		}
	}
	return errors.Join(append(errs, forward.CheckTLS(cfg))...)
}

// checkEgress refuses a destination whose URL, or OAuth2 token URL, names
// an address the egress rules refuse. A name is checked at every
// connection instead, whatever it resolves to then (jethook check also
// resolves it once).
func checkEgress(rules *egress.Rules, d policy.Destination) error {
	for key, raw := range d.URLs() {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := rules.Check(ip); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}
