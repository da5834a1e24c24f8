package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

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
		{"metrics need no token", "/metrics", "", http.StatusOK},
		{"the API refuses a request without a token", "/v1/status", "", http.StatusUnauthorized},
		{"the API refuses a wrong token", "/v1/status", "wrong", http.StatusUnauthorized},
		{"the API refuses a token that is a prefix of the right one", "/v1/status", token[:5], http.StatusUnauthorized},
		{"the API answers the right token", "/v1/status", token, http.StatusOK},
		{"an unknown API path needs the token too", "/v1/nope", "", http.StatusUnauthorized},
		{"an unknown API path is not found", "/v1/nope", token, http.StatusNotFound},
		{"the Go profiler needs the token", "/debug/pprof/goroutine?debug=1", "", http.StatusUnauthorized},
		{"the Go profiler answers the right token", "/debug/pprof/goroutine?debug=1", token, http.StatusOK},
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
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}})
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
	if code := call(t, srv.URL, "", http.MethodGet, "/metrics", nil, &e); code != http.StatusNotFound {
		t.Errorf("metrics without a registry: %d, want 404", code)
	}
}

func TestReadyzIsUnavailableUntilTheConfigurationIsLoaded(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}, Ready: func(context.Context) error {
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
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}, Token: token})
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

func TestReadyzNamesWhyTheStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	st, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}})
	t.Cleanup(srv.Close)
	st.Close()
	var e struct{ Error, Reason, Message string }
	if code := call(t, srv.URL, "", http.MethodGet, "/readyz", nil, &e); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the store closed: %d, want 503", code)
	}
	if e.Error != "not_ready" || !slices.Contains(store.Reasons, e.Reason) || !strings.Contains(e.Message, e.Reason) {
		t.Errorf("readyz with the store closed: %+v; want not_ready with one of %v as reason, named in the message", e, store.Reasons)
	}
}

func TestReadyzAnswersWithinItsBoundWhateverTheChecksDo(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{})
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: st}, Ready: func(context.Context) error {
		<-stuck // ignores its context, as a wedged dependency would
		return nil
	}})
	t.Cleanup(srv.Close)
	// readyz's bound is 2s: a client giving up after 10s means it has none.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatalf("readyz with a check that never returns: %v", err)
	}
	defer resp.Body.Close()
	var e struct{ Error, Message string }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error != "not_ready" || !strings.Contains(e.Message, "no answer") {
		t.Errorf("readyz with a check that never returns: %d %+v, want 503 not_ready saying there was no answer", resp.StatusCode, e)
	}
}
