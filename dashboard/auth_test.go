package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestABrowserWithoutASessionSeesOnlyTheLoginPage(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	for _, path := range []string{"/", "/events", "/deadletters", "/deadletters/1", "/events/x", "/nothing-here"} {
		got := r.do(c, http.MethodGet, path, nil, nil)
		if got.code != http.StatusSeeOther || got.header.Get("Location") != "/login?next="+url.QueryEscape(path) {
			t.Errorf("GET %s: %d to %q, want 303 to the login page", path, got.code, got.header.Get("Location"))
		}
	}
	for _, path := range []string{"/deadletters/replay", "/deadletters/purge", "/destinations/shop/app/pause", "/logout"} {
		if got := r.do(c, http.MethodPost, path, url.Values{"seq": {"1"}}, nil); got.code != http.StatusUnauthorized {
			t.Errorf("POST %s: %d, want 401", path, got.code)
		}
	}
	login := r.do(c, http.MethodGet, "/login", nil, nil)
	if login.code != http.StatusOK || !strings.Contains(login.body, `type="password" name="token"`) {
		t.Fatalf("login page: %d", login.code)
	}
	if got := r.do(c, http.MethodGet, "/static/app.js", nil, nil); got.code != http.StatusOK {
		t.Errorf("the script needs no session: %d", got.code)
	}
}

func TestLoggingInSetsAStrictHttpOnlyCookieThatIsNotTheToken(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	wrong := r.do(c, http.MethodPost, "/login", url.Values{"token": {"guess"}}, nil)
	if wrong.code != http.StatusUnauthorized || wrong.header.Get("Set-Cookie") != "" || !strings.Contains(wrong.body, "not the admin token") {
		t.Fatalf("wrong token: %d, cookie %q", wrong.code, wrong.header.Get("Set-Cookie"))
	}
	ok := r.do(c, http.MethodPost, "/login", url.Values{"token": {token}, "next": {"/deadletters?route=shop"}}, nil)
	if ok.code != http.StatusSeeOther || ok.header.Get("Location") != "/deadletters?route=shop" {
		t.Fatalf("login: %d to %q", ok.code, ok.header.Get("Location"))
	}
	cookie := ok.header.Get("Set-Cookie")
	for _, want := range []string{"jethook_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, token) {
		t.Errorf("the cookie holds the token: %q", cookie)
	}
	if got := r.do(c, http.MethodGet, "/", nil, nil); got.code != http.StatusOK || !strings.Contains(got.body, "shop → app") {
		t.Fatalf("overview with the session: %d", got.code)
	}

	// A forged or altered cookie is no session.
	for _, forged := range []string{"4102444800.bm9uY2U.c2ln", strings.Split(strings.TrimPrefix(cookie, "jethook_session="), ";")[0] + "x"} {
		other := &http.Client{CheckRedirect: c.CheckRedirect}
		got := r.do(other, http.MethodGet, "/", nil, map[string]string{"Cookie": "jethook_session=" + forged})
		if got.code != http.StatusSeeOther {
			t.Errorf("cookie %q: %d, want a redirect to the login page", forged, got.code)
		}
	}

	// The login form sends nowhere but this site.
	for _, next := range []string{"//evil.example/", "https://evil.example/", `/\evil.example`, "/\t/evil.example", "/%zz"} {
		got := r.do(r.client(), http.MethodPost, "/login", url.Values{"token": {token}, "next": {next}}, nil)
		if got.header.Get("Location") != "/" {
			t.Errorf("next=%q: sent to %q, want /", next, got.header.Get("Location"))
		}
	}

	// Logging out drops the cookie.
	out := r.do(c, http.MethodPost, "/logout", url.Values{"csrf": {r.csrf(c)}}, nil)
	if out.code != http.StatusSeeOther || !strings.Contains(out.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %q", out.code, out.header.Get("Set-Cookie"))
	}
	if got := r.do(c, http.MethodGet, "/", nil, nil); got.code != http.StatusSeeOther {
		t.Fatalf("after logout: %d, want a redirect to the login page", got.code)
	}
}

