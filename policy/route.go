package policy

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jethook/jethook/internal/size"
	"github.com/jethook/jethook/provider"
)

// Route and destination defaults.
const (
	defaultTimeout     = 10 * time.Second
	defaultMaxBody     = 5 << 20
	defaultTolerance   = 5 * time.Minute
	defaultConcurrency = 8
	defaultFailures    = 5
	defaultCooldown    = 5 * time.Second
	defaultSlowStart   = 30 * time.Second
)

// config decodes the top-level mapping into cfg.
func (d *decoder) config(cfg *Config, root *yaml.Node) {
	top, ok := d.mapping(root, "", "defaults", "routes", "alerts")
	if !ok {
		return
	}
	if e, ok := top["alerts"]; ok {
		cfg.Alerts = d.alerts(e)
	}
	cfg.Defaults = Defaults{Retry: DefaultRetry(), Timeout: defaultTimeout}
	var defSpec retrySpec
	if e, ok := top["defaults"]; ok {
		if m, ok := d.mapping(e.val, e.path, "retry", "timeout"); ok {
			if r, ok := m["retry"]; ok {
				defSpec = d.retrySpec(r.val, r.path)
			}
			if t, ok := m["timeout"]; ok {
				if v, ok := d.positive(t); ok {
					cfg.Defaults.Timeout = v
				}
			}
		}
		cfg.Defaults.Retry = d.retry(e.key, join(e.path, "retry"), defSpec)
	}

	e, ok := top["routes"]
	if !ok {
		d.failf(root, "routes", "missing; at least one route is required")
		return
	}
	items, ok := d.list(e)
	if !ok {
		return
	}
	if len(items) == 0 {
		d.failf(e.node(), e.path, "at least one route is required")
		return
	}
	type first struct {
		route string
		line  int
	}
	names, paths := map[string]first{}, map[string]first{}
	// queues holds each route × destination under the name of its
	// durable consumer, <route>__<destination> (store.ConsumerName).
	type queue struct {
		route, dest string
		line        int
	}
	queues := map[string]queue{}
	tokens := map[string]queue{} // a pull token reaches one destination
	for _, it := range items {
		r, name, path, ok := d.route(it, cfg.Defaults, defSpec)
		if !ok {
			continue
		}
		if f, dup := names[r.Name]; r.Name != "" && dup {
			d.failf(name.node(), name.path, "duplicate route name %q (first at line %d)", r.Name, f.line)
		} else if r.Name != "" {
			names[r.Name] = first{r.Name, name.node().Line}
			for _, dst := range r.Destinations {
				key := r.Name + "__" + dst.Name
				if q, dup := queues[key]; dup {
					d.failf(name.node(), name.path, "route %q destination %q and route %q destination %q (line %d) would share one queue, %q; rename one",
						r.Name, dst.Name, q.route, q.dest, q.line, key)
					continue
				}
				queues[key] = queue{r.Name, dst.Name, name.node().Line}
				if dst.Pull == nil || dst.Pull.Token == "" {
					continue
				}
				if q, dup := tokens[dst.Pull.Token]; dup {
					d.failf(name.node(), name.path, "route %q destination %q has the pull token of route %q destination %q (line %d); each pull destination needs its own",
						r.Name, dst.Name, q.route, q.dest, q.line)
					continue
				}
				tokens[dst.Pull.Token] = queue{r.Name, dst.Name, name.node().Line}
			}
		}
		if f, dup := paths[r.Path]; r.Path != "" && dup {
			d.failf(path.node(), path.path, "duplicate path %q (first used by route %q at line %d)", r.Path, f.route, f.line)
		} else if r.Path != "" {
			paths[r.Path] = first{r.Name, path.node().Line}
		}
		cfg.Routes = append(cfg.Routes, r)
	}
}

