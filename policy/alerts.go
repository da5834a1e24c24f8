package policy

import (
	"math"
	"net/url"
	"time"
)

// Alert defaults.
const (
	defaultAlertBatch      = time.Minute
	defaultAlertMaxPerHour = 30
)

// Alerts is the optional top-level `alerts:` block: where jethook tells an
// operator, through another channel, that events were dead-lettered or a
// breaker opened.
type Alerts struct {
	// URL receives each notice as a JSON POST with a Slack-compatible
	// "text" field. It usually holds a secret, so errors never print it.
	URL string
	// Batch is how long the notices of a burst are gathered into one
	// POST, default 1m.
	Batch time.Duration
	// MaxPerHour bounds the POSTs in any hour, default 30; what happens
	// past it is carried into the next notice allowed.
	MaxPerHour int
}

// alerts decodes the `alerts:` block; nil when it is absent or unusable.
func (d *decoder) alerts(e entry) *Alerts {
	m, ok := d.mapping(e.val, e.path, "url", "batch", "max_per_hour")
	if !ok {
		return nil
	}
	a := &Alerts{Batch: defaultAlertBatch, MaxPerHour: defaultAlertMaxPerHour}
	if u, ok := m["url"]; ok {
		if s, ok := d.str(u); ok {
			if p, err := url.Parse(s); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Hostname() == "" {
				// Never echo the value: an alert URL is a secret.
				d.failf(u.node(), u.path, "must be an absolute http or https URL with a host")
			} else {
				a.URL = s
			}
		}
	} else {
		d.failf(e.node(), join(e.path, "url"), "missing")
	}
	if b, ok := m["batch"]; ok {
		if v, ok := d.positive(b); ok {
			a.Batch = v
		}
	}
	if n, ok := m["max_per_hour"]; ok {
		if v, ok := d.integer(n, 1, math.MaxInt); ok {
			a.MaxPerHour = v
		}
	}
	return a
}
