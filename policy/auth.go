package policy

import (
	"net/http"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Auth is how jethook proves itself to a destination: a destination's
// `auth:` block. Every credential comes from the environment (${VAR}) and
// is a Secret, shown nowhere. Headers go with any of the others; Basic,
// Bearer and OAuth2 each set Authorization, so at most one is set. TLS
// goes with any of them.
type Auth struct {
	// Headers are static headers sent with every attempt, replacing the
	// provider's headers of the same name (`headers: {X-Api-Key: ${KEY}}`).
	Headers map[string]Secret
	// Basic is HTTP Basic authentication (RFC 7617).
	Basic *Basic
	// Bearer is a static bearer token (RFC 6750).
	Bearer Secret
	// OAuth2 fetches bearer tokens with the client credentials grant.
	OAuth2 *OAuth2
	// TLS is a client certificate (mTLS) and the CA the backend's
	// certificate must chain to.
	TLS *TLS
}

// Basic is `auth.basic`.
type Basic struct {
	Username string
	Password Secret
}

// OAuth2 is `auth.oauth2`: the client credentials grant (RFC 6749 §4.4).
// jethook fetches a token before the first attempt, keeps it until shortly
// before it expires, and fetches a new one once when the backend answers
// 401.
type OAuth2 struct {
	TokenURL     string // http or https; credentials in it are shown nowhere
	ClientID     string
	ClientSecret Secret
	Scopes       []string
	// Params are extra form values of the token request (an audience,
	// a resource).
	Params map[string]string
}

// TLS is `auth.tls`: file paths, read when jethook starts or reloads and
// again whenever a file changes.
type TLS struct {
	Cert string // client certificate, PEM; with Key
	Key  string // its private key, PEM
	CA   string // CA bundle, PEM, for the backend's certificate; empty: the system's
}

// reservedHeaders are headers auth.headers may not set: the ones jethook
// sets on every attempt or that belong to one connection.
var reservedHeaders = []string{
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection",
	"Te", "Trailer", "Upgrade", "Proxy-Authorization", "X-Webhook-Id", "X-Webhook-Attempt",
	"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Jethook-Caught-Up",
	"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature",
}

// auth decodes a destination's `auth:` block; rawURL is the destination's
// URL. Messages name keys, never values.
func (d *decoder) auth(e entry, rawURL string) *Auth {
	m, ok := d.mapping(e.val, e.path, "headers", "basic", "bearer", "oauth2", "tls")
	if !ok {
		return nil
	}
	a := &Auth{}
	if h, ok := m["headers"]; ok {
		a.Headers = d.authHeaders(h)
	}
	var setters []string
	if b, ok := m["basic"]; ok {
		setters = append(setters, "basic")
		if bm, ok := d.mapping(b.val, b.path, "username", "password"); ok {
			a.Basic = &Basic{}
			if u, ok := bm["username"]; ok {
				a.Basic.Username, _ = d.str(u)
				if strings.Contains(a.Basic.Username, ":") {
					d.failf(u.node(), u.path, "a Basic username may not contain \":\" (RFC 7617)")
				}
			} else {
				d.failf(b.node(), join(b.path, "username"), "missing")
			}
			if p, ok := bm["password"]; ok {
				a.Basic.Password = d.secret(p)
			} else {
				d.failf(b.node(), join(b.path, "password"), "missing")
			}
		}
	}
	if b, ok := m["bearer"]; ok {
		setters = append(setters, "bearer")
		a.Bearer = d.secret(b)
	}
	if o, ok := m["oauth2"]; ok {
		setters = append(setters, "oauth2")
		a.OAuth2 = d.oauth2(o)
	}
	if len(setters) > 1 {
		d.failf(e.node(), e.path, "%s each set Authorization; keep one", strings.Join(setters, " and "))
	}
	if _, set := a.Headers["Authorization"]; set && len(setters) > 0 {
		d.failf(e.node(), join(e.path, "headers"), "Authorization is set by headers and by %s; keep one", setters[0])
	}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil && (len(setters) > 0 || a.Headers["Authorization"] != "") {
		d.failf(e.node(), e.path, "the destination url carries credentials, which jethook would send as Basic auth, and auth sets Authorization too; keep one")
	}
	if t, ok := m["tls"]; ok {
		a.TLS = d.tls(t)
		if u, err := url.Parse(rawURL); err == nil && u.Scheme != "https" && a.TLS != nil {
			d.failf(t.key, t.path, "tls needs an https destination url")
		}
	}
	return a
}

// secret decodes a credential: present, not blank, and sendable in a
// header. Messages never quote it.
func (d *decoder) secret(e entry) Secret {
	s, ok := d.str(e)
	switch {
	case !ok:
		return ""
	case strings.TrimSpace(s) == "":
		d.failf(e.node(), e.path, "is empty")
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		d.failf(e.node(), e.path, "has a control character (a newline at the end of a secret file?)")
	}
	return Secret(s)
}

// authHeaders decodes `auth.headers`, a mapping of header names to values.
func (d *decoder) authHeaders(e entry) map[string]Secret {
	n := d.resolve(e.val, e.path)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.failf(n, e.path, "expected a mapping of header names to values, got %s", kindName(n))
		return nil
	}
	out := map[string]Secret{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := join(e.path, k.Value)
		name := http.CanonicalHeaderKey(k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			d.failf(k, e.path, "keys must be strings, got %s", kindName(k))
			continue
		case !validHeader(k.Value):
			d.failf(k, path, "invalid header name %q", k.Value)
			continue
		case containsFold(reservedHeaders, name):
			d.failf(k, path, "jethook sets %s itself; it cannot be an auth header", name)
			continue
		}
		if _, dup := out[name]; dup {
			d.failf(k, path, "header %s is listed twice", name)
			continue
		}
		out[name] = d.secret(entry{key: k, val: v, path: path})
	}
	return out
}

