// Package policy owns policies.yaml: the model of routes, destinations and
// retry policies, its strict loading (unknown keys are errors, and every
// error names file, line and key), defaults and validation. It also holds
// the pure retry math — backoff, jitter, when to give up, the published
// schedule — which takes numbers and returns durations, with no clock and no
// I/O.
package policy

import (
	"fmt"
	"iter"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jethook/jethook/provider"
)

// Config is a loaded, validated policies.yaml with defaults applied.
type Config struct {
	File     string // path it was loaded from, for messages
	Defaults Defaults
	Routes   []Route
	Alerts   *Alerts // the `alerts:` block; nil when absent

	warnings []string // found while decoding (Warnings)
}

// Defaults holds the `defaults:` block, which every route inherits.
type Defaults struct {
	Retry   Retry         // merged over DefaultRetry
	Timeout time.Duration // per-attempt timeout, default 10s
}

// Route is one inbound webhook path and where its events go.
type Route struct {
	// Name identifies the route; [A-Za-z0-9_-]+, since it becomes a NATS
	// subject token (webhooks.<name>).
	Name string
	// Path is the URL path the provider posts to: it starts with "/", has no
	// spaces, "?" or "#", and is unique across routes.
	Path string
	// Methods are the accepted HTTP methods, upper-case; the default is
	// the provider's ([provider.Info].Methods): ["POST"], or ["GET",
	// "POST"] for senders whose handshake is a GET (meta, okta).
	Methods []string
	// MaxBody is the largest accepted body in bytes, default 5 MiB. YAML
	// takes an integer or a size such as "512KiB", "5MiB", "1MB".
	MaxBody int64
	// Provider is how requests are verified: none (default) or a preset
	// name of [provider.Names].
	Provider string
	// Secrets are the verification secrets, from YAML `secret` and
	// `secrets` merged, in that order; several allow rotation.
	Secrets []string
	// Tolerance is how old a signature timestamp may be; the default is
	// the provider's recommendation, else 5m.
	Tolerance time.Duration
	// PublicURL is the URL the sender calls, for providers that sign it.
	PublicURL string
	// VerifyToken is what a subscription handshake must present (meta).
	VerifyToken string
	// SigningSecret is the "whsec_<base64>" key of the signature a
	// token provider adds (gitlab's signing token); when set, requests
	// must carry that signature as well as the token.
	SigningSecret string
	// HMAC describes the signature of provider hmac.
	HMAC HMAC
	// Signature declares the signature of provider signature.
	Signature provider.Scheme
	// Retry is the route's `retry:` block merged field by field over
	// defaults.retry.
	Retry Retry
	// Timeout is the route's per-attempt timeout, default defaults.timeout.
	Timeout time.Duration
	// Destinations are the backends each event is delivered to; at least
	// one, names unique within the route.
	Destinations []Destination
	// AllowSources, when set, are the only client addresses the route
	// accepts webhooks from (after JETHOOK_TRUSTED_PROXIES): a provider's
	// published ranges. Any other client gets 403 and nothing is stored.
	AllowSources []netip.Prefix
	// CatchUp asks the provider for the events jethook missed; nil when
	// the route has no `catch_up:` block (docs/catch-up.md).
	CatchUp *CatchUp
	// Line is the line of the route in the file.
	Line int
}

// HMAC describes a generic HMAC signature over the raw body, for provider
// hmac.
type HMAC struct {
	Header    string // header carrying the signature; required
	Algorithm string // sha1, sha256 (default) or sha512
	Encoding  string // hex (default) or base64
	Prefix    string // stripped before decoding, e.g. "sha256="
	IDHeader  string // optional header carrying the event id
}

// Destination is one backend a route delivers to. Each has its own consumer,
// schedule state and dead letters.
type Destination struct {
	Name        string        // [A-Za-z0-9_-]+
	URL         string        // absolute http or https URL with a host; empty for a pull destination
	Filter      string        // CEL expression an event must match to be sent here (package filter); empty: every event
	Transform   *Transform    // JavaScript that reshapes each delivery's request; nil: sent as stored
	Order       *Order        // YAML `order: {key: <CEL>, max_blocked: 1h}`: one event per key at a time; nil: unordered
	Timeout     time.Duration // per-attempt timeout, default the route's
	Concurrency int           // most requests in flight, default 8, at least 1: a ceiling
	Rate        Rate          // YAML `rate: 50/s` (or /m, /h) and `burst: 10`; zero is unlimited: a ceiling
	Resign      *Resign       // re-signing for the backend, nil if absent
	Auth        *Auth         // how jethook authenticates to the backend, nil if absent
	Breaker     Breaker       // YAML `breaker: {failures: 5, cooldown: 5s}`
	// SlowStart is YAML `slow_start`, default 30s. 0 turns the learned
	// limit off (only Concurrency and Rate bound the load, and a breaker
	// that closes lets them through at once); any other value keeps it on.
	SlowStart time.Duration
	// Pull makes this a destination that a client fetches from
	// (docs/pull.md) instead of one jethook calls; nil for a push
	// destination.
	Pull *Pull
}

// URLs are the URLs jethook connects to for d, under their keys: "url",
// and "auth.oauth2.token_url" when it fetches OAuth2 tokens.
func (d Destination) URLs() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !yield("url", d.URL) {
			return
		}
		if d.Auth != nil && d.Auth.OAuth2 != nil {
			yield("auth.oauth2.token_url", d.Auth.OAuth2.TokenURL)
		}
	}
}

