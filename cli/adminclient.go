package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// adminClient calls the admin API for the status, events and dlq commands.
type adminClient struct {
	base  string // JETHOOK_ADMIN_URL, default http://127.0.0.1:8081
	token string // JETHOOK_ADMIN_TOKEN, or serve's token file
	// tokenErr is why serve's token file could not be read, told with a
	// 401 or 403.
	tokenErr error
	http     *http.Client
	// stderr gets what a command says besides its answer (a search's
	// progress); nil says nothing.
	stderr io.Writer
}

// adminFromEnv reads JETHOOK_ADMIN_URL and JETHOOK_ADMIN_TOKEN. Without a
// token, a client of a loopback admin URL reads the token serve keeps in
// JETHOOK_DATA_DIR (default ./data) when it can: the local case needs no
// setup, and the local token is never sent to another host.
func adminFromEnv(getenv func(string) string) *adminClient {
	base := getenv("JETHOOK_ADMIN_URL")
	if base == "" {
		base = "http://127.0.0.1:8081"
	}
	c := &adminClient{base: strings.TrimRight(base, "/"), token: getenv("JETHOOK_ADMIN_TOKEN"),
		http: &http.Client{Timeout: 2 * time.Minute}, stderr: os.Stderr}
	if u, err := url.Parse(c.base); c.token == "" && err == nil && loopback(u.Host) {
		dir := getenv("JETHOOK_DATA_DIR")
		if dir == "" {
			dir = "./data"
		}
		path := filepath.Join(dir, adminTokenFile)
		if token, err := readAdminToken(path); err == nil {
			c.token = token
		} else if !errors.Is(err, fs.ErrNotExist) {
			c.tokenErr = err
		}
	}
	return c
}

// call sends body (if not nil) as JSON and decodes the answer into out (if
// not nil). A non-2xx answer becomes an error carrying the API's message.
func (c *adminClient) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], data...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("admin API answer: %w", err)
	}
	return nil
}

// do sends req with the token; a non-2xx answer becomes an error carrying
// the API's message. The caller closes the body of the answer it gets.
func (c *adminClient) do(req *http.Request) (*http.Response, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin API at %s (set JETHOOK_ADMIN_URL): %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct{ Error, Message string }
		if json.Unmarshal(data, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		msg := fmt.Sprintf("admin API: %s (%s)", e.Message, resp.Status)
		if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && c.token == "" {
			msg += "; set JETHOOK_ADMIN_TOKEN, or JETHOOK_DATA_DIR to serve's data dir on its machine"
			if c.tokenErr != nil {
				msg += " (" + c.tokenErr.Error() + ")"
			}
		}
		return nil, errors.New(msg)
	}
	return resp, nil
}

// printJSON writes an API answer as it came, indented.
func printJSON(out io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := out.Write(buf.Bytes())
	return err
}

// ago prints how long ago t was, in whole units; "-" for nil.
func ago(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return age(now.Sub(*t)) + " ago"
}

// age prints d rounded for a table: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// clip shortens s for a table cell.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\t", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
