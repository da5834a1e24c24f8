package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// GitHub signs the body but not X-GitHub-Delivery: whoever captured one
// signed webhook can send it again under a new delivery id. jethook
// answers it as a duplicate and the backend gets the event once, under
// the id it first came with.
func TestASignedWebhookReplayedUnderANewIDIsADuplicate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("X-Webhook-Id"))
		mu.Unlock()
	}))
	t.Cleanup(backend.Close)
	st := storetest.Open(t, store.Options{})
	jh := apptest.Start(t, parse(t, githubRoute, backend.URL), app.Options{Store: st})
	ingress := jh.Public

	body := []byte(`{"action":"opened","number":7}`)
	signature := githubSignature(body)
	post := func(delivery string) (duplicate bool) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, ingress.URL+"/hooks/github", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", signature)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var answer struct{ Duplicate bool }
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery %s: %d, %v", delivery, resp.StatusCode, err)
		}
		return answer.Duplicate
	}

	if post("72d3162e-cc78-11e3-81ab-4c9367dc0958") {
		t.Fatal("the first webhook was called a duplicate")
	}
	for _, replay := range []string{"11111111-2222-4333-8444-555555555555", "replayed"} {
		if !post(replay) {
			t.Errorf("the webhook replayed as delivery %s was stored again", replay)
		}
	}
	testkit.Eventually(t, 30*time.Second, "the delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) > 0
	})
	storetest.Settled(t, st)
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 1 || ids[0] != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Errorf("the backend got X-Webhook-Id %q; want the first delivery id, once", ids)
	}
}