// Pull is a pull destination's YAML `pull: {token: ...}` block.
type Pull struct {
	// Token is the bearer token that may pull and settle this destination's
	// webhooks, and nothing else; at least MinPullToken characters, from
	// the environment like a secret (`token: ${LAPTOP_PULL_TOKEN}`).
	Token string
}

// MinPullToken is the shortest pull token policies.yaml takes. A pull token
// is checked on the public listener without a lockout (one would let
// anyone stop every listener), so its length is what makes it unguessable.
const MinPullToken = 32

// Breaker stops deliveries to a destination that delivers nothing: when
// Failures events' first attempts failed since its latest delivery, which
// is a while ago (ten of its usual gaps between deliveries, at least a
// second), or when Failures attempts in a row reached no backend
// (connection refused, DNS, TLS). While open, one probe at a time goes
// about each second, the wait growing with the time down up to Cooldown
// for probes the backend answers; the first probe it answers with
// anything but a sign of being down closes it.
type Breaker struct {
	Failures int           // default 5; 0 means no breaker
	Cooldown time.Duration // default 5s: the longest wait between probes of a down destination
}

// Rate is a token-bucket limit on requests to a destination.
type Rate struct {
	PerSecond float64 // 0 means unlimited
	// Burst is how many requests may go at once after an idle spell,
	// default max(1, PerSecond/20): a backend then never sees more than
	// 1.05 × the rate in any second.
	Burst int
}

// Resign makes jethook sign each delivery itself, so a backend can trust a
// late retry whose provider signature timestamp has gone stale.
type Resign struct {
	Scheme string // "standard-webhooks" (default, the only one for now)
	// Secrets are "whsec_<base64>" keys, from YAML `secret` and `secrets`
	// merged, in that order. Each signs every attempt: two during a key
	// change, so the backend verifies with either.
	Secrets []Secret
}

// Load reads the policies file at path, expands ${VAR} from the process
// environment and parses it with Parse.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse decodes and validates a policies file. file names it in errors.
// ${VAR} in a scalar value is replaced by lookup(VAR) after the YAML is
// parsed, so a value cannot add structure; "$${" is a literal "${"; an unset
// variable is an error. A nil lookup has no variables. Errors are *Error
// values, several joined with errors.Join.
func Parse(file string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	d := &decoder{file: file, lookup: lookup, seen: map[Error]bool{}}
	cfg := &Config{File: file}
	if root := d.document(data); root != nil {
		d.config(cfg, root)
	} else if len(d.errs) == 0 {
		d.failf(nil, "routes", "at least one route is required (the file is empty)")
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	cfg.warnings = d.warns
	return cfg, nil
}

// Route returns the route called name.
func (c *Config) Route(name string) (*Route, bool) {
	for i := range c.Routes {
		if c.Routes[i].Name == name {
			return &c.Routes[i], true
		}
	}
	return nil, false
}

// MaxAge returns the largest retry max_age across routes. The stream's
// retention must exceed it, or events would expire while still being
// retried.
func (c *Config) MaxAge() time.Duration {
	var m time.Duration
	for _, r := range c.Routes {
		m = max(m, r.Retry.MaxAge)
	}
	return m
}

// Warnings lists what is valid but probably unsafe or a mistake, one line
// each in the form "<file>:<line>: route "<name>": ...": retry settings a
// route sets that its backoff does not use, routes that verify nothing,
// and timestamp-signed routes whose retries outlive the signature without
// resign.
func (c *Config) Warnings() []string {
	w := slices.Clone(c.warnings)
	for _, r := range c.Routes {
		at := fmt.Sprintf("%s:%d: route %q", c.File, r.Line, r.Name)
		unverified := r.Provider == provider.NameNone || r.Provider == ""
		if unverified {
			w = append(w, at+": provider none: requests are not verified; unsafe on a public URL")
		}
		// A token is the secret itself and signs nothing: that is the
		// sender's scheme, not a mistake in the template.
		if r.Provider == provider.NameSignature && !strings.EqualFold(r.Signature.Algorithm, "token") && !r.Signature.SignsBody() {
			w = append(w, at+": signature.signed has no {body}: the signature does not cover the body, so anyone who has seen one signed request can send any body under it")
		}
		for _, dst := range r.Destinations {
			if unverified && dst.Resign != nil {
				w = append(w, fmt.Sprintf("%s: destination %q: resign on provider none: jethook signs whatever anyone sends to this route, so the backend trusts requests nobody verified", at, dst.Name))
			}
		}
		if c := r.CatchUp; c != nil && c.Stripe != nil && len(c.Stripe.Events) == 0 {
			w = append(w, at+": catch_up.stripe has no events list, so events of every type are caught up; list the endpoint's events, or [\"*\"] if it takes all")
		}
		if !r.timestamped() || r.Retry.MaxAge <= r.Tolerance {
			continue
		}
		for _, dst := range r.Destinations {
			if dst.Resign == nil {
				w = append(w, fmt.Sprintf("%s: destination %q: provider %s signatures expire after %v but retries run for up to %v; set resign if the backend verifies them",
					at, dst.Name, r.Provider, r.Tolerance, r.Retry.MaxAge))
			}
		}
	}
	return w
}

// timestamped reports whether r's signatures carry a timestamp and go stale
// after Tolerance.
func (r *Route) timestamped() bool {
	if r.SigningSecret != "" {
		return true
	}
	if r.Provider == provider.NameSignature {
		s := r.Signature
		return s.TimestampKey != "" || s.TimestampHeader != "" || s.TimestampJSON != ""
	}
	info, _ := provider.Lookup(r.Provider)
	return info.Tolerance > 0
}
