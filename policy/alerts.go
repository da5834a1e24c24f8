package policy

import (
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Alert defaults.
const (
	defaultAlertBatch      = time.Minute
	defaultAlertMaxPerHour = 30
	defaultAlertHeadroom   = 0.10
)

// Alerts is the optional top-level `alerts:` block: where jethook tells an
// operator, through another channel, that events were dead-lettered, a
// breaker opened, or the store refuses writes or runs short of room.
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
	// Headroom is the share of the store's limit (or disk) left below
	// which a notice says the store runs short of room, default 10 %
	// (0.10).
	Headroom float64
}

// alerts decodes the `alerts:` block; nil when it is absent or unusable.
func (d *decoder) alerts(e entry) *Alerts {
	m, ok := d.mapping(e.val, e.path, "url", "batch", "max_per_hour", "headroom")
	if !ok {
		return nil
	}
	a := &Alerts{Batch: defaultAlertBatch, MaxPerHour: defaultAlertMaxPerHour, Headroom: defaultAlertHeadroom}
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
	if h, ok := m["headroom"]; ok {
		if v, ok := d.percent(h); ok {
			a.Headroom = v
		}
	}
	return a
}

// percent decodes a share written "10%" (more than 0, less than 100) as
// a fraction (0.10).
func (d *decoder) percent(e entry) (float64, bool) {
	s, ok := d.str(e)
	if !ok {
		return 0, false
	}
	num, found := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !found || err != nil || !(v > 0 && v < 100) {
		d.failf(e.node(), e.path, "want a percentage above 0%% and below 100%%, like \"10%%\", got %q", s)
		return 0, false
	}
	return v / 100, true
}
