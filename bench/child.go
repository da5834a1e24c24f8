package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// passThrough are the variables a child jethook takes from the bench's
// environment, besides everything not named JETHOOK_*: the settings that
// decide its memory, so runs with different ones can be compared.
var passThrough = []string{"GOGC", "GOMEMLIMIT", "JETHOOK_MEMORY_LIMIT"}

// child is `jethook serve` run from a binary as a separate process, with
// its own data directory and admin token, on loopback ports that stay the
// same across restarts. Everything it logs goes to one file.
type child struct {
	bin     string
	env     []string
	public  string // 127.0.0.1:port of the ingress
	admin   string // 127.0.0.1:port of the admin API
	token   string
	logPath string
	client  *http.Client

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
}

// newChild prepares a jethook that reads config and stores in dataDir.
func newChild(bin, config, dataDir, logPath string) (*child, error) {
	public, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c := &child{bin: bin, public: public, admin: admin, token: rand.Text(), logPath: logPath,
		client: &http.Client{Transport: transport(4), Timeout: 30 * time.Second}}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETHOOK_") {
			c.env = append(c.env, kv)
		}
	}
	if v, ok := os.LookupEnv("JETHOOK_MEMORY_LIMIT"); ok {
		c.env = append(c.env, "JETHOOK_MEMORY_LIMIT="+v)
	}
	c.env = append(c.env,
		"JETHOOK_LISTEN="+public,
		"JETHOOK_ADMIN_LISTEN="+admin,
		"JETHOOK_ADMIN_TOKEN="+c.token,
		"JETHOOK_CONFIG="+config,
		"JETHOOK_DATA_DIR="+dataDir,
		"JETHOOK_LOG_LEVEL=warn",
		"JETHOOK_LOG_FORMAT=text",
	)
	return c, nil
}

// freeAddr is a loopback address with a port nothing listened on a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start launches the process and returns at once.
func (c *child) start() error {
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(c.bin, "serve")
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s serve: %w", c.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited
	return nil
}

// waitReady polls, every 10ms from start, the admin listener's /readyz
// until it answers 200 and the public listener until it answers at all,
// and returns how long after started each took.
func (c *child) waitReady(ctx context.Context, started time.Time, timeout time.Duration) (ready, listening time.Duration, err error) {
	deadline := started.Add(timeout)
	for ready == 0 || listening == 0 {
		select {
		case <-c.exited:
			return ready, listening, fmt.Errorf("jethook exited before it was ready (%v); log tail:\n%s", c.cmd.ProcessState, c.logTail(20))
		default:
		}
		if ready == 0 {
			if status, err := c.get(ctx, "http://"+c.admin+"/readyz", false); err == nil && status == http.StatusOK {
				ready = time.Since(started)
			}
		}
		if listening == 0 {
			if _, err := c.get(ctx, "http://"+c.public+"/", false); err == nil {
				listening = time.Since(started)
			}
		}
		if time.Now().After(deadline) {
			return ready, listening, fmt.Errorf("jethook not ready within %s; log tail:\n%s", timeout, c.logTail(20))
		}
		if !sleep(ctx, 10*time.Millisecond) {
			return ready, listening, ctx.Err()
		}
	}
	return ready, listening, nil
}

// get sends a GET, with the admin token if auth, and returns the status.
func (c *child) get(ctx context.Context, url string, auth bool) (int, error) {
	status, _, err := c.fetch(ctx, url, auth)
	return status, err
}

// fetch sends a GET, with the admin token if auth, and returns the status
// and the body.
func (c *child) fetch(ctx context.Context, url string, auth bool) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// settled reports whether every destination in GET /v1/status has nothing
// pending and nothing unacknowledged.
func (c *child) settled(ctx context.Context) (bool, error) {
	status, b, err := c.fetch(ctx, "http://"+c.admin+"/v1/status", true)
	if err != nil {
		return false, fmt.Errorf("admin status: %w", err)
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("admin status: %d %s", status, bytes.TrimSpace(b))
	}
	var s struct {
		Destinations []struct {
			Pending    uint64 `json:"pending"`
			AckPending int    `json:"ack_pending"`
		} `json:"destinations"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return false, fmt.Errorf("admin status: %w", err)
	}
	for _, d := range s.Destinations {
		if d.Pending > 0 || d.AckPending > 0 {
			return false, nil
		}
	}
	return len(s.Destinations) > 0, nil
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// timeout; it returns how long the exit took.
func (c *child) stop(timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("SIGTERM jethook: %w", err)
	}
	select {
	case <-c.exited:
		return time.Since(t0), nil
	case <-time.After(timeout):
		c.kill()
		return 0, fmt.Errorf("jethook still running %s after SIGTERM; killed; log tail:\n%s", timeout, c.logTail(20))
	}
}

// kill ends the process, if it runs, and waits until it is gone.
func (c *child) kill() {
	if c.cmd == nil {
		return
	}
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// pid is the running process's id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// logTail is the last n lines jethook wrote.
func (c *child) logTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// dirSize is the sum of the sizes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while walking: the store compacts
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// procMemory is a process's resident set size (VmRSS) and its peak
// (VmHWM) in bytes, from /proc/<pid>/status, pid "self" for this one;
// zeros where there is no /proc.
func procMemory(pid string) (rss, peak uint64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		key, v, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseUint(f[0], 10, 64)
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak
}
