package admin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// A web page can make a browser send requests to the admin listener by
// pointing its own name at 127.0.0.1 (DNS rebinding); the browser then
// sends the page's name as the Host, which the listener refuses.
func TestTheAdminListenerAnswersOnlyToItsOwnNames(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&admin.Handler{Service: &admin.Service{Store: storetest.Open(t, store.Options{})}, Hosts: []string{"jethook.internal"}})
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, host string
		want       int // 421, or 200 for any answer but 421
	}{
		{"a loopback address", "127.0.0.1:8081", http.StatusOK},
		{"the IPv6 loopback", "[::1]:8081", http.StatusOK},
		{"any address, such as a probe's pod IP", "10.1.2.3:8081", http.StatusOK},
		{"localhost", "localhost:8081", http.StatusOK},
		{"a name under .localhost", "jethook.localhost", http.StatusOK},
		{"a listed name, in any case, with a trailing dot", "JETHOOK.internal.:8081", http.StatusOK},
		{"no Host (HTTP/1.0)", "", http.StatusOK},
		{"a web page's name", "evil.example:8081", http.StatusMisdirectedRequest},
		{"a name that only ends like a listed one", "notjethook.internal", http.StatusMisdirectedRequest},
		{"a name that ends like localhost without the dot", "evillocalhost", http.StatusMisdirectedRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/healthz", "/metrics", "/v1/status", "/login"} {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				req.Host = tc.host
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if refused := resp.StatusCode == http.StatusMisdirectedRequest; refused != (tc.want == http.StatusMisdirectedRequest) {
					t.Errorf("GET %s with Host %q: %d, want %d", path, tc.host, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
