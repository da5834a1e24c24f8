package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// startTimeout bounds how long jethook may take to open its listener,
// including the embedded store's recovery after a kill -9.
const startTimeout = 30 * time.Second

// process is one `jethook serve`, restarted on the same settings, data
// directory and port as a supervisor would. Every run appends to one log
// file, whose tail is printed when the test fails.
type process struct {
	t       *testing.T
	bin     string
	env     []string
	addr    string // the public listener, 127.0.0.1:port
	admin   string // the admin listener, 127.0.0.1:port
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
	killed bool          // the test killed cmd on purpose
	starts int
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
	p := &process{
		t:       t,
		bin:     binary(t),
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(testkit.FreePort(t))),
		logPath: filepath.Join(dir, "jethook.log"),
	}
	settings := map[string]string{
		"JETHOOK_LISTEN":         p.addr,
		"JETHOOK_ADMIN_LISTEN":   net.JoinHostPort("127.0.0.1", strconv.Itoa(testkit.FreePort(t))),
		"JETHOOK_ADMIN_TOKEN":    "e2e-admin-token-0123456789",
		"JETHOOK_CONFIG":         config,
		"JETHOOK_DATA_DIR":       filepath.Join(dir, "data"),
		"JETHOOK_LOG_FORMAT":     "text",
		"JETHOOK_SHUTDOWN_GRACE": "2s",
	}
	for k, v := range env {
		settings[k] = v
	}
	p.admin = settings["JETHOOK_ADMIN_LISTEN"]
	// The test's own JETHOOK_* variables must not leak into the process.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETHOOK_") {
			p.env = append(p.env, kv)
		}
	}
	for k, v := range settings {
		p.env = append(p.env, k+"="+v)
	}
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
func (p *process) launch() (exited chan struct{}) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	p.mark(fmt.Sprintf("start %d", p.starts))
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, "serve")
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Start()
	f.Close() // the child holds its own descriptor
	if err != nil {
		p.t.Fatalf("start jethook: %v", err)
	}
	exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited, p.killed = cmd, exited, false
	return exited
}

func (p *process) waitReady(exited chan struct{}) {
	p.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			p.t.Fatalf("jethook exited before it was ready (%v); log tail:\n%s", p.cmd.ProcessState, p.logTail(40))
		default:
		}
		if c, err := net.DialTimeout("tcp", p.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("jethook not listening on %s after %s; log tail:\n%s", p.addr, startTimeout, p.logTail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *process) kill() {
	p.t.Helper()
	p.checkAlive()
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killed = true
	p.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		p.t.Fatalf("kill -9 jethook: %v", err)
	}
	<-exited
	p.mark("killed -9")
}

// checkAlive fails the test if jethook exited without being killed.
func (p *process) checkAlive() {
	p.t.Helper()
	p.mu.Lock()
	exited, killed, cmd := p.exited, p.killed, p.cmd
	p.mu.Unlock()
	if exited == nil || killed {
		return
	}
	select {
	case <-exited:
		p.t.Fatalf("jethook exited on its own (%v); log tail:\n%s", cmd.ProcessState, p.logTail(40))
	default:
	}
}

// mark writes a line of the test's own into jethook's log.
func (p *process) mark(what string) {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== e2e: %s at %s\n", what, time.Now().Format(time.RFC3339Nano))
}

// logTail is the last n lines jethook wrote, across all its runs.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func (p *process) cleanup() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if p.t.Failed() {
		p.t.Logf("jethook log %s, last lines:\n%s", p.logPath, p.logTail(60))
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