// route decodes one item of `routes`. It returns the name and path entries
// for the duplicate checks, with Name or Path left empty when unusable; ok
// is false when the item is not a mapping.
func (d *decoder) route(it entry, def Defaults, defSpec retrySpec) (r Route, name, path entry, ok bool) {
	n := d.resolve(it.val, it.path)
	m, ok := d.mapping(n, it.path, "name", "path", "methods", "max_body", "provider", "secret", "secrets",
		"tolerance", "hmac", "signature", "public_url", "verify_token", "signing_secret", "retry", "timeout", "destinations", "catch_up",
		"allow_sources")
	if !ok {
		return r, name, path, false
	}
	r = Route{
		MaxBody:  defaultMaxBody,
		Provider: provider.NameNone,
		Timeout:  def.Timeout,
		Line:     n.Line,
	}
	required := func(key string) (entry, bool) {
		e, ok := m[key]
		if !ok {
			d.failf(n, join(it.path, key), "missing")
		}
		return e, ok
	}
	if name, ok = required("name"); ok {
		r.Name, _ = d.name(name)
	}
	if path, ok = required("path"); ok {
		if p, ok := d.str(path); ok {
			if err := checkPath(p); err != nil {
				d.failf(path.node(), path.path, "%v", err)
			} else {
				r.Path = p
			}
		}
	}
	if e, ok := m["max_body"]; ok {
		if s, ok := d.str(e); ok {
			if v, err := size.Parse(s); err != nil {
				d.failf(e.node(), e.path, "%v", err)
			} else {
				r.MaxBody = v
			}
		}
	}
	if e, ok := m["provider"]; ok {
		if v, ok := d.oneOf(e, "provider", provider.Names()...); ok {
			r.Provider = v
		}
	}
	// A preset's handshake may be a GET (meta, okta), and it may
	// recommend its own tolerance (twitch 10m, linear 1m).
	info, _ := provider.Lookup(r.Provider)
	r.Methods = info.Methods
	if e, ok := m["methods"]; ok {
		r.Methods = d.methods(e)
	}
	r.Tolerance = cmp.Or(info.Tolerance, defaultTolerance)
	var secrets []entry
	r.Secrets, secrets = d.secrets(m)
	if e, ok := m["tolerance"]; ok {
		if v, ok := d.positive(e); ok {
			r.Tolerance = v
		}
	}
	if e, ok := m["timeout"]; ok {
		if v, ok := d.positive(e); ok {
			r.Timeout = v
		}
	}
	d.provider(&r, n, it.path, m, secrets)
	if e, ok := m["catch_up"]; ok {
		r.CatchUp = d.catchUp(e, r.Provider)
	}
	if e, ok := m["allow_sources"]; ok {
		r.AllowSources = d.allowSources(e)
	}

	var spec retrySpec
	if e, ok := m["retry"]; ok {
		spec = d.retrySpec(e.val, e.path)
	}
	r.Retry = d.retry(n, join(it.path, "retry"), defSpec, spec)
	d.unused(r.Name, r.Retry, spec)

	if e, ok := required("destinations"); ok {
		r.Destinations = d.destinations(e, r.Timeout, r.MaxBody, r.Provider)
	}
	return r, name, path, true
}

// methods decodes a route's `methods` list.
func (d *decoder) methods(e entry) []string {
	items, ok := d.list(e)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.failf(e.node(), e.path, "at least one method is required")
		return nil
	}
	var out []string
	for _, it := range items {
		s, ok := d.str(it)
		if !ok {
			continue
		}
		m := strings.ToUpper(s)
		switch {
		case !slices.Contains(httpMethods, m):
			d.failf(it.node(), it.path, "unknown HTTP method %q (want one of %s)", s, quoteList(httpMethods))
		case slices.Contains(out, m):
			d.failf(it.node(), it.path, "duplicate method %q", m)
		default:
			out = append(out, m)
		}
	}
	return out
}

// secrets merges `secret` and `secrets`, in that order, and returns their
// entries for messages. Messages never quote a secret.
func (d *decoder) secrets(m map[string]entry) ([]string, []entry) {
	var items []entry
	if e, ok := m["secret"]; ok {
		items = append(items, e)
	}
	if e, ok := m["secrets"]; ok {
		list, _ := d.list(e)
		items = append(items, list...)
	}
	var out []string
	var kept []entry
	for _, it := range items {
		s, ok := d.str(it)
		switch {
		case !ok:
		case s == "":
			d.failf(it.node(), it.path, "secret is empty")
		case slices.Contains(out, s):
			d.failf(it.node(), it.path, "secret is listed twice")
		default:
			out = append(out, s)
			kept = append(kept, it)
		}
	}
	return out, kept
}

