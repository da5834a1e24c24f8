package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// The data dir in testdata/datadir-per-event-subjects.tar.gz was written by
// the jethook before the index, which kept each event on a subject of its
// own, then killed with kill -9. Route shop (provider none) had posted
// {"order":1} to {"order":5}: app took 1–3 and was down for 4 and 5, which
// waited in backoff; audit answered 422 to all five, which were
// dead-lettered. These are their event ids.
var upgradeIDs = []string{
	"sha256:86e2d2db0b562b22f8ab5a9fcbea995d797a3dcdd52ff8b00649196502d8524c",
	"sha256:1a5089e153d48ab667d65df39a47232a071960a6ad2125f7b88f05c5c7c22452",
	"sha256:f65909a5de43f223f8ced6a86b45293c5978eebe84e8ad6edfa200dde8edd19c",
	"sha256:ee7761d7693c899fc5e78b2e4a834c936713b8aa2f3c9d0af5f378d80a53732b",
	"sha256:104b67462568844e881bff50068096b3784ecdf7db65ca2cbe3f40b774822156",
}

// received records the X-Webhook-Id of every request a backend got.
type received struct {
	*httptest.Server
	mu  sync.Mutex
	ids []string
}

func newReceived(t *testing.T) *received {
	r := &received{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get("X-Webhook-Id"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *received) got(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestADataDirOfTheEarlierLayoutKeepsWorking(t *testing.T) {
	t.Parallel()
	app, audit := newReceived(t), newReceived(t)
	dir := t.TempDir()
	untar(t, filepath.Join("testdata", "datadir-per-event-subjects.tar.gz"), dir)
	p := newProcess(t, fmt.Sprintf(`
defaults:
  retry: {backoff: fixed, delay: 2s, jitter: none, max_attempts: 1000, max_age: 40h}
routes:
  - name: shop
    path: /hooks/shop
    provider: none
    destinations:
      - {name: app, url: "%s/app"}
      - {name: audit, url: "%s/audit"}
`, app.URL, audit.URL), map[string]string{"JETHOOK_DATA_DIR": filepath.Join(dir, "data")})
	p.start()

	// What waited in backoff is delivered.
	testkit.Eventually(t, 30*time.Second, "orders 4 and 5 delivered to app", func() bool {
		return app.got(upgradeIDs[3]) && app.got(upgradeIDs[4])
	})
	// Every old event is found by id, with where it stands.
	for i, id := range upgradeIDs {
		var ev struct {
			Route        string
			Destinations []struct{ Destination, State string }
		}
		if code := p.adminJSON(t, http.MethodGet, "/v1/events/"+id, &ev); code != http.StatusOK || ev.Route != "shop" {
			t.Fatalf("event %d: %d %+v", i+1, code, ev)
		}
		for _, d := range ev.Destinations {
			if d.Destination == "audit" && d.State != "dead_lettered" {
				t.Errorf("event %d at audit: %s, want dead_lettered", i+1, d.State)
			}
		}
	}
	// A provider's redelivery of an old event is still a duplicate.
	resp, err := http.Post(p.url("/hooks/shop"), "application/json", strings.NewReader(`{"order":2}`))
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		ID        string
		Duplicate bool
	}
	err = json.NewDecoder(resp.Body).Decode(&ack)
	resp.Body.Close()
	if err != nil || ack.ID != upgradeIDs[1] || !ack.Duplicate {
		t.Errorf("order 2 again: %+v, %v; want a duplicate of %s", ack, err, upgradeIDs[1])
	}
	// The old dead letters are listed and replay to audit.
	var page struct {
		DeadLetters []struct{ Seq uint64 } `json:"dead_letters"`
	}
	if code := p.adminJSON(t, http.MethodGet, "/v1/deadletters?route=shop&destination=audit", &page); code != http.StatusOK || len(page.DeadLetters) != 5 {
		t.Fatalf("dead letters: %d, %d of 5", code, len(page.DeadLetters))
	}
	var replay struct{ Queued int }
	body := fmt.Sprintf(`{"seqs":[%d]}`, page.DeadLetters[0].Seq)
	if code := p.adminJSONBody(t, http.MethodPost, "/v1/deadletters/replay", body, &replay); code != http.StatusOK || replay.Queued != 1 {
		t.Fatalf("replay: %d %+v", code, replay)
	}
	testkit.Eventually(t, 30*time.Second, "the replayed dead letter delivered to audit", func() bool { return audit.got(upgradeIDs[0]) })
}

// adminJSON calls the admin API with the test token and decodes the answer.
func (p *process) adminJSON(t *testing.T, method, path string, out any) int {
	return p.adminJSONBody(t, method, path, "", out)
}

func (p *process) adminJSONBody(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer e2e-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode
}

// untar unpacks a .tar.gz into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("archive entry %q outside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var out *os.File
			if out, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
				_, err = io.Copy(out, tr)
				out.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
