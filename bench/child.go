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
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jethook/jethook/internal/childproc"
)

// passThrough are the variables a child jethook takes from the bench's
// environment, besides everything not named JETHOOK_*: the settings that
// decide its memory, so runs with different ones can be compared.
var passThrough = []string{"GOGC", "GOMEMLIMIT", "JETHOOK_MEMORY_LIMIT"}

// child is `jethook serve` run from a binary as a separate process, with
// its own data directory and admin token, on loopback ports that stay the
// same across restarts. Everything it logs goes to one file.
type child struct {
	*childproc.Process
	public string // 127.0.0.1:port of the ingress
	admin  string // 127.0.0.1:port of the admin API
	token  string
	client *http.Client
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
	c := &child{public: public, admin: admin, token: rand.Text(),
		client: &http.Client{Transport: transport(4), Timeout: 30 * time.Second}}
	settings := map[string]string{
		"JETHOOK_LISTEN":       public,
		"JETHOOK_ADMIN_LISTEN": admin,
		"JETHOOK_ADMIN_TOKEN":  c.token,
		"JETHOOK_CONFIG":       config,
		"JETHOOK_DATA_DIR":     dataDir,
		"JETHOOK_LOG_LEVEL":    "warn",
		"JETHOOK_LOG_FORMAT":   "text",
	}
	if v, ok := os.LookupEnv("JETHOOK_MEMORY_LIMIT"); ok {
		settings["JETHOOK_MEMORY_LIMIT"] = v
	}
	c.Process = &childproc.Process{Bin: bin, Args: []string{"serve"}, Env: childproc.Environ(settings), LogPath: logPath}
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
	_, err := c.Start()
	return err
}

// waitReady polls, every 10ms from start, the admin listener's /readyz
// until it answers 200 and the public listener until it answers at all,
// and returns how long after started each took.
func (c *child) waitReady(ctx context.Context, started time.Time, timeout time.Duration) (ready, listening time.Duration, err error) {
	deadline := started.Add(timeout)
	for ready == 0 || listening == 0 {
		if gone, how := c.ExitedOnItsOwn(); gone {
			return ready, listening, fmt.Errorf("jethook exited before it was ready (%v); log tail:\n%s", how, c.LogTail(20))
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
			return ready, listening, fmt.Errorf("jethook not ready within %s; log tail:\n%s", timeout, c.LogTail(20))
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

// post sends an empty POST to an admin API url with the admin token and
// wants a 2xx.
func (c *child) post(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return nil
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