// provider checks that r's secrets and keys fit its provider, decodes the
// `hmac:` and `signature:` blocks, and builds the verifier once so that
// what it refuses is reported here, at the key's line.
func (d *decoder) provider(r *Route, n *yaml.Node, path string, m map[string]entry, secrets []entry) {
	before := len(d.errs)
	switch {
	case r.Provider == provider.NameNone && len(r.Secrets) > 0:
		d.failf(n, join(path, "provider"), "a secret is set but provider is none, so requests would not be verified; set provider")
	case r.Provider != provider.NameNone && len(r.Secrets) == 0:
		if _, written := m["secret"]; !written {
			if _, written := m["secrets"]; !written {
				d.failf(n, join(path, "secret"), "provider %s requires a secret", r.Provider)
			}
		}
	}
	info, known := provider.Lookup(r.Provider)
	if !known {
		return
	}
	urlEntry, hasURL := m["public_url"]
	if hasURL {
		r.PublicURL, _ = d.str(urlEntry)
	}
	switch {
	case info.PublicURL && !hasURL:
		d.failf(n, join(path, "public_url"), "provider %s signs the URL it calls; set public_url to that URL (scheme, host and path)", r.Provider)
	case !info.PublicURL && hasURL && r.Provider != provider.NameSignature:
		d.failf(urlEntry.key, urlEntry.path, "provider %s does not sign the URL; remove public_url", r.Provider)
	}
	tokenEntry, hasToken := m["verify_token"]
	if hasToken {
		r.VerifyToken, _ = d.str(tokenEntry)
	}
	switch {
	case info.VerifyToken && !hasToken:
		d.failf(n, join(path, "verify_token"), "provider %s requires verify_token, the token its subscription handshake presents", r.Provider)
	case info.VerifyToken && r.VerifyToken == "":
		d.failf(tokenEntry.node(), tokenEntry.path, "verify_token is empty")
	case !info.VerifyToken && hasToken:
		d.failf(tokenEntry.key, tokenEntry.path, "provider %s has no subscription handshake; remove verify_token", r.Provider)
	}
	signingEntry, hasSigning := m["signing_secret"]
	if hasSigning {
		r.SigningSecret, _ = d.str(signingEntry)
	}
	switch {
	case hasSigning && !info.SigningSecret:
		d.failf(signingEntry.key, signingEntry.path, "provider %s signs with its secret and takes no signing_secret; remove it", r.Provider)
	case hasSigning && r.SigningSecret == "":
		d.failf(signingEntry.node(), signingEntry.path, "signing_secret is empty")
	}
	d.hmac(r, n, path, m)
	d.signature(r, n, path, m)
	if len(r.Secrets) == 0 || r.Provider == provider.NameNone || len(d.errs) > before {
		return
	}
	// Each secret alone, so that an unusable one is reported at its line.
	for i, sec := range r.Secrets {
		_, err := provider.New(r.providerConfig([]string{sec}))
		ce, ok := errors.AsType[*provider.ConfigError](err)
		if !ok {
			continue
		}
		at, key := n, join(path, "provider")
		switch e, block := m["signature"]; {
		case ce.Key == "secret":
			at, key = secrets[i].node(), secrets[i].path
		case ce.Key == "public_url" && hasURL:
			at, key = urlEntry.node(), urlEntry.path
		case ce.Key == "signing_secret" && hasSigning:
			d.failf(signingEntry.node(), signingEntry.path, "provider %s: %v", ce.Provider, ce.Err)
			return
		case ce.Key == "scheme" && block:
			at, key = e.node(), e.path
		}
		d.failf(at, key, "provider %s: %v", ce.Provider, ce.Err)
	}
}

