package pull_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

const (
	tokenA     = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB     = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	adminToken = "admin-token-admin-token-admin-token"
)

// twoListeners: two developers, each with a pull destination of one
// route, and a fast schedule of 3 attempts.
const twoListeners = `
defaults:
  retry: {backoff: exponential, base: 20ms, multiplier: 2, max_delay: 100ms, jitter: none, max_attempts: 3, max_age: 1h, retry_after_max: 5s}
routes:
  - name: shop
    path: /hooks/shop
    timeout: 500ms
    destinations:
      - {name: alice, pull: {token: "${TOKEN_A}"}}
      - {name: bob, pull: {token: "${TOKEN_B}"}, filter: 'body.type == "order.paid"'}
`

type rig struct {
	t      *testing.T
	app    *app.App
	public *httptest.Server
	admin  *httptest.Server
}

// pullEnv holds the tokens the pull configs name.
var pullEnv = map[string]string{"TOKEN_A": tokenA, "TOKEN_B": tokenB}

func newRig(t *testing.T, yaml string) *rig {
	t.Helper()
	return startRig(t, yaml, app.Options{AdminToken: adminToken})
}

// startRig runs yaml with o on apptest's rig.
func startRig(t *testing.T, yaml string, o app.Options) *rig {
	t.Helper()
	jh := apptest.Start(t, apptest.Config(t, yaml, pullEnv), o)
	return &rig{t: t, app: jh.App, public: jh.Public, admin: jh.Admin}
}

func (r *rig) send(body string, header http.Header, query string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.public.URL+"/hooks/shop"+query, strings.NewReader(body))
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("ingress: %d", resp.StatusCode)
	}
}

type webhook struct {
	Lease       string      `json:"lease"`
	EventID     string      `json:"event_id"`
	Attempt     int         `json:"attempt"`
	Redelivered bool        `json:"redelivered"`
	Method      string      `json:"method"`
	Query       string      `json:"query"`
	Header      http.Header `json:"header"`
	Body        []byte      `json:"body"`
}

// call posts body (JSON unless a string) with token to path on the public
// listener and decodes the answer into out; it returns the status.
func (r *rig) call(path, token string, body any, out any) int {
	r.t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(http.MethodPost, r.public.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/json" {
		r.t.Fatalf("%s: %d with Content-Type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			r.t.Fatalf("%s: %d: %v: %s", path, resp.StatusCode, err, raw)
		}
	}
	return resp.StatusCode
}

// pull long-polls dest for up to wait and returns what it leased.
func (r *rig) pull(dest, token string, wait time.Duration) []webhook {
	r.t.Helper()
	var out struct{ Webhooks []webhook }
	if code := r.call(fmt.Sprintf("/v1/pull/shop/%s?max=10&wait=%s", dest, wait), token, nil, &out); code != http.StatusOK {
		r.t.Fatalf("pull %s: %d", dest, code)
	}
	return out.Webhooks
}

type settled struct {
	Settled int      `json:"settled"`
	Gone    []string `json:"gone"`
}

func (r *rig) settle(dest, verb string, body map[string]any) settled {
	r.t.Helper()
	var out settled
	if code := r.call("/v1/pull/shop/"+dest+"/"+verb, tokenA, body, &out); code != http.StatusOK {
		r.t.Fatalf("%s %s: %d", verb, dest, code)
	}
	return out
}

// attempts reads the attempt log of event id at alice until it has n
// entries.
func (r *rig) attempts(id string, n int) []store.Attempt {
	r.t.Helper()
	var as []store.Attempt
	testkit.Eventually(r.t, 10*time.Second, fmt.Sprintf("%d attempts of %s logged", n, id), func() bool {
		all, err := r.app.Store.Attempts(context.Background(), id)
		as = as[:0]
		for _, a := range all {
			if a.Destination == "alice" {
				as = append(as, a)
			}
		}
		return err == nil && len(as) >= n
	})
	return as
}

