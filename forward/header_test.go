package forward_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// hopByHop are the request headers that describe one connection (RFC 9110
// §7.6.1) or the message framing; none may reach the backend as the
// provider sent them.
var hopByHop = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "X-Drop-Me"}

// A provider's hop-by-hop headers, Host and framing stay on its own
// connection, and it cannot set or repeat the headers jethook adds.
func TestAProvidersHopByHopAndJethookHeadersDoNotReachTheBackendAsSent(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	r := newRig(t, parseConfig(t, fastRetry, b.URL), store.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.ingress.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"order":1}`
	_, err = fmt.Fprintf(conn, "POST /hooks/shop HTTP/1.1\r\n"+
		"Host: provider.example\r\n"+
		"Content-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n"+
		"Connection: keep-alive, X-Drop-Me, Upgrade\r\n"+
		"X-Drop-Me: only for this hop\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"TE: trailers\r\n"+
		"Trailer: X-Trail\r\n"+
		"Upgrade: websocket\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\n"+
		"Proxy-Authenticate: Basic\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"X-Webhook-Id: forged\r\n"+
		"X-Webhook-Id: forged-again\r\n"+
		"X-Webhook-Attempt: 99\r\n"+
		"X-Forwarded-Proto: https\r\n"+
		"X-Forwarded-Host: evil.example\r\n"+
		"X-Forwarded-For: 203.0.113.9\r\n"+
		"Jethook-Caught-Up: stripe\r\n"+
		"X-Keep: kept\r\n"+
		"\r\n%x\r\n%s\r\n0\r\nX-Trail: t\r\n\r\n", len(body), body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct{ ID string }
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ack) != nil || ack.ID == "" {
		t.Fatalf("ingress answered %d %s", resp.StatusCode, raw)
	}

	eventually(t, "the delivery", func() bool { return b.count() == 1 })
	h := b.all()[0]
	if string(h.body) != body || h.length != int64(len(body)) || len(h.coding) != 0 {
		t.Errorf("backend got %q, Content-Length %d, Transfer-Encoding %q; want %q framed by its length", h.body, h.length, h.coding, body)
	}
	if h.host != b.Listener.Addr().String() {
		t.Errorf("backend called with Host %q, want its own %q", h.host, b.Listener.Addr())
	}
	for _, k := range hopByHop {
		if v := h.header.Values(k); len(v) > 0 {
			t.Errorf("%s forwarded: %q", k, v)
		}
	}
	want := http.Header{
		"X-Webhook-Id":      {ack.ID},
		"X-Webhook-Attempt": {"1"},
		"X-Forwarded-Proto": {"http"},
		"X-Forwarded-Host":  nil,                        // a client's Host is its own claim
		"X-Forwarded-For":   {"203.0.113.9, 127.0.0.1"}, // the provider's chain, then the provider
		"X-Keep":            {"kept"},
		"Content-Type":      {"application/json"},
	}
	for k, v := range want {
		if got := h.header.Values(k); !slices.Equal(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if got := h.header.Values("Jethook-Caught-Up"); len(got) > 0 {
		t.Errorf("a sender's own Jethook-Caught-Up reached the backend: %q", got)
	}
}

// crafted publishes messages straight to the WEBHOOKS stream, as a
// misbehaving producer on a shared NATS (or a future version) might.
type crafted struct {
	t    *testing.T
	js   jetstream.JetStream
	addr string
}

func newCrafted(t *testing.T, addr string) *crafted {
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &crafted{t: t, js: js, addr: addr}
}

// newCraftedRig is a rig whose store also takes NATS clients on a free
// loopback port, and a crafted publisher connected there.
func newCraftedRig(t *testing.T, yaml, backendURL string, tune ...func(*app.Options)) (*rig, *crafted) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	r := newRig(t, parseConfig(t, yaml, backendURL), store.Options{ClientListen: addr}, tune...)
	return r, newCrafted(t, addr)
}

// publishUnsendable stores a message on route shop whose header holds a
// NUL, which no HTTP request may carry.
func (c *crafted) publishUnsendable(id string) {
	c.t.Helper()
	c.publish(id, nats.Header{"Jethook-Event-Id": {id}, "Jethook-Method": {"POST"}, "H-X-Note": {"a\x00b"}}, "x")
}

// publish stores a message on route shop with the given NATS headers.
func (c *crafted) publish(id string, h nats.Header, body string) {
	c.t.Helper()
	m := nats.NewMsg(store.Subject("shop"))
	m.Header, m.Data = h, []byte(body)
	if _, err := c.js.PublishMsg(context.Background(), m); err != nil {
		c.t.Fatal(err)
	}
}

// publishRaw stores a message whose header block is written byte for
// byte, which nats.go would not do for a value holding a CR.
func (c *crafted) publishRaw(subject, headerBlock, body string) {
	c.t.Helper()
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := "NATS/1.0\r\n" + headerBlock + "\r\n"
	fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB %s %d %d\r\n%s%s\r\nPING\r\n",
		subject, len(hdr), len(hdr)+len(body), hdr, body)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("raw publish: %v", err)
		}
		if strings.HasPrefix(line, "PONG") {
			return
		}
		if strings.HasPrefix(line, "-ERR") {
			c.t.Fatalf("raw publish: %s", line)
		}
	}
}

// A message that did not come through ingress may hold headers no HTTP
// request could carry. The forwarder must not panic, must not send them,
// must not count them against the backend (its breaker) and must not
// retry what cannot succeed: such a message is dead-lettered at once with
// the reason, and the rest are delivered.
func TestCraftedStoredHeadersAreNeitherSentNorRetriedNorFatal(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	// Two failed attempts in a row would open the breaker for an hour.
	r, c := newCraftedRig(t, limited(t, "slow_start: 0s, breaker: {failures: 2, cooldown: 1h}", ""), b.URL)
	base := func(id string) nats.Header {
		return nats.Header{"Jethook-Event-Id": {id}, "Jethook-Method": {"POST"}, "Jethook-Remote": {"192.0.2.1:1"},
			"Jethook-Proto": {"https"}, "H-Content-Type": {"application/json"}}
	}

	// Header names in another case are the same HTTP headers: jethook's
	// own and hop-by-hop ones are replaced or dropped all the same.
	spoof := base("lowercase")
	for k, v := range map[string]string{"H-x-webhook-id": "forged", "H-x-webhook-attempt": "77", "H-content-length": "999",
		"H-transfer-encoding": "chunked", "H-connection": "close, x-secret", "H-x-secret": "s3cret", "H-host": "evil.example",
		"H-keep-alive": "timeout=1", "H-x-forwarded-proto": "gopher"} {
		spoof[k] = []string{v}
	}
	c.publish("lowercase", spoof, `{"crafted":1}`)

	// Values and names no HTTP request may carry.
	bad := map[string]nats.Header{"nul": base("nul"), "del": base("del"), "empty name": base("empty name"), "bad method": base("bad method")}
	bad["nul"]["H-X-Note"] = []string{"a\x00b"}
	bad["del"]["H-X-Note"] = []string{"a\x7fb"}
	bad["empty name"]["H-"] = []string{"x"}
	bad["bad method"]["Jethook-Method"] = []string{"PO ST"}
	for id, h := range bad {
		c.publish(id, h, `{"bad":true}`)
	}
	c.publishRaw(store.Subject("shop"), "Jethook-Event-Id: cr\r\nH-X-Note: a\rb\r\n", `{"bad":"cr"}`)
	c.publishRaw(store.Subject("shop"), "Jethook-Event-Id: bad name\r\nH-X(Note) y: x\r\n", `{"bad":"name"}`)
	// Nothing to decode an envelope from.
	c.publish("no id", nats.Header{"H-Content-Type": {"text/plain"}}, "no id")
	if _, err := c.js.Publish(context.Background(), store.Subject("shop"), []byte("bare")); err != nil {
		t.Fatal(err)
	}

	if code, resp := r.post("/hooks/shop", http.Header{"Content-Type": {"application/json"}}, []byte(`{"after":"poison"}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	const raw, idless = 2, 2 // the cr and bad name messages; no id and bare
	eventually(t, "a dead letter for each bad message", func() bool {
		s, err := r.store.Stats(context.Background())
		return err == nil && s.DeadLetters >= uint64(len(bad)+raw+idless)
	})
	eventually(t, "the crafted and the posted webhook delivered", func() bool { return b.count() >= 2 })
	storetest.Settled(t, r.store) // no retry or stray delivery can come

	hits := b.all()
	if len(hits) != 2 {
		t.Fatalf("backend got %d requests, want 2", len(hits))
	}
	var h hit
	for _, x := range hits {
		if string(x.body) == `{"crafted":1}` {
			h = x
		} else if string(x.body) != `{"after":"poison"}` {
			t.Errorf("backend got %q", x.body)
		}
	}
	if h.header == nil {
		t.Fatal("the lowercase message was not delivered")
	}
	want := http.Header{"X-Webhook-Id": {"lowercase"}, "X-Webhook-Attempt": {"1"}, "X-Forwarded-Proto": {"https"},
		"X-Forwarded-For": {"192.0.2.1"}, "Content-Type": {"application/json"}}
	for k, v := range want {
		if got := h.header.Values(k); !slices.Equal(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h.length != int64(len(`{"crafted":1}`)) || len(h.coding) != 0 || h.host != b.Listener.Addr().String() {
		t.Errorf("framing: Content-Length %d, Transfer-Encoding %q, Host %q", h.length, h.coding, h.host)
	}
	for _, k := range append(hopByHop, "X-Secret") {
		if v := h.header.Values(k); len(v) > 0 {
			t.Errorf("%s forwarded: %q", k, v)
		}
	}

	dead := map[string]store.DeadLetter{}
	for _, d := range r.deadLetters() {
		dead[d.Envelope.EventID] = d
	}
	why := map[string]string{
		"nul":        "stored header X-Note: control character in its value",
		"del":        "stored header X-Note: control character in its value",
		"cr":         "stored header X-Note: control character in its value",
		"empty name": `stored header "": not a valid header name`,
		"bad name":   `stored header "X(Note) y": not a valid header name`,
		"bad method": `invalid method "PO ST"`,
	}
	for id, reason := range why {
		d, ok := dead[id]
		if !ok {
			t.Errorf("%s: no dead letter", id)
			continue
		}
		if d.Reason != "permanent" || d.Attempts != 1 || d.LastStatus != 0 || !strings.Contains(d.LastError, reason) {
			t.Errorf("%s: dead letter %s after %d attempts, status %d, error %q; want permanent after 1 with %q",
				id, d.Reason, d.Attempts, d.LastStatus, d.LastError, reason)
		}
	}
	// Messages with no event id are kept under their stream sequence, with
	// their body, as dead letters that say why.
	bodies := map[string]bool{}
	for id, d := range dead {
		if strings.HasPrefix(id, "seq-") {
			bodies[string(d.Envelope.Body)] = true
			if d.Reason != "permanent" || !strings.Contains(d.LastError, "has no Jethook-Event-Id header") {
				t.Errorf("%s: dead letter %s, error %q; want permanent, naming the missing event id", id, d.Reason, d.LastError)
			}
		}
	}
	if !bodies["no id"] || !bodies["bare"] {
		t.Errorf("dead letters of the messages without an event id hold bodies %v, want \"no id\" and \"bare\"", bodies)
	}
	if len(dead) != len(bad)+raw+idless {
		t.Errorf("%d dead letters, want %d", len(dead), len(bad)+raw+idless)
	}
}

// Credentials in a destination URL reach the backend as Basic auth, as
// they would through http.Client, unless the provider sent its own
// Authorization.
func TestDestinationURLCredentialsBecomeBasicAuth(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	withUser := strings.Replace(b.URL, "http://", "http://app:s3cret@", 1)
	r := newRig(t, parseConfig(t, fastRetry, withUser), store.Options{})
	if code, body := r.post("/hooks/shop", nil, []byte("one")); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	own := http.Header{"Authorization": {"Bearer provider-token"}}
	if code, body := r.post("/hooks/shop", own, []byte("two")); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, body)
	}
	eventually(t, "both deliveries", func() bool { return b.count() >= 2 })
	got := map[string]string{}
	for _, h := range b.all() {
		got[string(h.body)] = h.header.Get("Authorization")
	}
	if want := "Basic YXBwOnMzY3JldA=="; got["one"] != want {
		t.Errorf("without a provider Authorization: got %q, want %q", got["one"], want)
	}
	if want := "Bearer provider-token"; got["two"] != want {
		t.Errorf("with a provider Authorization: got %q, want %q", got["two"], want)
	}
}