// oauth2 decodes `auth.oauth2`.
func (d *decoder) oauth2(e entry) *OAuth2 {
	m, ok := d.mapping(e.val, e.path, "token_url", "client_id", "client_secret", "scopes", "params")
	if !ok {
		return nil
	}
	o := &OAuth2{}
	for _, key := range []string{"token_url", "client_id", "client_secret"} {
		if _, ok := m[key]; !ok {
			d.failf(e.node(), join(e.path, key), "missing")
		}
	}
	if t, ok := m["token_url"]; ok {
		if s, ok := d.str(t); ok {
			if err := checkURL(s); err != nil {
				d.failf(t.node(), t.path, "%v", err)
			}
			o.TokenURL = s
		}
	}
	if c, ok := m["client_id"]; ok {
		o.ClientID, _ = d.str(c)
	}
	if c, ok := m["client_secret"]; ok {
		o.ClientSecret = d.secret(c)
	}
	if s, ok := m["scopes"]; ok {
		items, _ := d.list(s)
		for _, it := range items {
			if v, ok := d.str(it); ok {
				o.Scopes = append(o.Scopes, v)
			}
		}
	}
	if p, ok := m["params"]; ok {
		n := d.resolve(p.val, p.path)
		if n != nil && n.Kind != yaml.MappingNode {
			d.failf(n, p.path, "expected a mapping, got %s", kindName(n))
		} else if n != nil {
			o.Params = map[string]string{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				switch k.Value {
				case "grant_type", "client_id", "client_secret", "scope":
					d.failf(k, join(p.path, k.Value), "jethook sets %s itself", k.Value)
					continue
				}
				o.Params[k.Value], _ = d.str(entry{key: k, val: n.Content[i+1], path: join(p.path, k.Value)})
			}
		}
	}
	return o
}

// tls decodes `auth.tls`.
func (d *decoder) tls(e entry) *TLS {
	m, ok := d.mapping(e.val, e.path, "cert", "key", "ca")
	if !ok {
		return nil
	}
	t := &TLS{}
	path := func(key string, to *string) {
		if v, ok := m[key]; ok {
			*to, _ = d.str(v)
		}
	}
	path("cert", &t.Cert)
	path("key", &t.Key)
	path("ca", &t.CA)
	switch {
	case t.Cert != "" && t.Key == "":
		d.failf(e.node(), join(e.path, "key"), "missing; a client certificate needs its key")
	case t.Key != "" && t.Cert == "":
		d.failf(e.node(), join(e.path, "cert"), "missing; a key needs its client certificate")
	case t.Cert == "" && t.CA == "":
		d.failf(e.node(), e.path, "set cert and key (a client certificate), ca (the backend's CA), or both")
	}
	return t
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
