package forward_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/store"
)

// tokenServer is an OAuth2 token endpoint (client credentials grant) and
// the authority a backend asks whether a token is good.
type tokenServer struct {
	*httptest.Server
	life time.Duration // each token's life

	mu      sync.Mutex
	issued  map[string]time.Time // token → expiry
	revoked map[string]bool
	fetches int
	refuse  bool // answer 401 invalid_client
}

func newTokenServer(t *testing.T, life time.Duration) *tokenServer {
	ts := &tokenServer{life: life, issued: map[string]time.Time{}, revoked: map[string]bool{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.fetches++
		w.Header().Set("Content-Type", "application/json")
		if ts.refuse || id != "jethook" || secret != "client-secret-1" || r.FormValue("grant_type") != "client_credentials" ||
			r.FormValue("scope") != "hooks.write" || r.FormValue("audience") != "https://app" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		tok := fmt.Sprintf("tok-%d", ts.fetches)
		ts.issued[tok] = time.Now().Add(ts.life)
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, tok, int(ts.life/time.Second))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// valid reports whether the Authorization header carries a token this
// server issued that has neither expired nor been revoked.
func (ts *tokenServer) valid(authz string) bool {
	tok, ok := strings.CutPrefix(authz, "Bearer ")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, issued := ts.issued[tok]
	return ok && issued && time.Now().Before(exp) && !ts.revoked[tok]
}

func (ts *tokenServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.fetches
}

func (ts *tokenServer) revokeAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for tok := range ts.issued {
		ts.revoked[tok] = true
	}
}

const oauthKeys = `auth: {oauth2: {token_url: "${TOKEN_URL}/token", client_id: jethook, client_secret: "${CLIENT_SECRET}", scopes: [hooks.write], params: {audience: "https://app"}}}`

// oauthRig runs jethook against a backend that accepts only tokens ts
// issued and still vouches for.
func oauthRig(t *testing.T, ts *tokenServer) (*rig, *backend) {
	t.Helper()
	var b *backend
	b = newBackend(t, func(n int, w http.ResponseWriter) {
		if !ts.valid(b.all()[n-1].header.Get("Authorization")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	env := map[string]string{"BACKEND": b.URL, "TOKEN_URL": ts.URL, "CLIENT_SECRET": "client-secret-1"}
	return newRig(t, apptest.Config(t, withDestination(t, oauthKeys), env), store.Options{}), b
}

func TestAnOAuth2TokenIsFetchedOnceKeptAndRefreshedBeforeItExpires(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 2*time.Second)
	r, b := oauthRig(t, ts)
	for i := range 3 {
		r.send(nil, fmt.Sprintf(`{"n":%d}`, i))
	}
	eventually(t, "three deliveries", func() bool { return b.count() == 3 })
	received := time.Now() // jethook has had the token since before this
	if n := ts.count(); n != 1 {
		t.Errorf("%d token requests for three deliveries, want 1", n)
	}
	// Once the token is near its end (a quarter of its life left, a
	// minute at most), the next attempt comes with a new one. jethook
	// counts the life from when the token reached it, a little after the
	// server issued it, so the wait is counted from a time after both.
	first := b.all()[0].header.Get("Authorization")
	due := received.Add(ts.life - ts.life/4)
	eventually(t, "the token due for refresh", func() bool { return time.Now().After(due) })
	r.send(nil, `{"n":3}`)
	eventually(t, "a fourth delivery", func() bool { return b.count() == 4 })
	hits := b.all()
	if got := hits[3].header.Get("Authorization"); got == first || !strings.HasPrefix(got, "Bearer tok-") {
		t.Errorf("fourth delivery's Authorization %q, the first's %q", got, first)
	}
	if n := ts.count(); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
	for i, h := range hits {
		if h.header.Get("X-Webhook-Attempt") != "1" {
			t.Errorf("delivery %d was attempt %s: a backend refused a token", i+1, h.header.Get("X-Webhook-Attempt"))
		}
	}
}

func TestA401ToARevokedTokenFetchesANewOneAndSendsAgainWithinTheSameAttempt(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, time.Hour)
	r, b := oauthRig(t, ts)
	r.send(nil, `{"n":1}`)
	eventually(t, "a first delivery", func() bool { return b.count() == 1 })
	ts.revokeAll()
	id := r.send(nil, `{"n":2}`)
	eventually(t, "the event delivered", func() bool { return r.state("shop", id, "app") == "delivered" })
	hits := b.all()
	if len(hits) != 3 {
		t.Fatalf("the backend got %d requests, want 3 (one, then a refused token and its new one)", len(hits))
	}
	if hits[1].header.Get("Authorization") == hits[2].header.Get("Authorization") {
		t.Error("the request after the 401 carried the same token")
	}
	for _, h := range hits[1:] {
		if got := h.header.Get("X-Webhook-Attempt"); got != "1" {
			t.Errorf("X-Webhook-Attempt %s, want 1: the refused token must not cost an attempt", got)
		}
	}
	if as := r.attemptLog(id); len(as) != 1 || as[0].Outcome != "delivered" {
		t.Errorf("attempt log %+v, want one delivered attempt", as)
	}
	if n := ts.count(); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

func TestATokenEndpointThatRefusesIsADestinationFailureWithItsOwnReason(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, time.Hour)
	ts.mu.Lock()
	ts.refuse = true
	ts.mu.Unlock()
	r, b := oauthRig(t, ts)
	id := r.send(nil, `{"n":1}`)
	eventually(t, "two attempts logged", func() bool { return len(r.attemptLog(id)) >= 2 })
	for _, a := range r.attemptLog(id) {
		if a.Outcome != "transient" || a.Error != `oauth2 token endpoint: status 401, error "invalid_client"` {
			t.Errorf("attempt %d: outcome %q, error %q", a.Attempt, a.Outcome, a.Error)
		}
	}
	if n := b.count(); n != 0 {
		t.Errorf("the backend got %d requests without a token", n)
	}
	// The endpoint comes back: the event's next retry delivers it.
	ts.mu.Lock()
	ts.refuse = false
	ts.mu.Unlock()
	eventually(t, "the event delivered", func() bool { return r.state("shop", id, "app") == "delivered" })
}

func TestATokenEndpointWhoseNameResolvesToARefusedAddressIsAPermanentFailure(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	// The backend by name too, so that the rules refusing loopback do not
	// refuse the configuration; the token comes first, and is refused.
	backend := strings.Replace(b.URL, "127.0.0.1", "localhost", 1)
	env := map[string]string{"BACKEND": backend, "TOKEN_URL": "http://localhost:9/latest", "CLIENT_SECRET": "client-secret-1"}
	r := newRig(t, apptest.Config(t, withDestination(t, oauthKeys), env), store.Options{}, refuseLoopback)
	id := r.send(nil, `{"n":1}`)
	eventually(t, "a dead letter", func() bool { return len(r.deadLetters()) == 1 })
	if dl := r.deadLetters()[0]; dl.Reason != "permanent" || !refusedLoopback(dl.LastError) {
		t.Errorf("dead letter: reason %q, error %q", dl.Reason, dl.LastError)
	}
	eventually(t, "the attempt logged", func() bool { return len(r.attemptLog(id)) == 1 })
	if n := b.count(); n != 0 {
		t.Errorf("the backend got %d requests", n)
	}
}