// A stored message that cannot be made into a request never reaches the
// backend, so it tells the breaker nothing: it must not reset the count of
// the backend's failures in a row.
func TestAnUnsendableMessageDoesNotResetTheBreaker(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusServiceUnavailable))
	// The breaker would open at the second failure in a row.
	r, c := newCraftedRig(t, slowRetry(t, "slow_start: 0s, breaker: {failures: 2, cooldown: 1h}"), b.URL)

	if code, resp := r.post("/hooks/shop", nil, []byte(`{"fails":1}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "one failed attempt counted", func() bool { return r.gate().Failures == 1 })

	c.publishUnsendable("unsendable")
	eventually(t, "the unsendable message dead-lettered", func() bool { return len(r.deadLetters()) == 1 })
	if got := r.gate().Failures; got != 1 {
		t.Errorf("failures in a row after the unsendable message: %d, want 1 (the backend's 503)", got)
	}
	if n := b.count(); n != 1 {
		t.Errorf("backend got %d requests, want 1", n)
	}
}

// When the breaker's probe is a message that cannot be sent, the next
// message probes instead: the destination is not left half-open forever.
func TestAnUnsendableProbeHandsTheProbeOn(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(1))
	// Concurrency 1: each fetch asks for one message and ends with it, so
	// no fetch is still open to take the next ones while the breaker is.
	r, c := newCraftedRig(t, slowRetry(t, "concurrency: 1, slow_start: 0s, breaker: {failures: 1, cooldown: 300ms}"), b.URL)

	if code, resp := r.post("/hooks/shop", nil, []byte(`{"fails":1}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "the breaker open after the 503", func() bool { return r.gate().Breaker == forward.BreakerOpen })
	c.publishUnsendable("unsendable")
	eventually(t, "the unsendable message dead-lettered as the probe", func() bool { return len(r.deadLetters()) == 1 })
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"after":1}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "the next webhook delivered as the probe", func() bool { return b.count() == 2 })
	eventually(t, "the breaker closed", func() bool { return r.gate().Breaker == forward.BreakerClosed })
}