// providerConfig is the provider.Config of r with secrets.
func (r *Route) providerConfig(secrets []string) provider.Config {
	return provider.Config{
		Name:          r.Provider,
		Secrets:       secrets,
		Tolerance:     r.Tolerance,
		PublicURL:     r.PublicURL,
		VerifyToken:   r.VerifyToken,
		SigningSecret: r.SigningSecret,
		HMAC:          provider.HMAC(r.HMAC),
		Scheme:        r.Signature,
	}
}

// ProviderConfig is the configuration of r's verifier.
func (r *Route) ProviderConfig() provider.Config { return r.providerConfig(r.Secrets) }

// hmac decodes the `hmac:` block of provider hmac.
func (d *decoder) hmac(r *Route, n *yaml.Node, path string, m map[string]entry) {
	e, ok := m["hmac"]
	if r.Provider != provider.NameHMAC {
		if ok {
			d.failf(e.key, e.path, "hmac block requires provider hmac")
		}
		return
	}
	r.HMAC = HMAC{Algorithm: "sha256", Encoding: "hex"}
	if !ok {
		d.failf(n, join(path, "hmac.header"), "provider hmac requires hmac.header")
		return
	}
	hm, ok := d.mapping(e.val, e.path, "header", "algorithm", "encoding", "prefix", "id_header")
	if !ok {
		return
	}
	if _, ok := hm["header"]; !ok {
		d.failf(e.node(), join(e.path, "header"), "provider hmac requires hmac.header")
	}
	r.HMAC.Header = d.header(hm, "header")
	r.HMAC.IDHeader = d.header(hm, "id_header")
	if a, ok := hm["algorithm"]; ok {
		if v, ok := d.oneOf(a, "algorithm", "sha1", "sha256", "sha512"); ok {
			r.HMAC.Algorithm = v
		}
	}
	if c, ok := hm["encoding"]; ok {
		if v, ok := d.oneOf(c, "encoding", "hex", "base64"); ok {
			r.HMAC.Encoding = v
		}
	}
	if p, ok := hm["prefix"]; ok {
		r.HMAC.Prefix, _ = d.str(p)
	}
}

// header decodes the header name at m[key], "" when absent.
func (d *decoder) header(m map[string]entry, key string) string {
	h, ok := m[key]
	if !ok {
		return ""
	}
	s, ok := d.str(h)
	if ok && !validHeader(s) {
		d.failf(h.node(), h.path, "invalid header name %q", s)
	}
	return s
}

// signature decodes the `signature:` block of provider signature.
func (d *decoder) signature(r *Route, n *yaml.Node, path string, m map[string]entry) {
	e, ok := m["signature"]
	if r.Provider != provider.NameSignature {
		if ok {
			d.failf(e.key, e.path, "signature block requires provider signature")
		}
		return
	}
	if !ok {
		d.failf(n, join(path, "signature.header"), "provider signature requires a signature block with at least header")
		return
	}
	sm, ok := d.mapping(e.val, e.path, "header", "prefix", "separator", "assign", "signature_key", "timestamp_key",
		"timestamp_header", "timestamp_json", "timestamp_format", "signature_json", "signed", "algorithm", "encoding",
		"secret_encoding", "id_header", "id_json")
	if !ok {
		return
	}
	s := &r.Signature
	if h := d.header(sm, "header"); h != "" {
		s.Headers = []string{h}
	}
	if h := d.header(sm, "id_header"); h != "" {
		s.IDHeaders = []string{h}
	}
	s.TimestampHeader = d.header(sm, "timestamp_header")
	text := func(key string, to *string) {
		if v, ok := sm[key]; ok {
			*to, _ = d.str(v)
		}
	}
	text("prefix", &s.Prefix)
	text("separator", &s.Separator)
	text("assign", &s.Assign)
	text("signature_key", &s.SignatureKey)
	text("timestamp_key", &s.TimestampKey)
	text("timestamp_json", &s.TimestampJSON)
	text("signature_json", &s.SignatureJSON)
	text("signed", &s.Signed)
	text("id_json", &s.IDJSON)
	choice := func(key string, to *string, choices ...string) {
		if v, ok := sm[key]; ok {
			*to, _ = d.oneOf(v, key, choices...)
		}
	}
	choice("timestamp_format", &s.TimestampFormat, "unix", "unix_ms", "rfc3339")
	choice("algorithm", &s.Algorithm, "sha1", "sha256", "sha512", "token")
	choice("encoding", &s.Encoding, "hex", "base64", "plain")
	choice("secret_encoding", &s.SecretEncoding, "raw", "base64")
	if _, ok := sm["header"]; !ok && s.SignatureJSON == "" {
		d.failf(e.node(), join(e.path, "header"), "missing; name the header that carries the signature")
	}
	if _, ok := m["tolerance"]; !ok && s.TimestampKey == "" && s.TimestampHeader == "" && s.TimestampJSON == "" {
		r.Tolerance = defaultTolerance
	}
}

