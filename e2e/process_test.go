package e2e

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/childproc"
	"github.com/jethook/jethook/internal/testkit"
)

// startTimeout bounds how long jethook may take to open its listener,
// including the embedded store's recovery after a kill -9.
const startTimeout = 30 * time.Second

// process is one `jethook serve`, restarted on the same settings, data
// directory and port as a supervisor would. Every run appends to one log
// file, whose tail is printed when the test fails.
type process struct {
	*childproc.Process
	t     *testing.T
	addr  string // the public listener, 127.0.0.1:port
	admin string // the admin listener, 127.0.0.1:port
}

// newProcess writes policies.yaml into a new temporary directory and
// prepares a jethook that stores there and listens on a free loopback
// port. env adds or overrides JETHOOK_* settings. The process is killed
// when the test ends.
func newProcess(t *testing.T, policies string, env map[string]string) *process {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(config, []byte(policies), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &process{t: t, addr: testkit.FreeAddr(t)}
	settings := map[string]string{
		"JETHOOK_LISTEN":         p.addr,
		"JETHOOK_ADMIN_LISTEN":   testkit.FreeAddr(t),
		"JETHOOK_ADMIN_TOKEN":    "e2e-admin-token-0123456789",
		"JETHOOK_CONFIG":         config,
		"JETHOOK_DATA_DIR":       filepath.Join(dir, "data"),
		"JETHOOK_LOG_FORMAT":     "text",
		"JETHOOK_SHUTDOWN_GRACE": "2s",
	}
	if level := os.Getenv("JETHOOK_E2E_LOG_LEVEL"); level != "" {
		settings["JETHOOK_LOG_LEVEL"] = level // to read a rare failure's log at debug
	}
	for k, v := range env {
		settings[k] = v
	}
	p.admin = settings["JETHOOK_ADMIN_LISTEN"]
	p.Process = &childproc.Process{Bin: binary(t), Args: []string{"serve"}, Env: childproc.Environ(settings),
		LogPath: filepath.Join(dir, "jethook.log")}
	t.Cleanup(p.cleanup)
	return p
}

// url is the public URL of path.
func (p *process) url(path string) string { return "http://" + p.addr + path }

// counter sums the samples of a Prometheus counter on the admin
// listener's /metrics, over all its labels.
func (p *process) counter(name string) (float64, error) {
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// start launches jethook and waits until its public listener accepts
// connections, which serve opens only once the store and forwarder are up.
func (p *process) start() {
	p.t.Helper()
	p.waitReady(p.launch())
}

// launch starts jethook without waiting for it; waitReady(launch()) waits.
func (p *process) launch() (exited <-chan struct{}) {
	p.t.Helper()
	exited, err := p.Start()
	if err != nil {
		p.t.Fatal(err)
	}
	return exited
}

func (p *process) waitReady(exited <-chan struct{}) {
	p.t.Helper()
	p.waitReadyWithin(exited, startTimeout)
}

// waitReadyWithin is waitReady with its own bound.
func (p *process) waitReadyWithin(exited <-chan struct{}, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			_, how := p.ExitedOnItsOwn()
			p.t.Fatalf("jethook exited before it was ready (%v); log tail:\n%s", how, p.LogTail(40))
		default:
		}
		if c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("jethook not listening on %s after %s; log tail:\n%s", p.addr, within, p.LogTail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone; it fails the
// test if jethook had exited on its own.
func (p *process) kill() {
	p.t.Helper()
	p.checkAlive()
	p.Kill()
}

// signal sends sig to the running jethook; a test freezes it with SIGSTOP
// and thaws it with SIGCONT (cleanup's SIGKILL ends a frozen one too).
func (p *process) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := syscall.Kill(p.Pid(), sig); err != nil {
		p.t.Fatalf("%v to jethook: %v", sig, err)
	}
	p.Mark(sig.String())
}

// checkAlive fails the test if jethook exited without being killed.
func (p *process) checkAlive() {
	p.t.Helper()
	if gone, how := p.ExitedOnItsOwn(); gone {
		p.t.Fatalf("jethook exited on its own (%v); log tail:\n%s", how, p.LogTail(40))
	}
}

func (p *process) cleanup() {
	p.Kill()
	if !p.t.Failed() {
		return
	}
	p.t.Logf("jethook log %s, last lines:\n%s", p.LogPath, p.LogTail(60))
	if dir := os.Getenv("JETHOOK_E2E_KEEP_LOGS"); dir != "" {
		if kept, err := keepLog(dir, p.t.Name(), p.LogPath); err != nil {
			p.t.Logf("keeping the jethook log: %v", err)
		} else {
			p.t.Logf("jethook log kept as %s", kept)
		}
	}
}

// keepLog copies the log at path into dir, under a name made of the
// test's and a number not yet taken, so that the log of a failed run
// outlives the test's temporary directory
// (JETHOOK_E2E_KEEP_LOGS=dir go test ...).
func keepLog(dir, test, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(test)
	for i := 1; ; i++ {
		kept := filepath.Join(dir, fmt.Sprintf("%s.%d.log", name, i))
		f, err := os.OpenFile(kept, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return "", err
		}
		return kept, f.Close()
	}
}

// awaitSettled waits until route's destination has nothing left to
// attempt: nothing pending, unacknowledged, in flight or parked, in two
// readings of /v1/status in a row (the parked count is the mover's, a
// tick behind). It fails the test after within.
func (p *process) awaitSettled(t *testing.T, route, destination string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for quiet := 0; quiet < 2; {
		var st struct {
			Destinations []struct {
				Route       string `json:"route"`
				Destination string `json:"destination"`
				Pending     uint64 `json:"pending"`
				AckPending  int    `json:"ack_pending"`
				InFlight    int    `json:"in_flight"`
				InBackoff   int    `json:"in_backoff"`
			} `json:"destinations"`
		}
		quiet++
		if code := p.adminJSON(t, http.MethodGet, "/v1/status", &st); code != http.StatusOK {
			quiet = 0
		}
		for _, d := range st.Destinations {
			if d.Route == route && d.Destination == destination && d.Pending+uint64(d.AckPending+d.InFlight+d.InBackoff) > 0 {
				quiet = 0
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s still has messages to attempt after %s: %+v", route, destination, within, st.Destinations)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// envInt reads a positive integer knob from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// sample lists up to max of ns, sorted, for failure messages.
func sample(ns []int, max int) string {
	sort.Ints(ns)
	if len(ns) > max {
		return fmt.Sprint(ns[:max]) + fmt.Sprintf(" and %d more", len(ns)-max)
	}
	return fmt.Sprint(ns)
}