// A webhook that arrives while the breaker is open, even into a fetch that
// was waiting for messages before it opened, is not attempted before the
// next probe is due, and then as attempt 1: it waits unattempted, and no
// delivery is counted that was not an attempt.
func TestAWebhookArrivingWhileTheBreakerIsOpenWaitsForTheProbeUnattempted(t *testing.T) {
	t.Parallel()
	b := newBackend(t, unavailableFirst(1))
	const firstProbe = time.Second
	r := newRig(t, parseConfig(t, slowRetry(t, "slow_start: 0s, breaker: {failures: 1, cooldown: 2s}"), b.URL),
		store.Options{}, fetchWait(time.Minute)) // a fetch may wait a minute
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"fails":1}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "the breaker open after the 503", func() bool { return r.gate().Breaker != forward.BreakerClosed })
	opened := time.Now()
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"while":"open"}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "the second webhook delivered", func() bool { return b.count() == 2 })
	h := b.all()[1]
	if string(h.body) != `{"while":"open"}` || h.header.Get("X-Webhook-Attempt") != "1" {
		t.Errorf("second request: %s, attempt %q; want the webhook posted while open, attempt 1", h.body, h.header.Get("X-Webhook-Attempt"))
	}
	if waited := h.at.Sub(opened); waited < firstProbe*9/10 {
		t.Errorf("the webhook posted while the breaker was open was attempted %s after it opened, before the first probe (%s)", waited, firstProbe)
	}
}

