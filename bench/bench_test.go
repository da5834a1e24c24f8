package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// tiny is a run small enough for go test -race; no figure it produces is
// asserted beyond being there.
func tiny(t *testing.T) Options {
	return Options{
		Duration:        30 * time.Second, // Requests ends each case first
		Requests:        200,
		Events:          200,
		Clients:         8,
		DestConcurrency: 8,
		DeliveryTimeout: 30 * time.Second,
		Dir:             t.TempDir(),
	}
}

func TestIngestAnswersEveryRequest(t *testing.T) {
	t.Parallel()
	r, err := Ingest(context.Background(), tiny(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Measurement{"bare": r.Bare, "jethook": r.Jethook, "sync_always": r.SyncAlways} {
		if l.Requests != 200 || l.Failed != 0 {
			t.Errorf("%s: %d answered 200, %d failed; want 200 and 0", name, l.Requests, l.Failed)
		}
		if l.PerSecond() <= 0 || l.P50 <= 0 || l.P99 < l.P50 {
			t.Errorf("%s: rate %.0f/s, p50 %s, p99 %s; want positive figures with p99 ≥ p50", name, l.PerSecond(), l.P50, l.P99)
		}
	}
}

func TestEndToEndDeliversEveryEventBothWays(t *testing.T) {
	t.Parallel()
	r, err := EndToEnd(context.Background(), tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Direct.Requests != 200 || r.Direct.PerSecond() <= 0 {
		t.Errorf("direct: %d answered 200 at %.0f/s; want 200 at a positive rate", r.Direct.Requests, r.Direct.PerSecond())
	}
	for name, d := range map[string]Delivery{"sustained": r.Sustained, "drain": r.Drain} {
		if d.Ingest.Requests != 200 {
			t.Errorf("%s: jethook ingress answered %d, want 200", name, d.Ingest.Requests)
		}
		if d.Delivered != 200 {
			t.Errorf("%s: delivered %d events through jethook, want 200", name, d.Delivered)
		}
		if d.PerSecond() <= 0 || d.Elapsed <= 0 {
			t.Errorf("%s: %.0f/s over %s; want a positive rate and time", name, d.PerSecond(), d.Elapsed)
		}
	}
}

func TestEndToEndWritesAProfileOfTheDrainWhenAskedTo(t *testing.T) {
	o := tiny(t)
	var prof bytes.Buffer
	o.DrainProfile = &prof
	if _, err := EndToEnd(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	// A CPU profile is a gzipped protocol buffer.
	if b := prof.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("drain profile: %d bytes, want a gzipped pprof profile", len(b))
	}
}

func TestBodyIsJSONOfTheAskedSizeAndUniquePerSequence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		seq      int64
		size     int
		wantSize int
	}{
		{"a 1 KiB body is exactly 1024 bytes", 7, 1024, 1024},
		{"a large sequence number still fits", 1 << 40, 1024, 1024},
		{"a size below the fields' own grows to hold them", 3, 10, len(`{"id":"evt_3","type":"bench.event","pad":""}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(tc.seq, tc.size)
			if len(b) != tc.wantSize {
				t.Errorf("len = %d, want %d", len(b), tc.wantSize)
			}
			var v map[string]string
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("not JSON: %v: %s", err, b)
			}
			if string(body(tc.seq+1, tc.size)) == string(b) {
				t.Error("two sequence numbers gave the same body")
			}
		})
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	sorted := make([]time.Duration, 100)
	for i := range sorted {
		sorted[i] = time.Duration(i + 1)
	}
	if got := percentile(sorted, 50); got != 50 {
		t.Errorf("p50 of 1..100 = %d, want 50", got)
	}
	if got := percentile(sorted, 99); got != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %d, want 0", got)
	}
}

func TestServeBareAnswersOnLoopbackOnlyUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	if err := ServeBare(context.Background(), "0.0.0.0:0", nil); err == nil {
		t.Error("ServeBare took a non-loopback address")
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- ServeBare(ctx, "127.0.0.1:0", func(a net.Addr) { addrs <- a }) }()
	addr := <-addrs
	resp, err := http.Post("http://"+addr.String()+"/anything", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("bare handler answered %d, want 200", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeBare returned %v after its context ended, want nil", err)
	}
}
