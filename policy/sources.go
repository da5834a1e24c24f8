package policy

import "net/netip"

// allowSources decodes a route's `allow_sources`: CIDRs or single
// addresses, at least one.
func (d *decoder) allowSources(e entry) []netip.Prefix {
	items, ok := d.list(e)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.failf(e.node(), e.path, "at least one range is required; remove allow_sources to accept every address")
		return nil
	}
	var out []netip.Prefix
	for _, it := range items {
		s, ok := d.str(it)
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				d.failf(it.node(), it.path, "%q is neither a CIDR (192.30.252.0/22) nor an address", s)
				continue
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}