// Behind a load balancer jethook trusts, the backend gets the scheme and
// host the provider called as the load balancer told them, and the query
// string of the URL the provider called after the destination's own. From
// any other client the backend gets only what jethook saw or was told by
// its configuration (JETHOOK_PUBLIC_HOST): none of the client's claims of
// who called, how or where (RFC 7239 Forwarded, X-Real-IP, X-Forwarded-*).
func TestOnlyATrustedProxyTellsTheBackendTheSchemeHostAndClient(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	cfg := parseConfig(t, edit(t, fastRetry, `url: "${BACKEND}/hook"`, `url: "${BACKEND}/hook?from=jethook"`), b.URL)
	r := newRig(t, cfg, store.Options{})
	claims := map[string]string{
		"Forwarded":          "for=198.51.100.7;proto=https;host=evil.example",
		"X-Real-Ip":          "198.51.100.7",
		"X-Forwarded-Port":   "443",
		"X-Forwarded-Prefix": "/admin",
		"X-Forwarded-Server": "evil.example",
	}
	for i, tc := range []struct {
		name, trusted, publicHost string
		wantProto, wantHost       string
		wantClaims                bool
	}{
		{"a trusted load balancer's headers pass", "127.0.0.0/8", "", "https", "hooks.example.com", true},
		{"a trusted load balancer's host wins over the public host", "127.0.0.0/8", "jethook.example.com", "https", "hooks.example.com", true},
		{"another client's claims are dropped, its Host too", "10.0.0.0/8", "", "http", "", false},
		{"another client's Host gives way to the public host", "10.0.0.0/8", "jethook.example.com", "http", "jethook.example.com", false},
	} {
		n := i + 1
		h, err := proxy.New(cfg, r.store, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(tc.trusted)}
		h.PublicHost = tc.publicHost
		ingress := httptest.NewServer(h)
		req, _ := http.NewRequest(http.MethodPost, ingress.URL+"/hooks/shop?tenant=7&sig=a%2Fb", strings.NewReader(fmt.Sprintf(`{"n":%d}`, n)))
		req.Host = "provider.example"
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "forged.example, hooks.example.com") // the load balancer appended its own
		for k, v := range claims {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ingress.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: ingress answered %d", tc.name, resp.StatusCode)
		}
		eventually(t, "the delivery", func() bool { return b.count() == n })
		got := b.all()[n-1]
		if got.path != "/hook" || got.query != "from=jethook&tenant=7&sig=a%2Fb" {
			t.Errorf("%s: backend called at %s?%s, want /hook?from=jethook&tenant=7&sig=a%%2Fb", tc.name, got.path, got.query)
		}
		if p, h := got.header.Get("X-Forwarded-Proto"), got.header.Values("X-Forwarded-Host"); p != tc.wantProto || strings.Join(h, ",") != tc.wantHost {
			t.Errorf("%s: X-Forwarded-Proto %q, X-Forwarded-Host %q; want %q, %q", tc.name, p, h, tc.wantProto, tc.wantHost)
		}
		for k, v := range claims {
			if passed := got.header.Get(k) == v; passed != tc.wantClaims {
				t.Errorf("%s: %s reached the backend as %q; want it passed on: %v", tc.name, k, got.header.Values(k), tc.wantClaims)
			}
		}
	}
}
