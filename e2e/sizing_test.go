package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// githubHeaders are the headers of a GitHub delivery, as a provider sends
// them with each webhook.
var githubHeaders = map[string]string{
	"Content-Type":                           "application/json",
	"User-Agent":                             "GitHub-Hookshot/a1b2c3d",
	"Accept":                                 "*/*",
	"X-Github-Event":                         "push",
	"X-Github-Hook-Id":                       "123456789",
	"X-Github-Hook-Installation-Target-Id":   "987654321",
	"X-Github-Hook-Installation-Target-Type": "repository",
	"X-Hub-Signature":                        "sha1=0123456789abcdef0123456789abcdef01234567",
	"X-Hub-Signature-256":                    "sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"X-Github-Delivery":                      "d1b2c3d4-0000-11ee-8000-000000000000",
}

// dirBytes is the sum of the sizes of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestTheDiskSizingRuleHolds measures what the store keeps for each
// delivered webhook, the figures docs/storage.md sizes disks with:
// the body and the request headers, plus a fixed overhead (jethook's own
// headers, the headers' framing and JetStream's record) of about 550
// bytes, plus one attempt record of about 280 bytes per HTTP attempt, all
// counted in the store's limit; and about 400 bytes of index on the same
// disk, outside it. It fails if the overheads leave the ranges the docs
// give. Run it with -v for the figures.
func TestTheDiskSizingRuleHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("sizing: skipped with -short")
	}
	const n = 1000
	be := newBackend(t, healthy)
	jh := newProcess(t, policies(be.URL, fastRetry), nil)
	jh.start()
	data := filepath.Join(filepath.Dir(jh.LogPath), "data")
	streams := filepath.Join(data, "jetstream", "$G", "streams")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 15 * time.Second}
	headerBytes := 0
	for k, v := range githubHeaders {
		headerBytes += len(k) + len(v)
	}

	first := 1
	for _, size := range []int{256, 1024, 8192} {
		// settle waits for the store to stop changing: what it holds,
		// as JetStream counts it and on disk, the same twice 1.5s apart
		// (jethook reads its usage once a second).
		settle := func() (used float64, webhooks, attempts, index int64) {
			t.Helper()
			type reading struct {
				used               float64
				webhooks, attempts int64
			}
			read := func() reading {
				used, err := jh.counter("jethook_store_used_bytes")
				if err != nil {
					t.Fatal(err)
				}
				return reading{used, dirBytes(filepath.Join(streams, "WEBHOOKS")), dirBytes(filepath.Join(streams, "WEBHOOKS_ATTEMPTS"))}
			}
			prev := read()
			deadline := time.Now().Add(30 * time.Second)
			for {
				time.Sleep(1500 * time.Millisecond)
				r := read()
				if r == prev {
					return r.used, r.webhooks, r.attempts, dirBytes(filepath.Join(data, "index"))
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store still changes 30s after the last delivery")
				}
				prev = r
			}
		}
		used0, wh0, at0, ix0 := settle()
		var ns []int
		var wg sync.WaitGroup
		next := make(chan int)
		go func() {
			defer close(next)
			for i := first; i < first+n; i++ {
				next <- i
			}
		}()
		var bodies atomic.Int64
		for range 16 {
			wg.Go(func() {
				for i := range next {
					b := paddedBody(t.Name(), i, size)
					bodies.Add(int64(len(b)))
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, jh.url("/hooks/crash"), bytes.NewReader(b))
					for k, v := range githubHeaders {
						req.Header.Set(k, v)
					}
					req.Header.Set("X-Github-Delivery", fmt.Sprintf("d1b2c3d4-0000-11ee-8000-%012d", i))
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("webhook %d: %s", i, resp.Status)
						return
					}
				}
			})
		}
		wg.Wait()
		for i := first; i < first+n; i++ {
			ns = append(ns, i)
		}
		first += n
		eventually(t, 30*time.Second, "webhooks delivered", func() []int { return be.missing(ns) })
		used1, wh1, at1, ix1 := settle()
		body := float64(bodies.Load()) / n
		perUsed := (used1 - used0) / n
		perWebhook := float64(wh1-wh0) / n
		overhead := perWebhook - body - float64(headerBytes)
		perAttempt := float64(at1-at0) / n
		perIndex := float64(ix1-ix0) / n
		t.Logf("%5.0f-byte bodies, %d bytes of request headers: store %s bytes per webhook: WEBHOOKS %.0f (body + headers + %.0f), attempt log %.0f; index %.0f",
			body, headerBytes, strconv.FormatFloat(perUsed, 'f', 0, 64), perWebhook, overhead, perAttempt, perIndex)
		if overhead < 350 || overhead > 650 {
			t.Errorf("%.0f-byte bodies: %.0f bytes stored beyond body and headers, outside the 350–650 the docs give", body, overhead)
		}
		if perAttempt < 200 || perAttempt > 350 {
			t.Errorf("%.0f-byte bodies: %.0f bytes of attempt log per attempt, outside the 200–350 the docs give", body, perAttempt)
		}
	}
}
