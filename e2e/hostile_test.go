package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bodyFilterPolicies is one route without signatures, /hooks/open, to a
// destination whose filter reads the body.
func bodyFilterPolicies(backendURL string) string {
	return fmt.Sprintf(`
routes:
  - name: open
    path: /hooks/open
    provider: none
    destinations:
      - name: app
        url: %s/hook
        filter: 'body.type == "x"'
`, backendURL)
}

// peakRSS is the most memory the process has held (VmHWM), in bytes.
func (p *process) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Skipf("no /proc to read the peak memory from: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// One webhook of five megabytes of "[" to a route whose filter reads the
// body is filtered (the filter fails with kind "too deep", which counts
// as no match) and costs jethook about what any five-megabyte webhook
// costs: it once took a gigabyte of stack and got jethook OOM-killed at
// every restart.
func TestAHostileBodyIsFilteredWithoutBlowingUpMemory(t *testing.T) {
	var requests atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	defer be.Close()
	p := newProcess(t, bodyFilterPolicies(be.URL), nil)
	p.start()
	post := func(body []byte) {
		t.Helper()
		resp, err := http.Post(p.url("/hooks/open"), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ingress answered %d", resp.StatusCode)
		}
	}
	filtered := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			p.checkAlive()
			if n, err := p.counter("jethook_filtered_total"); err == nil && n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a minute, fewer than %v events filtered; log tail:\n%s", want, p.LogTail(20))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A harmless body of the same size first: the baseline.
	post([]byte(`"` + strings.Repeat("a", 5<<20-2) + `"`))
	filtered(1)
	base := p.peakRSS(t)
	t.Logf("baseline peak %d MiB at %s", base>>20, time.Now().Format(time.StampMilli))

	post([]byte(strings.Repeat("[", 5<<20)))
	filtered(2)
	p.checkAlive()
	t.Logf("hostile filtered at %s", time.Now().Format(time.StampMilli))
	if grew := p.peakRSS(t) - base; grew > 64<<20 {
		t.Errorf("the hostile body raised jethook's peak memory by %d MiB, want at most 64 MiB", grew>>20)
	}
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `jethook_filter_errors_total{destination="app",kind="too deep",route="open"} 1`; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the backend got %d requests", n)
	}
}