// destinations decodes a route's `destinations` list; timeout, maxBody
// and provider are the route's.
func (d *decoder) destinations(e entry, timeout time.Duration, maxBody int64, provider string) []Destination {
	items, ok := d.list(e)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.failf(e.node(), e.path, "at least one destination is required")
		return nil
	}
	var out []Destination
	lines := map[string]int{}
	for _, it := range items {
		dst, name, ok := d.destination(it, timeout, maxBody, provider)
		if !ok {
			continue
		}
		if line, dup := lines[dst.Name]; dup {
			d.failf(name.node(), name.path, "duplicate destination name %q (first at line %d)", dst.Name, line)
			continue
		}
		lines[dst.Name] = name.node().Line
		out = append(out, dst)
	}
	return out
}

// destination decodes one item of `destinations`.
func (d *decoder) destination(it entry, timeout time.Duration, maxBody int64, provider string) (dst Destination, name entry, ok bool) {
	n := d.resolve(it.val, it.path)
	m, ok := d.mapping(n, it.path, "name", "url", "timeout", "concurrency", "rate", "burst", "resign", "breaker", "slow_start", "filter", "auth", "transform", "order", "pull")
	if !ok {
		return dst, name, false
	}
	dst = Destination{Timeout: timeout, Concurrency: defaultConcurrency,
		Breaker: Breaker{Failures: defaultFailures, Cooldown: defaultCooldown}, SlowStart: defaultSlowStart}
	nameOK := false
	if name, ok = m["name"]; ok {
		dst.Name, nameOK = d.name(name)
	} else {
		d.failf(n, join(it.path, "name"), "missing")
	}
	if e, ok := m["pull"]; ok {
		dst.Pull = d.pull(e, m)
	}
	if e, ok := m["url"]; ok && dst.Pull == nil {
		if s, ok := d.str(e); ok {
			if err := checkURL(s); err != nil {
				d.failf(e.node(), e.path, "%v", err)
			}
			dst.URL = s
		}
	} else if _, pull := m["pull"]; !pull {
		d.failf(n, join(it.path, "url"), "missing; or make it a pull destination with pull: {token: ...}")
	}
	if e, ok := m["timeout"]; ok {
		if v, ok := d.positive(e); ok {
			dst.Timeout = v
		}
	}
	if e, ok := m["concurrency"]; ok {
		if v, ok := d.integer(e, 1, math.MaxInt); ok {
			dst.Concurrency = v
		}
	}
	if e, ok := m["rate"]; ok {
		if s, ok := d.str(e); ok {
			if v, err := parseRate(s); err != nil {
				d.failf(e.node(), e.path, "%v", err)
			} else {
				dst.Rate = Rate{PerSecond: v, Burst: max(1, int(math.Min(v/20, math.MaxInt32)))}
			}
		}
	}
	if e, ok := m["burst"]; ok {
		if _, hasRate := m["rate"]; !hasRate {
			d.failf(e.key, e.path, "burst requires rate")
		} else if v, ok := d.integer(e, 1, math.MaxInt32); ok && dst.Rate.PerSecond > 0 {
			dst.Rate.Burst = v
		}
	}
	if e, ok := m["resign"]; ok {
		dst.Resign = d.resign(e)
	}
	if e, ok := m["breaker"]; ok {
		d.breaker(e, &dst.Breaker)
	}
	if e, ok := m["slow_start"]; ok {
		if v, ok := d.duration(e); ok {
			dst.SlowStart = v
		}
	}
	if e, ok := m["filter"]; ok {
		dst.Filter = d.filter(e)
	}
	if e, ok := m["auth"]; ok {
		dst.Auth = d.auth(e, dst.URL)
	}
	if e, ok := m["transform"]; ok {
		dst.Transform = d.transform(e, maxBody)
	}
	if e, ok := m["order"]; ok {
		dst.Order = d.order(e, provider)
	}
	return dst, name, nameOK
}