func TestAPulledWebhookIsTheRequestAPushAttemptWouldMakeAndAnAckDeliversIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	body := "{\"type\":\"order.paid\",\"bytes\":\"\\u00e9\\t\"}\n\x00\xff"
	r.send(body, http.Header{"X-Signature": {"sig=1"}, "Content-Type": {"application/json"}}, "?a=1&b=%20")

	got := r.pull("alice", tokenA, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("leased %d webhooks, want 1", len(got))
	}
	w := got[0]
	if string(w.Body) != body || w.Method != http.MethodPost || w.Query != "a=1&b=%20" || w.Attempt != 1 || w.Redelivered {
		t.Fatalf("leased %+v", w)
	}
	if w.Header.Get("X-Signature") != "sig=1" || w.Header.Get("Content-Type") != "application/json" ||
		w.Header.Get("X-Webhook-Id") != w.EventID || w.Header.Get("X-Webhook-Attempt") != "1" {
		t.Fatalf("headers %v", w.Header)
	}
	if again := r.pull("alice", tokenA, 0); len(again) != 0 {
		t.Fatalf("a leased webhook was leased again: %+v", again)
	}
	if s := r.settle("alice", "ack", map[string]any{"leases": []string{w.Lease, "999999"}}); s.Settled != 1 || len(s.Gone) != 1 || s.Gone[0] != "999999" {
		t.Fatalf("ack: %+v", s)
	}
	as := r.attempts(w.EventID, 1)
	if as[0].Outcome != "delivered" || as[0].Attempt != 1 {
		t.Fatalf("attempt log %+v", as)
	}
	// The body is not JSON, so bob's filter does not match it: his copy
	// is settled when he pulls, without a lease, and nothing waits.
	if b := r.pull("bob", tokenB, 0); len(b) != 0 {
		t.Fatalf("bob leased %+v", b)
	}
	storetest.Settled(t, r.app.Store)
}

func TestANakAndALeaseThatRunsOutAreFailedAttemptsAndTheLastIsADeadLetter(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	r.send(`{"type":"x"}`, nil, "")

	first := r.pull("alice", tokenA, 5*time.Second)
	if len(first) != 1 {
		t.Fatalf("leased %d", len(first))
	}
	id := first[0].EventID
	if s := r.settle("alice", "nak", map[string]any{"leases": []string{first[0].Lease}, "status": 503, "error": "local app down"}); s.Settled != 1 {
		t.Fatalf("nak: %+v", s)
	}
	second := r.pull("alice", tokenA, 5*time.Second)
	if len(second) != 1 || second[0].EventID != id || second[0].Attempt != 2 || !second[0].Redelivered ||
		second[0].Header.Get("X-Webhook-Attempt") != "2" {
		t.Fatalf("after the nak: %+v", second)
	}
	// Not settled: the lease runs out after the route's timeout (500ms),
	// which is the third attempt; the third fails too and is the last.
	third := r.pull("alice", tokenA, 5*time.Second)
	if len(third) != 1 || third[0].Attempt != 3 {
		t.Fatalf("after the lease ran out: %+v", third)
	}
	if s := r.settle("alice", "ack", map[string]any{"leases": []string{second[0].Lease}}); s.Settled != 0 {
		t.Fatalf("an expired lease was acked: %+v", s)
	}
	r.settle("alice", "nak", map[string]any{"leases": []string{third[0].Lease}, "status": 500})

	as := r.attempts(id, 3)
	if as[0].Status != 503 || as[0].Error != "local app down" || as[1].Error == "" || as[2].Status != 500 {
		t.Fatalf("attempt log %+v", as)
	}
	var dead []store.DeadLetter
	testkit.Eventually(t, 10*time.Second, "the dead letter", func() bool {
		dead, _ = r.app.Store.DeadLetters(context.Background(), "dlq.shop.alice.>", 10)
		return len(dead) == 1
	})
	if d := dead[0]; d.Reason != "exhausted" || d.Attempts != 3 || d.LastStatus != 500 || d.Envelope.EventID != id {
		t.Fatalf("dead letter %+v", d)
	}

	// A replayed dead letter goes back to the pull destination.
	if _, err := r.app.Service.ReplaySeqs(context.Background(), []uint64{dead[0].DLQSeq}, ""); err != nil {
		t.Fatal(err)
	}
	replayed := r.pull("alice", tokenA, 5*time.Second)
	if len(replayed) != 1 || replayed[0].EventID != id || !replayed[0].Redelivered {
		t.Fatalf("after the replay: %+v", replayed)
	}
	r.settle("alice", "ack", map[string]any{"leases": []string{replayed[0].Lease}})
	r.pull("bob", tokenB, 0) // bob's filter drops his copy
	storetest.Settled(t, r.app.Store)
}

func TestANakWithADelayWaitsThatLong(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	r.send(`{}`, nil, "")
	w := r.pull("alice", tokenA, 5*time.Second)
	nakked := time.Now()
	r.settle("alice", "nak", map[string]any{"leases": []string{w[0].Lease}, "delay": "1s"})
	again := r.pull("alice", tokenA, 5*time.Second)
	if waited := time.Since(nakked); len(again) != 1 || waited < time.Second {
		t.Fatalf("offered again after %s: %+v", waited, again)
	}
}

