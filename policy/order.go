package policy

import (
	"slices"
	"strings"
	"time"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/provider"
)

// Order makes a destination deliver the events of one key one at a time,
// in the order jethook stored them (docs/ordering.md).
type Order struct {
	// Key is a CEL expression (package filter, the environment of filters)
	// giving each event's key; `key: default` is the provider's natural
	// key (DefaultKeys).
	Key string
	// MaxBlocked is how long a head whose attempts fail may hold its key:
	// after that its next failure dead-letters it and the next event of
	// the key goes. Default 1h.
	MaxBlocked time.Duration
}

// defaultMaxBlocked is Order.MaxBlocked when the file sets none.
const defaultMaxBlocked = time.Hour

// DefaultKeys are the natural ordering keys of the providers that have
// one, which `order: {key: default}` picks: the object an event is about.
var DefaultKeys = map[string]string{
	// Every Stripe event carries the object it is about.
	provider.NameStripe: `body.data.object.id`,
	// Shopify's body is the resource itself, which names itself in
	// admin_graphql_api_id (gid://shopify/Order/820982911946154508);
	// without it, the topic's resource (orders/create → orders) and its
	// id, a JSON number read as a double, so that ids past 2^53 that
	// differ only in their last digits share a key.
	provider.NameShopify: `has(body.admin_graphql_api_id) ? body.admin_graphql_api_id : ` +
		`headers["x-shopify-topic"].split("/")[0] + "/" + string(int(body.id))`,
	// GitHub: a pull request or an issue, else the repository.
	provider.NameGitHub: `has(body.pull_request) ? body.repository.full_name + "#" + string(int(body.pull_request.number)) : ` +
		`has(body.issue) ? body.repository.full_name + "#" + string(int(body.issue.number)) : ` +
		`body.repository.full_name`,
}

// order decodes a destination's `order:` block; provider is the route's.
func (d *decoder) order(e entry, provider string) *Order {
	m, ok := d.mapping(e.val, e.path, "key", "max_blocked")
	if !ok {
		return nil
	}
	o := &Order{MaxBlocked: defaultMaxBlocked}
	if b, ok := m["max_blocked"]; ok {
		if v, ok := d.positive(b); ok {
			o.MaxBlocked = v
		}
	}
	k, ok := m["key"]
	if !ok {
		d.failf(e.node(), join(e.path, "key"), "missing")
		return o
	}
	s, ok := d.str(k)
	if !ok {
		return o
	}
	if strings.TrimSpace(s) == "default" {
		def, ok := DefaultKeys[provider]
		if !ok {
			names := make([]string, 0, len(DefaultKeys))
			for n := range DefaultKeys {
				names = append(names, n)
			}
			slices.Sort(names)
			d.failf(k.node(), k.path, "provider %s has no default key (%s have one); write the key as a CEL expression", provider, strings.Join(names, ", "))
			return o
		}
		s = def
	}
	if _, err := filter.CompileKey(s); err != nil {
		d.failf(k.node(), k.path, "%v", err)
		return o
	}
	o.Key = s
	return o
}