// breaker decodes a destination's `breaker:` block over the defaults;
// `failures: 0` turns the breaker off.
func (d *decoder) breaker(e entry, b *Breaker) {
	m, ok := d.mapping(e.val, e.path, "failures", "cooldown")
	if !ok {
		return
	}
	if f, ok := m["failures"]; ok {
		if v, ok := d.integer(f, 0, 1_000_000); ok {
			b.Failures = v
		}
	}
	if c, ok := m["cooldown"]; ok {
		if v, ok := d.positive(c); ok {
			b.Cooldown = v
		}
	}
}

// resign decodes a destination's `resign:` block.
func (d *decoder) resign(e entry) *Resign {
	m, ok := d.mapping(e.val, e.path, "scheme", "secret", "secrets")
	if !ok {
		return nil
	}
	rs := &Resign{Scheme: "standard-webhooks"}
	if s, ok := m["scheme"]; ok {
		if v, ok := d.oneOf(s, "scheme", "standard-webhooks"); ok {
			rs.Scheme = v
		}
	}
	secrets, entries := d.secrets(m)
	if len(entries) == 0 {
		_, one := m["secret"]
		_, many := m["secrets"]
		if !one && !many {
			d.failf(e.node(), join(e.path, "secret"), "missing")
		}
		return rs
	}
	for i, it := range entries {
		if !validWhsec(secrets[i]) {
			d.failf(it.node(), it.path, "secret must have the form whsec_<base64>")
		}
	}
	if len(secrets) > 2 {
		d.failf(entries[2].node(), entries[2].path, "at most two secrets: the new one and the one it replaces")
	}
	for _, sec := range secrets {
		rs.Secrets = append(rs.Secrets, Secret(sec))
	}
	return rs
}

// pullOnly are the destination keys that tune how jethook calls a backend,
// which a pull destination has none of.
var pullOnly = []string{"url", "concurrency", "rate", "burst", "breaker", "slow_start", "auth"}

// pullNot are the destination keys a pull destination does not apply
// yet: refused rather than ignored.
var pullNot = []string{"transform", "order"}

// pull decodes a destination's `pull:` block; m holds the destination's
// keys, for those a pull destination cannot have.
func (d *decoder) pull(e entry, m map[string]entry) *Pull {
	for _, k := range pullOnly {
		if o, ok := m[k]; ok {
			d.failf(o.key, o.path, "a pull destination is fetched from, never called; remove %s", k)
		}
	}
	for _, k := range pullNot {
		if o, ok := m[k]; ok {
			d.failf(o.key, o.path, "a pull destination does not support %s yet; remove it, or make this a push destination with url:", k)
		}
	}
	pm, ok := d.mapping(e.val, e.path, "token")
	if !ok {
		return nil
	}
	t, ok := pm["token"]
	if !ok {
		d.failf(e.node(), join(e.path, "token"), "missing; a pull destination needs its own token, for example token: ${LAPTOP_PULL_TOKEN}")
		return &Pull{}
	}
	p := &Pull{}
	if v, ok := d.str(t); ok {
		if len(v) < MinPullToken {
			d.failf(t.node(), t.path, "token has %d characters; a pull token needs at least %d (openssl rand -hex 32 makes one)", len(v), MinPullToken)
		}
		p.Token = v
	}
	return p
}