func TestAFilterDropsWebhooksBeforeTheyAreLeased(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	r.send(`{"type":"order.created"}`, nil, "")
	r.send(`{"type":"order.paid"}`, nil, "")
	got := r.pull("bob", tokenB, 5*time.Second)
	for len(got) < 1 {
		got = r.pull("bob", tokenB, 5*time.Second)
	}
	if len(got) != 1 || string(got[0].Body) != `{"type":"order.paid"}` {
		t.Fatalf("bob leased %+v", got)
	}
}

func TestAPullTokenOpensItsOwnDestinationAndNothingElse(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	r.send(`{"type":"order.paid"}`, nil, "")
	var e struct{ Error, Message string }
	for _, c := range []struct{ name, path, token string }{
		{"no token", "/v1/pull/shop/alice", ""},
		{"the other destination's token", "/v1/pull/shop/alice?wait=1s", tokenB},
		{"the other destination's token on ack", "/v1/pull/shop/alice/ack", tokenB},
		{"the admin token", "/v1/pull/shop/alice", adminToken},
		{"a token on a destination that does not exist", "/v1/pull/shop/carol", tokenA},
		{"a token on a route that does not exist", "/v1/pull/nope/alice", tokenA},
	} {
		if code := r.call(c.path, c.token, map[string]any{"leases": []string{"1"}}, &e); code != http.StatusUnauthorized || e.Error != "unauthorized" {
			t.Errorf("%s: %d %+v", c.name, code, e)
		}
	}
	// Nothing was leased by those: alice's webhook is there.
	if got := r.pull("alice", tokenA, 5*time.Second); len(got) != 1 {
		t.Fatalf("alice leased %d", len(got))
	}
	// A pull token opens neither the admin API nor the dashboard: it
	// gets what no token gets.
	for _, path := range []string{"/v1/status", "/v1/deadletters", "/", "/deadletters"} {
		code, page := r.adminGet(path, tokenA)
		anon, _ := r.adminGet(path, "")
		if code != anon || strings.Contains(page, "alice") || strings.Contains(page, "order.paid") {
			t.Errorf("admin %s with a pull token: %d (without a token %d)", path, code, anon)
		}
		if strings.HasPrefix(path, "/v1/") && code != http.StatusUnauthorized {
			t.Errorf("admin %s with a pull token: %d", path, code)
		}
	}
}

func (r *rig) adminGet(path, token string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.admin.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestBadPullsAreRefusedWithAReason(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoListeners)
	var e struct{ Error, Message string }
	for _, c := range []struct {
		path string
		body any
		want int
	}{
		{"/v1/pull/shop/alice?max=0", nil, http.StatusBadRequest},
		{"/v1/pull/shop/alice?max=100000", nil, http.StatusBadRequest},
		{"/v1/pull/shop/alice?wait=1h", nil, http.StatusBadRequest},
		{"/v1/pull/shop/alice?wait=soon", nil, http.StatusBadRequest},
		{"/v1/pull/shop/alice/ack", map[string]any{}, http.StatusBadRequest},
		{"/v1/pull/shop/alice/ack", map[string]any{"leases": []string{"1"}, "extra": 1}, http.StatusBadRequest},
		{"/v1/pull/shop/alice/nak", map[string]any{"leases": []string{"1"}, "delay": "-1s"}, http.StatusBadRequest},
		{"/v1/pull/shop/alice/ack", map[string]any{"leases": []string{strings.Repeat("1", 2<<20)}}, http.StatusRequestEntityTooLarge},
		{"/v1/pull/shop/alice/other", nil, http.StatusNotFound},
	} {
		if code := r.call(c.path, tokenA, c.body, &e); code != c.want || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d with a reason", c.path, code, e, c.want)
		}
	}
}

func TestLeasesOutliveAReloadAndARemovedDestinationsTokenStopsWorking(t *testing.T) {
	t.Parallel()
	next := twoListeners
	r := startRig(t, twoListeners, app.Options{
		Load: func() (*policy.Config, error) { return apptest.Config(t, next, pullEnv), nil },
	})
	a := r.app

	r.send(`{"type":"order.paid"}`, nil, "")
	w := r.pull("alice", tokenA, 5*time.Second)
	if len(w) != 1 {
		t.Fatalf("leased %d", len(w))
	}
	// alice gets a longer lease; bob is removed.
	next = strings.Replace(twoListeners, `{name: alice, pull: {token: "${TOKEN_A}"}}`, `{name: alice, pull: {token: "${TOKEN_A}"}, timeout: 5s}`, 1)
	next = next[:strings.Index(next, "      - {name: bob")]
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := r.settle("alice", "ack", map[string]any{"leases": []string{w[0].Lease}}); s.Settled != 1 {
		t.Fatalf("the lease did not outlive the reload: %+v", s)
	}
	if code := r.call("/v1/pull/shop/bob", tokenB, nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("a removed destination's token: %d", code)
	}
}

