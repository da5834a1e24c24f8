package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestProbesAreOpenAndTheAPINeedsTheBearerToken(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"healthz needs no token", "/healthz", "", http.StatusOK},
		{"readyz needs no token", "/readyz", "", http.StatusOK},
		{"metrics without a registry is not found", "/metrics", "", http.StatusNotFound},
		{"the API refuses a request without a token", "/v1/status", "", http.StatusUnauthorized},
		{"the API refuses a wrong token", "/v1/status", "wrong", http.StatusUnauthorized},
		{"the API refuses a token that is a prefix of the right one", "/v1/status", token[:5], http.StatusUnauthorized},
		{"the API answers the right token", "/v1/status", token, http.StatusOK},
		{"an unknown API path needs the token too", "/v1/nope", "", http.StatusUnauthorized},
		{"an unknown API path is not found", "/v1/nope", token, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e struct{ Error, Message string }
			out := any(nil)
			if tc.want != http.StatusOK {
				out = &e
			}
			if code := call(t, r.admin.URL, tc.token, http.MethodGet, tc.path, nil, out); code != tc.want {
				t.Fatalf("%s: %d, want %d", tc.path, code, tc.want)
			}
			if tc.want != http.StatusOK && (e.Error == "" || e.Message == "") {
				t.Errorf("error answer %+v lacks error or message", e)
			}
		})
	}
}

func TestWithoutATokenConfiguredTheAPIIsForbidden(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	srv := httptest.NewServer(&admin.Handler{Store: st})
	t.Cleanup(srv.Close)
	var e struct{ Error, Message string }
	if code := call(t, srv.URL, "anything", http.MethodGet, "/v1/status", nil, &e); code != http.StatusForbidden {
		t.Fatalf("%d, want 403", code)
	}
	if e.Message == "" || e.Error != "forbidden" {
		t.Errorf("answer %+v", e)
	}
	if code := call(t, srv.URL, "", http.MethodGet, "/healthz", nil, nil); code != http.StatusOK {
		t.Errorf("healthz %d", code)
	}
}

func TestReadyzIsUnavailableUntilTheConfigurationIsLoaded(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	srv := httptest.NewServer(&admin.Handler{Store: st, Ready: func(context.Context) error {
		return errors.New("configuration not loaded")
	}})
	t.Cleanup(srv.Close)
	var e struct{ Error, Message string }
	if code := call(t, srv.URL, "", http.MethodGet, "/readyz", nil, &e); code != http.StatusServiceUnavailable {
		t.Fatalf("%d, want 503", code)
	}
	if e.Message != "configuration not loaded" {
		t.Errorf("reason %q", e.Message)
	}
}

func TestAnEndpointAskedWithTheWrongMethodAnswers405WithAllow(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	srv := httptest.NewServer(&admin.Handler{Store: st, Token: token})
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{http.MethodGet, "/v1/reload", http.StatusMethodNotAllowed, "POST"},
		{http.MethodGet, "/v1/destinations/shop/app/pause", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPut, "/v1/deadletters", http.StatusMethodNotAllowed, "GET, DELETE"},
		{http.MethodDelete, "/v1/status", http.StatusMethodNotAllowed, "GET"},
		{http.MethodGet, "/v1/nope", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/nope", http.StatusNotFound, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error, Message string }
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tc.want || resp.Header.Get("Allow") != tc.allow || e.Error == "" || e.Message == "" {
				t.Fatalf("%d Allow %q %+v, want %d Allow %q with a reason", resp.StatusCode, resp.Header.Get("Allow"), e, tc.want, tc.allow)
			}
		})
	}
}
