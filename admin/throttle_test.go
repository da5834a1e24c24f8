package admin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jethook/jethook/admin"
)

// Guessing the admin token with bearer requests is bounded like the login
// form: after ten wrong tokens (from anyone, to the API or the dashboard)
// no bearer token is checked for a while, the right one included. The
// login form keeps its own budget, so an operator can still log in.
func TestWrongBearerTokensAreBoundedAndStopBeingChecked(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for i := range admin.WrongTokens {
		path := "/v1/status"
		if i%2 == 1 {
			path = "/" // the dashboard takes bearer tokens too
		}
		req, _ := http.NewRequest(http.MethodGet, r.admin.URL+path, nil)
		req.Header.Set("Authorization", "Bearer guess")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("wrong token %d to %s: %d", i+1, path, resp.StatusCode)
		}
	}
	for _, tok := range []string{"guess", token} {
		for _, path := range []string{"/v1/status", "/"} {
			req, _ := http.NewRequest(http.MethodGet, r.admin.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s after ten wrong tokens, with the right one: %v: %d, Retry-After %q; want 429 with Retry-After",
					path, tok == token, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		}
	}
	resp, err := noRedirect.PostForm(r.admin.URL+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "jethook_session") {
		t.Errorf("a login with the right token while bearer tokens are held: %d, want 303 with a session", resp.StatusCode)
	}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