func TestTheStatusShowsAPullDestinationAndWhatItHasLeased(t *testing.T) {
	t.Parallel()
	r := newRig(t, strings.Replace(twoListeners, "timeout: 500ms", "timeout: 30s", 1))
	for i := range 3 {
		r.send(fmt.Sprintf(`{"n":%d}`, i), nil, "")
	}
	var w []webhook
	for len(w) < 3 {
		w = append(w, r.pull("alice", tokenA, 5*time.Second)...)
	}
	type dest struct {
		Destination string
		URL         *string `json:"url"`
		Pull        bool    `json:"pull"`
		Leased      int     `json:"leased"`
		InFlight    int     `json:"in_flight"`
		InBackoff   int     `json:"in_backoff"`
		Pending     int     `json:"pending"`
	}
	alice := func() dest {
		t.Helper()
		code, raw := r.adminGet("/v1/status", adminToken)
		var st struct{ Destinations []dest }
		if err := json.Unmarshal([]byte(raw), &st); err != nil || code != http.StatusOK {
			t.Fatalf("status: %d %v: %s", code, err, raw)
		}
		for _, d := range st.Destinations {
			if d.Destination == "alice" {
				return d
			}
		}
		t.Fatalf("no alice in %s", raw)
		return dest{}
	}
	if d := alice(); !d.Pull || d.URL == nil || *d.URL != "" || d.Leased != 3 || d.InFlight != 0 || d.InBackoff != 0 || d.Pending != 0 {
		t.Fatalf("with 3 leased: %+v", d)
	}
	r.settle("alice", "ack", map[string]any{"leases": []string{w[0].Lease}})
	r.settle("alice", "nak", map[string]any{"leases": []string{w[1].Lease}, "delay": "5s"})
	var d dest
	testkit.Eventually(t, 10*time.Second, "one leased and one in backoff", func() bool {
		d = alice()
		return d.Leased == 1 && d.InBackoff == 1
	})
	if d.Pending != 0 || d.InFlight != 0 {
		t.Fatalf("after an ack and a nak: %+v", d)
	}
}

// A lease that nats.go dropped is no attempt: a proxy holds the server's
// answer to a pull that waits for nothing past the second after which
// nats.go gives up on it, as a stalled process would; JetStream counted
// the webhook delivered and sends it again after its ack wait. Its lease
// is then its first attempt, and not a redelivery.
func TestAWebhookDroppedFromAPullAfterAStallIsLeasedAsItsFirstAttempt(t *testing.T) {
	t.Parallel()
	px := testkit.NewHoldingProxy(t, testkit.NATSServer(t))
	px.Only("$JS.ACK." + store.StreamName + "." + store.ConsumerName("shop", "alice") + ".")
	st := storetest.Open(t, store.Options{URL: px.URL, PublishTimeout: 10 * time.Second})
	jh := apptest.Start(t, apptest.Config(t, twoListeners, pullEnv), app.Options{AdminToken: adminToken, Store: st})
	r := &rig{t: t, app: jh.App, public: jh.Public, admin: jh.Admin}

	r.send(`{"type":"order.created"}`, nil, "")
	px.HoldNext(1500 * time.Millisecond)
	if got := r.pull("alice", tokenA, 0); len(got) != 0 {
		t.Fatalf("the held pull leased %d webhooks; the proxy did not hold its answer", len(got))
	}
	if !px.Held() {
		t.Fatal("the proxy held back no delivery")
	}
	// The ack wait is the timeout (500 ms) and 5 s.
	var got []webhook
	testkit.Eventually(t, 30*time.Second, "the webhook leased again", func() bool {
		got = r.pull("alice", tokenA, 2*time.Second)
		return len(got) > 0
	})
	if got[0].Attempt != 1 || got[0].Redelivered {
		t.Errorf("leased as attempt %d, redelivered %v; want attempt 1, not redelivered", got[0].Attempt, got[0].Redelivered)
	}
	if !strings.Contains(jh.Log.String(), "a fetch ended late") {
		t.Errorf("no fetch ended late, so nothing was dropped; log:\n%s", jh.Log.String())
	}
}
