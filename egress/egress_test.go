package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/egress"
)

func TestTheDefaultRulesRefuseMetadataAndLinkLocalButNotLoopbackOrPrivateRanges(t *testing.T) {
	t.Parallel()
	rules := egress.Default()
	for _, tc := range []struct {
		addr    string
		refused bool
	}{
		{"169.254.169.254", true},        // AWS, GCP, Azure metadata
		{"169.254.170.2", true},          // ECS task credentials
		{"::ffff:169.254.169.254", true}, // the same, IPv4-mapped
		{"64:ff9b::a9fe:a9fe", true},     // the same, through NAT64
		{"fd00:ec2::254", true},          // AWS metadata over IPv6
		{"fe80::1", true},                // IPv6 link-local
		{"100.100.100.200", true},        // Alibaba Cloud metadata
		{"168.63.129.16", true},          // Azure WireServer
		{"127.0.0.1", false},             // the sidecar case
		{"::1", false},                   //
		{"10.1.2.3", false},              // private ranges
		{"192.168.1.10", false},          //
		{"172.16.0.1", false},            //
		{"fd12:3456::1", false},          // unique local, but not AWS's metadata
		{"93.184.215.14", false},         // a public address
		{"64:ff9b::5db8:d70e", false},    // a public address through NAT64
		{"169.253.255.255", false},       // just outside link-local
		{"fd00:ec2::253", false},         // just beside AWS's metadata
	} {
		err := rules.Check(netip.MustParseAddr(tc.addr))
		if got := err != nil; got != tc.refused {
			t.Errorf("%s: refused = %v (%v), want %v", tc.addr, got, err, tc.refused)
		}
		if err != nil && !errors.As(err, new(*egress.RefusedError)) {
			t.Errorf("%s: %T is not a *RefusedError", tc.addr, err)
		}
	}
}

func TestDenyAddsRangesAndAllowMakesExceptions(t *testing.T) {
	t.Parallel()
	deny, err := egress.ParseList("0.0.0.0/0, ::/0")
	if err != nil {
		t.Fatal(err)
	}
	allow, err := egress.ParseList("10.1.0.0/16,127.0.0.1,169.254.169.254")
	if err != nil {
		t.Fatal(err)
	}
	rules := egress.New(deny, allow)
	for addr, refused := range map[string]bool{
		"10.1.9.9": false, "127.0.0.1": false, "169.254.169.254": false,
		"10.2.0.1": true, "127.0.0.2": true, "169.254.170.2": true, "8.8.8.8": true, "::1": true,
	} {
		if got := rules.Check(netip.MustParseAddr(addr)) != nil; got != refused {
			t.Errorf("%s: refused = %v, want %v", addr, got, refused)
		}
	}
}

func TestParseListRefusesWhatIsNotARange(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "metadata.internal", "10.0.0.0/8,,nope", "::ffff:10.0.0.0/104"} {
		if _, err := egress.ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) succeeded", bad)
		}
	}
	got, err := egress.ParseList(" 10.0.0.1/8 , fe80::1%eth0 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fe80::1/128")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ParseList = %v, want %v", got, want)
	}
}

// An IPv4-mapped IPv6 address is the IPv4 address it maps: connections
// and requests are compared unmapped, so a single one is kept as IPv4, and
// a range written in mapped form, which would match nothing, is refused.
func TestParseListReadsAnIPv4MappedAddressAsIPv4(t *testing.T) {
	t.Parallel()
	got, err := egress.ParseList("::ffff:192.0.2.7, ::ffff:10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("10.0.0.1/32")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ParseList = %v, want %v", got, want)
	}
	if _, err := egress.ParseList("::ffff:10.0.0.0/104"); err == nil || !strings.Contains(err.Error(), "write an IPv4 range as IPv4") {
		t.Errorf("a mapped range: err = %v", err)
	}
}

// A dialer with the rules' Control refuses before connecting: the dial
// fails at once with the rules' error instead of waiting for an address
// that does not answer here.
func TestADialerWithTheRulesRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	d := &net.Dialer{Control: egress.Default().Control, Timeout: 5 * time.Second}
	start := time.Now()
	_, err := d.DialContext(context.Background(), "tcp", "169.254.169.254:80")
	var re *egress.RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("dial: %v, want a *RefusedError", err)
	}
	if re.Range != netip.MustParsePrefix("169.254.0.0/16") {
		t.Errorf("range %s", re.Range)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("the refusal took %v", time.Since(start))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("loopback refused: %v", err)
	}
	c.Close()
}
