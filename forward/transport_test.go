package forward

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/jethook/jethook/egress"
)

// dnsServer answers every A question with its current address, as a name
// whose owner changes its DNS after a check passed (DNS rebinding).
type dnsServer struct {
	conn net.PacketConn
	mu   sync.Mutex
	addr netip.Addr
}

func newDNSServer(t *testing.T, addr string) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, addr: netip.MustParseAddr(addr)}
	t.Cleanup(func() { conn.Close() })
	go s.serve()
	return s
}

func (s *dnsServer) set(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr = netip.MustParseAddr(addr)
}

func (s *dnsServer) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		s.mu.Lock()
		addr := s.addr
		s.mu.Unlock()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: addr.As4()})
		}
		msg, err := b.Finish()
		if err == nil {
			_, _ = s.conn.WriteTo(msg, from)
		}
	}
}

// resolver asks only s.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

// A name that resolved to the backend when it was checked, and resolves to
// the metadata address afterwards, is refused when the connection is
// made, before any byte is sent, at every attempt.
func TestANameThatResolvesToAMetadataAddressLaterIsRefusedAtTheConnection(t *testing.T) {
	t.Parallel()
	b := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(b.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(b.URL, "http://"))
	dns := newDNSServer(t, "127.0.0.1")
	rt := newTransport(egress.Default(), dns.resolver())
	url := "http://hooks.example.test:" + port + "/hook"
	attempt := func() error {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		rt.CloseIdleConnections() // each attempt dials, as after an idle spell
		return err
	}
	if err := attempt(); err != nil {
		t.Fatalf("while the name resolves to loopback: %v", err)
	}
	dns.set("169.254.169.254")
	for i := range 2 {
		err := attempt()
		if _, ok := egressRefused(err); !ok {
			t.Fatalf("attempt %d after the change: %v, want a refusal", i+1, err)
		}
		var re *egress.RefusedError
		if !errors.As(err, &re) || re.Addr != netip.MustParseAddr("169.254.169.254") {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	dns.set("127.0.0.1")
	if err := attempt(); err != nil {
		t.Fatalf("back on loopback: %v", err)
	}
}
