package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withOrders adds a route to opsConfig.
var withOrders = opsConfig + `
  - name: orders
    path: /hooks/orders
    destinations:
      - {name: app, url: "BACKEND/orders", slow_start: 0s}
`

func TestReloadAddsARouteAndRejectsABadFileWhileTrafficFlows(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	// Traffic on the shop route throughout.
	var sent atomic.Int64
	var ids sync.Map
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if code, id := r.post("/hooks/shop", fmt.Sprintf(`{"n":%d}`, i), nil); code == http.StatusOK {
				ids.Store(id, true)
				sent.Add(1)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()

	if code, _ := r.post("/hooks/orders", `{"o":1}`, nil); code != http.StatusNotFound {
		t.Fatalf("orders before the reload: %d, want 404", code)
	}
	r.write(withOrders)
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	code, id := r.post("/hooks/orders", `{"o":2}`, nil)
	if code != http.StatusOK {
		t.Fatalf("orders after the reload: %d", code)
	}
	eventually(t, "the added route delivers", func() bool { return r.count("/orders", id) == 1 })

	if !strings.Contains(withOrders, "max_attempts: 3") {
		t.Fatal("the test config lacks max_attempts: 3")
	}
	r.write(strings.Replace(withOrders, "max_attempts: 3", "max_attempts: lots", 1))
	err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "max_attempts") || !strings.Contains(err.Error(), "422") {
		t.Fatalf("a bad file: %v, want a 422 naming max_attempts", err)
	}
	code, id = r.post("/hooks/orders", `{"o":3}`, nil)
	if code != http.StatusOK {
		t.Fatalf("orders after a rejected reload: %d", code)
	}
	eventually(t, "the old configuration still delivers", func() bool { return r.count("/orders", id) == 1 })

	close(stop)
	<-done
	eventually(t, "every shop event delivered to app and audit", func() bool {
		n := 0
		ids.Range(func(k, _ any) bool {
			if r.count("/app", k.(string)) >= 1 && r.count("/audit", k.(string)) >= 1 {
				n++
			}
			return true
		})
		return int64(n) == sent.Load()
	})
	ids.Range(func(k, _ any) bool {
		if a, b := r.count("/app", k.(string)), r.count("/audit", k.(string)); a != 1 || b != 1 {
			t.Errorf("event %s delivered %d times to app and %d to audit, want once each", k, a, b)
		}
		return true
	})
}

func TestTheAdminListenerNeedsATokenOffLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8081", "", true},
		{"[::1]:8081", "", true},
		{"localhost:8081", "", true},
		{"0.0.0.0:8081", "", false},
		{":8081", "", false},
		{"10.1.2.3:8081", "", false},
		{"0.0.0.0:8081", "t", true},
	} {
		err := checkAdminListen(Settings{AdminListen: tc.listen, AdminToken: tc.token})
		if (err == nil) != tc.ok {
			t.Errorf("listen %q token %q: %v", tc.listen, tc.token, err)
		}
		if err != nil && !strings.Contains(err.Error(), "JETHOOK_ADMIN_TOKEN") {
			t.Errorf("error %q does not name the token variable", err)
		}
	}
}

// An alerts block added by a reload takes effect without a restart: the
// next dead letter is told at the block's URL.
func TestReloadStartsAlertsWithoutARestart(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	var mu sync.Mutex
	var notices []string
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n struct{ Text string }
		_ = json.NewDecoder(req.Body).Decode(&n)
		mu.Lock()
		notices = append(notices, n.Text)
		mu.Unlock()
	}))
	t.Cleanup(chat.Close)
	told := func(eventID string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range notices {
			if strings.Contains(n, eventID) {
				return true
			}
		}
		return false
	}

	r.write(opsConfig + "alerts: {url: \"" + chat.URL + "\", batch: 100ms}\n")
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	_, after := r.post("/hooks/shop", `{"after":1}`, map[string]string{"app": "400"})
	eventually(t, "the dead letter after the reload told", func() bool { return told(after) })
}
