package cli

import (
	"net/http"
	"testing"

	"github.com/jethook/jethook/internal/testkit"
)

// serve's admin listener answers to its addresses, localhost and the
// names in JETHOOK_ADMIN_HOSTS, and to no other name (DNS rebinding).
func TestServesAdminListenerAnswersOnlyToItsNames(t *testing.T) {
	t.Parallel()
	adminAddr := testkit.FreeAddr(t)
	serveForTest(t, func(s *Settings) { s.AdminListen, s.AdminHosts = adminAddr, "jethook.internal" })
	for host, want := range map[string]int{
		adminAddr:               http.StatusOK,
		"localhost":             http.StatusOK,
		"jethook.internal:8081": http.StatusOK,
		"evil.example":          http.StatusMisdirectedRequest,
		"[::1]:8081":            http.StatusOK,
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+"/healthz", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /healthz with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
