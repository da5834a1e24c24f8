package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// jethookBinary builds jethook into a temporary directory: the scenario
// runs it as a separate process, and a test's own executable is the test
// binary. It is built without -race even under `go test -race`.
func jethookBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jethook")
	out, err := exec.Command("go", "build", "-o", path, "github.com/jethook/jethook").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return path
}

func TestRetentionDeliversKeepsAndFindsEveryWebhookAcrossARestart(t *testing.T) {
	t.Parallel()
	var progress bytes.Buffer
	r, err := Retention(context.Background(), RetentionOptions{
		Retained:        2000,
		BodySize:        256,
		Clients:         8,
		DestConcurrency: 8,
		Settle:          50 * time.Millisecond,
		Readings:        3,
		Interval:        20 * time.Millisecond,
		Lookups:         3,
		Timeout:         2 * time.Minute,
		Binary:          jethookBinary(t),
		Dir:             t.TempDir(),
		Progress:        &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if r.Accepted != 4000 || r.Duplicates != 0 || r.Failed != 0 {
		t.Errorf("posts: accepted %d, duplicates %d, failed %d; want 4000, 0, 0", r.Accepted, r.Duplicates, r.Failed)
	}
	if r.Delivered != 4000 {
		t.Errorf("backend received %d of 4000 webhooks", r.Delivered)
	}
	for _, tc := range []struct {
		name    string
		l       Lookup
		wantSeq int64
	}{{"oldest", r.Oldest, 0}, {"newest", r.Newest, 3999}} {
		if tc.l.Seq != tc.wantSeq || tc.l.ID == "" || !tc.l.Found || tc.l.State != "delivered" {
			t.Errorf("%s: seq %d, id %q, found %v, state %q; want seq %d found delivered", tc.name,
				tc.l.Seq, tc.l.ID, tc.l.Found, tc.l.State, tc.wantSeq)
		}
		if tc.l.Cold <= 0 || tc.l.Median <= 0 {
			t.Errorf("%s: cold %s, median %s; want both positive", tc.name, tc.l.Cold, tc.l.Median)
		}
	}
	if r.Oldest.ID == r.Newest.ID {
		t.Errorf("oldest and newest have the same id %q", r.Oldest.ID)
	}
	if r.Ready <= 0 || r.Listening <= 0 {
		t.Errorf("restart: ready after %s, listening after %s; want both positive", r.Ready, r.Listening)
	}
	readings := []struct {
		name     string
		rd       Reading
		retained int
	}{{"empty", r.Empty, 0}, {"N", r.AtN, 2000}, {"2N", r.At2N, 4000}, {"restarted", r.Restarted, 4000}}
	for _, c := range readings {
		if c.rd.Retained != c.retained {
			t.Errorf("%s: retained %d, want %d", c.name, c.rd.Retained, c.retained)
		}
		if runtime.GOOS == "linux" && (c.rd.RSS == 0 || c.rd.RSSMin > c.rd.RSS || c.rd.RSS > c.rd.RSSMax || c.rd.Peak < c.rd.RSSMax) {
			t.Errorf("%s: RSS %d (range %d–%d, peak %d); want non-zero, within its range, at most the peak",
				c.name, c.rd.RSS, c.rd.RSSMin, c.rd.RSSMax, c.rd.Peak)
		}
	}
	if !(r.Empty.DataDir < r.AtN.DataDir && r.AtN.DataDir < r.At2N.DataDir) {
		t.Errorf("data dir %d, %d, %d bytes at 0, N, 2N; want it to grow", r.Empty.DataDir, r.AtN.DataDir, r.At2N.DataDir)
	}

	var out bytes.Buffer
	r.Report(&out)
	for _, want := range []string{"per retained webhook", r.Oldest.ID, r.Newest.ID, "GOGC"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
