// Package egress holds the rules on the addresses jethook may connect to
// when it delivers: by default nothing link-local and no cloud metadata
// service, so that whoever can edit a destination cannot make jethook read
// the machine's cloud credentials. The rules are checked on the address of
// every connection as it is dialed, after DNS, so a name that changes what
// it resolves to after a check passed is refused too.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// DefaultDeny are the ranges jethook never connects to unless Allow says
// otherwise: link-local addresses, where every major cloud serves instance
// metadata and credentials, and the metadata addresses outside them.
// Loopback and private ranges are not in it: as a sidecar jethook calls
// 127.0.0.1.
var DefaultDeny = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, Oracle, DigitalOcean metadata (169.254.169.254), ECS task credentials (169.254.170.2)
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS instance metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer
}

// nat64 is the well-known NAT64 prefix (RFC 6052): an address in it
// reaches the IPv4 address in its last 32 bits, which is checked too.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Rules decide which addresses jethook may connect to. An address in Deny
// is refused unless it is in Allow; every other address is allowed. The
// zero value allows everything; use Default for jethook's defaults.
type Rules struct {
	// Deny are the refused ranges: DefaultDeny plus JETHOOK_EGRESS_DENY.
	Deny []netip.Prefix
	// Allow are exceptions to Deny (JETHOOK_EGRESS_ALLOW). With Deny
	// 0.0.0.0/0 and ::/0, they are the only ranges allowed.
	Allow []netip.Prefix
}

// Default returns the rules jethook runs with when nothing is set:
// DefaultDeny, no exceptions.
func Default() *Rules { return New(nil, nil) }

// New returns DefaultDeny plus deny, with the exceptions in allow.
func New(deny, allow []netip.Prefix) *Rules {
	return &Rules{Deny: append(append([]netip.Prefix(nil), DefaultDeny...), deny...), Allow: allow}
}

// RefusedError is a connection the rules refused. Its message names the
// address and the range, never the destination URL.
type RefusedError struct {
	Addr  netip.Addr
	Range netip.Prefix
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress refused: %s is in %s, which jethook does not connect to (JETHOOK_EGRESS_DENY, JETHOOK_EGRESS_ALLOW)", e.Addr, e.Range)
}

// Check returns a *RefusedError when the rules refuse addr, else nil.
func (r *Rules) Check(addr netip.Addr) error {
	if r == nil {
		return nil
	}
	addr = addr.Unmap().WithZone("")
	if p, refused := r.refused(addr); refused {
		return &RefusedError{Addr: addr, Range: p}
	}
	if nat64.Contains(addr) {
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if p, refused := r.refused(v4); refused {
			return &RefusedError{Addr: addr, Range: p}
		}
	}
	return nil
}

func (r *Rules) refused(addr netip.Addr) (netip.Prefix, bool) {
	for _, p := range r.Deny {
		if p.Contains(addr) {
			for _, a := range r.Allow {
				if a.Contains(addr) {
					return netip.Prefix{}, false
				}
			}
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// Control is a net.Dialer's Control: it runs for every address a dial
// tries, after the name was resolved and before the connection is made,
// and refuses those the rules refuse. A name that resolves to several
// addresses is refused only where it would connect to a refused one.
func (r *Rules) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("egress: %q is not an address", host)
	}
	return r.Check(addr)
}

// Dialer returns a dialer that connects only where r allows, with the
// timeouts of Go's default transport.
func (r *Rules) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: r.Control}
}

// ParseList parses a comma-separated list of CIDRs or single addresses,
// as JETHOOK_EGRESS_DENY, JETHOOK_EGRESS_ALLOW and JETHOOK_TRUSTED_PROXIES
// hold them. An IPv4-mapped address is read as the IPv4 address it maps,
// and a range written in mapped form is refused: addresses are compared
// unmapped, so it would match nothing.
func ParseList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for v := range strings.SplitSeq(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			ip, ipErr := netip.ParseAddr(v)
			if ipErr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an address", v)
			}
			ip = ip.Unmap().WithZone("")
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("%q: write an IPv4 range as IPv4", v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
