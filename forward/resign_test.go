package forward_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jethook/jethook/store"
)

// The backend verifies with the official Standard Webhooks library, the
// way an app behind jethook would.
func TestAResigningDestinationPassesTheBackendsStandardWebhooksCheckOnEveryAttempt(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var verified []error
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		verified = append(verified, wh.Verify(body, r.Header))
		if len(verified) < 2 {
			w.WriteHeader(http.StatusInternalServerError) // so the second attempt is a retry
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(b.Close)
	attempts := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(verified)
	}
	yaml := edit(t, fastRetry, `{name: app, url: "${BACKEND}/hook"}`,
		`{name: app, url: "${BACKEND}/hook", resign: {scheme: standard-webhooks, secret: `+secret+`}}`)
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{})
	if code, resp := r.post("/hooks/shop", nil, []byte(`{"order":42}`)); code != http.StatusOK {
		t.Fatalf("ingress %d %s", code, resp)
	}
	eventually(t, "a delivery after one failure", func() bool { return attempts() >= 2 })
	mu.Lock()
	defer mu.Unlock()
	for i, err := range verified {
		if err != nil {
			t.Errorf("attempt %d failed the backend's verification: %v", i+1, err)
		}
	}
	if len(verified) < 2 {
		t.Fatalf("%d attempts verified", len(verified))
	}
}
