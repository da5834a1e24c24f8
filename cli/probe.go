package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// probePaths are the admin endpoints `jethook probe` can check.
var probePaths = map[string]string{"ready": "/readyz", "live": "/healthz"}

func runProbe(ctx context.Context, args []string, out io.Writer) error {
	return probe(ctx, nil, args, out)
}

// probe asks the jethook running beside it (same container, same
// environment) whether it is ready (/readyz: the store takes writes) or
// live (/healthz), on its admin listener, and fails unless it answers 200.
// The image has no shell or curl, so this is what a Kubernetes exec probe
// or a Docker HEALTHCHECK runs while the admin listener stays on loopback.
// environ nil reads the process environment.
func probe(ctx context.Context, environ map[string]string, args []string, out io.Writer) error {
	fs := flags("probe", out)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: jethook probe [ready|live] [-timeout D]\n\nExits 0 if the admin listener (JETHOOK_ADMIN_LISTEN) answers /readyz (ready, the default) or /healthz (live) with 200.")
		fs.PrintDefaults()
	}
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	check := "ready"
	if len(pos) == 1 {
		check = pos[0]
	}
	path, ok := probePaths[check]
	if len(pos) > 1 || !ok {
		return fmt.Errorf("%w: want ready or live, got %q", errUsage, strings.Join(pos, " "))
	}
	s, err := loadSettings(environ)
	if err != nil {
		return err
	}
	url := "http://" + dialable(s.AdminListen) + path
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// A client of its own: no proxy from the environment, no idle connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", check, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: GET %s: %s: %s", check, url, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = out.Write(body)
	return err
}

// dialable turns a listen address into one a client on the same host can
// dial: a wildcard host (":8081", "0.0.0.0:8081", "[::]:8081") becomes
// loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
