package app

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestMetricsServeTheBacklogAndHealthReadFromTheStoreAndTheRuntime(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{MaxBytes: 1 << 30})
	ctx := context.Background()
	if _, err := st.Consumer(ctx, "shop", "app", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := st.Publish(ctx, &store.Envelope{Route: "shop", EventID: id, Method: "POST", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := newMetrics(st, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`jethook_pending{destination="app",route="shop"} 2`,
		`jethook_in_backoff{destination="app",route="shop"} 0`,
		"jethook_store_ready 1\n",
		`jethook_store_refusing{reason="disk_full"} 0`,
		"jethook_store_limit_bytes 1.073741824e+09\n",
		"jethook_store_headroom_bytes ",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
