package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jethook/jethook/provider"
)

// How far back each provider lets catch-up look: GitHub keeps a hook's
// deliveries for 3 days, Stripe lists the events of the last 30 days.
const (
	GitHubKeeps = 72 * time.Hour
	StripeKeeps = 30 * 24 * time.Hour
)

// defaultCatchUpInterval is how often catch-up asks the provider.
const defaultCatchUpInterval = 5 * time.Minute

// CatchUp is a route's `catch_up:` block: how jethook asks the provider for
// the events it missed while it could not receive them. Exactly one of
// GitHub and Stripe is set.
type CatchUp struct {
	GitHub *GitHubCatchUp
	Stripe *StripeCatchUp
	// Interval is the time between two passes, default 5m; the first runs
	// at start.
	Interval time.Duration
	// Window is how far back a pass looks at most: default and maximum
	// GitHubKeeps or StripeKeeps.
	Window time.Duration
}

// Provider names the provider catch-up asks: [provider.NameGitHub] or
// [provider.NameStripe].
func (c *CatchUp) Provider() string {
	if c.GitHub != nil {
		return provider.NameGitHub
	}
	return provider.NameStripe
}

// GitHubCatchUp asks GitHub to redeliver a webhook's failed deliveries.
type GitHubCatchUp struct {
	// Token is a GitHub token allowed to read and redeliver the hook's
	// deliveries (admin:repo_hook or admin:org_hook).
	Token string
	// Owner is the repository's owner or the organization; Repo is empty
	// for an organization's hook.
	Owner, Repo string
	HookID      int64
	// APIURL is the REST API's base URL, default https://api.github.com/
	// (GitHub Enterprise: https://HOST/api/v3/).
	APIURL string
}

// StripeCatchUp lists Stripe's events and stores those jethook lacks.
type StripeCatchUp struct {
	APIKey string // a secret or restricted key that may read events
	APIURL string // default https://api.stripe.com
	// Events are the event types the endpoint is subscribed to: names
	// such as "invoice.paid", "invoice.*" or "*". Empty means every type.
	Events []string
}

// catchUp decodes a route's `catch_up:` block; routeProvider is the route's.
func (d *decoder) catchUp(e entry, routeProvider string) *CatchUp {
	m, ok := d.mapping(e.val, e.path, "github", "stripe", "interval", "window")
	if !ok {
		return nil
	}
	c := &CatchUp{Interval: defaultCatchUpInterval}
	gh, isGitHub := m["github"]
	st, isStripe := m["stripe"]
	keeps, name := GitHubKeeps, "GitHub keeps deliveries"
	switch {
	case isGitHub && isStripe:
		d.failf(st.key, st.path, "set one of github and stripe, not both")
		return nil
	case isGitHub:
		if routeProvider != provider.NameGitHub {
			d.failf(gh.key, gh.path, "catch_up.github requires provider github (its event ids are GitHub's delivery ids)")
		}
		c.GitHub = d.githubCatchUp(gh)
	case isStripe:
		if routeProvider != provider.NameStripe {
			d.failf(st.key, st.path, "catch_up.stripe requires provider stripe (its event ids are Stripe's event ids)")
		}
		c.Stripe = d.stripeCatchUp(st)
		keeps, name = StripeKeeps, "Stripe lists events"
	default:
		d.failf(e.node(), e.path, "set github or stripe")
		return nil
	}
	c.Window = keeps
	if i, ok := m["interval"]; ok {
		if v, ok := d.positive(i); ok {
			c.Interval = v
		}
	}
	if w, ok := m["window"]; ok {
		if v, ok := d.positive(w); ok {
			if v > keeps {
				d.failf(w.node(), w.path, "window %v is longer than %s (%v)", v, name, keeps)
			} else {
				c.Window = v
			}
		}
	}
	if c.GitHub == nil && c.Stripe == nil {
		return nil
	}
	return c
}

func (d *decoder) githubCatchUp(e entry) *GitHubCatchUp {
	m, ok := d.mapping(e.val, e.path, "token", "hook", "api_url")
	if !ok {
		return nil
	}
	g := &GitHubCatchUp{APIURL: "https://api.github.com/"}
	g.Token = d.secretValue(e, m, "token")
	if h, ok := m["hook"]; !ok {
		d.failf(e.node(), join(e.path, "hook"), "missing; want repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID")
	} else if s, ok := d.str(h); ok {
		var err error
		if g.Owner, g.Repo, g.HookID, err = parseHook(s); err != nil {
			d.failf(h.node(), h.path, "%v", err)
		}
	}
	g.APIURL = d.apiURL(m, g.APIURL)
	if !strings.HasSuffix(g.APIURL, "/") {
		g.APIURL += "/"
	}
	return g
}

func (d *decoder) stripeCatchUp(e entry) *StripeCatchUp {
	m, ok := d.mapping(e.val, e.path, "api_key", "api_url", "events")
	if !ok {
		return nil
	}
	c := &StripeCatchUp{
		APIKey: d.secretValue(e, m, "api_key"),
		APIURL: strings.TrimSuffix(d.apiURL(m, "https://api.stripe.com"), "/"),
	}
	if ev, ok := m["events"]; ok {
		items, _ := d.list(ev)
		for _, it := range items {
			if s, ok := d.str(it); ok {
				if !validEventType(s) {
					d.failf(it.node(), it.path, "invalid event type %q: want a name such as invoice.paid, a group such as invoice.*, or *", s)
					continue
				}
				c.Events = append(c.Events, s)
			}
		}
	}
	return c
}

// validEventType reports whether s names Stripe event types: a name of
// lower-case letters, digits, "_" and ".", optionally ending in ".*", or
// "*" alone.
func validEventType(s string) bool {
	name := strings.TrimSuffix(s, ".*")
	if s == "*" {
		return true
	}
	if name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// secretValue decodes a required credential; messages never quote it.
func (d *decoder) secretValue(e entry, m map[string]entry, key string) string {
	v, ok := m[key]
	if !ok {
		d.failf(e.node(), join(e.path, key), "missing")
		return ""
	}
	s, ok := d.str(v)
	if ok && s == "" {
		d.failf(v.node(), v.path, "is empty")
	}
	return s
}

func (d *decoder) apiURL(m map[string]entry, def string) string {
	u, ok := m["api_url"]
	if !ok {
		return def
	}
	s, ok := d.str(u)
	if !ok {
		return def
	}
	if err := checkURL(s); err != nil {
		d.failf(u.node(), u.path, "%v", err)
		return def
	}
	return s
}

// parseHook reads repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID.
func parseHook(s string) (owner, repo string, id int64, err error) {
	p := strings.Split(s, "/")
	bad := fmt.Errorf("hook %q: want repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID", s)
	switch {
	case len(p) == 5 && p[0] == "repos" && p[3] == "hooks":
		owner, repo = p[1], p[2]
	case len(p) == 4 && p[0] == "orgs" && p[2] == "hooks":
		owner = p[1]
	default:
		return "", "", 0, bad
	}
	for _, name := range []string{owner, repo} {
		if strings.ContainsAny(name, "?#% ") {
			return "", "", 0, bad
		}
	}
	if owner == "" || len(p) == 5 && repo == "" {
		return "", "", 0, bad
	}
	id, err = strconv.ParseInt(p[len(p)-1], 10, 64)
	if err != nil || id <= 0 {
		return "", "", 0, fmt.Errorf("hook %q: the hook id must be a positive integer", s)
	}
	return owner, repo, id, nil
}