func TestTheBearerTokenWorksWithoutASession(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	bearer := map[string]string{"Authorization": "Bearer " + token}
	if got := r.do(c, http.MethodGet, "/", nil, bearer); got.code != http.StatusOK || !strings.Contains(got.body, "shop → app") {
		t.Fatalf("overview with the bearer token: %d", got.code)
	}
	// No cookie rides along with a bearer token, so no CSRF token is needed.
	if got := r.do(c, http.MethodPost, "/destinations/shop/app/pause", url.Values{}, bearer); got.code != http.StatusSeeOther {
		t.Fatalf("pause with the bearer token: %d %s", got.code, got.body)
	}
	if got := r.do(c, http.MethodGet, "/", nil, map[string]string{"Authorization": "Bearer wrong"}); got.code != http.StatusSeeOther {
		t.Fatalf("a wrong bearer token: %d, want the login page", got.code)
	}
}

// Guessing the token through the login form is bounded: after ten wrong
// tokens (from anyone) no token is checked for a while, the right one
// included, while the bearer token keeps working.
func TestWrongLoginsAreBoundedAndStopBeingChecked(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	for i := range 10 {
		if got := r.do(c, http.MethodPost, "/login", url.Values{"token": {"guess"}}, nil); got.code != http.StatusUnauthorized {
			t.Fatalf("wrong login %d: %d, want 401", i+1, got.code)
		}
	}
	for _, tok := range []string{"guess", token} {
		got := r.do(c, http.MethodPost, "/login", url.Values{"token": {tok}}, nil)
		if got.code != http.StatusTooManyRequests || got.header.Get("Retry-After") == "" || got.header.Get("Set-Cookie") != "" {
			t.Errorf("a login after ten wrong ones: %d, Retry-After %q, cookie %q; want 429 with Retry-After and no session",
				got.code, got.header.Get("Retry-After"), got.header.Get("Set-Cookie"))
		}
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	if got := r.do(c, http.MethodGet, "/", nil, bearer); got.code != http.StatusOK {
		t.Errorf("the bearer token while logins are held: %d, want 200", got.code)
	}
}

func TestWithoutATokenTheDashboardSaysHowToSetOne(t *testing.T) {
	t.Parallel()
	r := newRig(t, "")
	c := r.client()
	for _, path := range []string{"/", "/login"} {
		got := r.do(c, http.MethodGet, path, nil, nil)
		if got.code != http.StatusForbidden || !strings.Contains(got.body, "JETHOOK_ADMIN_TOKEN") {
			t.Errorf("GET %s: %d, want 403 naming JETHOOK_ADMIN_TOKEN", path, got.code)
		}
	}
	if got := r.do(c, http.MethodPost, "/login", url.Values{"token": {""}}, nil); got.code != http.StatusForbidden {
		t.Errorf("an empty token logs in: %d", got.code)
	}
}

func TestEveryStateChangeNeedsTheSessionsCSRFToken(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	c := r.client()
	csrf := r.login(c)
	other := r.client()
	otherCSRF := r.login(other)
	if otherCSRF == csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	paused := func() bool { return r.fwd.Status()[0].Paused }
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"a wrong token", url.Values{"csrf": {"x" + csrf}}, nil},
		{"another session's token", url.Values{"csrf": {otherCSRF}}, nil},
		{"a cross-site request with the right token", url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"another origin with the right token", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			for _, path := range []string{"/destinations/shop/app/pause", "/deadletters/purge", "/deadletters/replay", "/logout"} {
				form := url.Values{"seq": {"1"}, "confirm": {"1"}}
				for k, v := range tc.form {
					form[k] = v
				}
				if got := r.do(c, http.MethodPost, path, form, tc.hdr); got.code != http.StatusForbidden {
					t.Errorf("POST %s: %d, want 403", path, got.code)
				}
			}
		})
	}
	if paused() {
		t.Fatal("a refused request paused the destination")
	}
	if got := r.do(c, http.MethodPost, "/destinations/shop/app/pause", url.Values{"csrf": {csrf}}, nil); got.code != http.StatusSeeOther || !paused() {
		t.Fatalf("pause with the token: %d, paused %v", got.code, paused())
	}
	if got := r.do(c, http.MethodPost, "/destinations/shop/app/resume", nil, map[string]string{"X-CSRF-Token": csrf}); got.code != http.StatusSeeOther || paused() {
		t.Fatalf("resume with the token in the header: %d, paused %v", got.code, paused())
	}
}
