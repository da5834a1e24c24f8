package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// checkAdminListen refuses an admin listener reachable from other hosts
// without a token: the API can replay and purge.
func checkAdminListen(s Settings) error {
	if s.AdminToken != "" || loopback(s.AdminListen) {
		return nil
	}
	return fmt.Errorf("environment: JETHOOK_ADMIN_LISTEN=%q is not a loopback address and JETHOOK_ADMIN_TOKEN is empty: set a token, or listen on 127.0.0.1", s.AdminListen)
}

// loopback reports whether addr (host:port) only listens on loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startAdmin serves h on s.AdminListen until stop is called, and returns
// the address it listens on.
func startAdmin(s Settings, h http.Handler, log *slog.Logger) (addr net.Addr, stop func(context.Context), err error) {
	ln, err := net.Listen("tcp", s.AdminListen)
	if err != nil {
		return nil, nil, fmt.Errorf("admin listen %s: %w", s.AdminListen, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // a replay page or a reload may take a while
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener stopped", "listen", ln.Addr().String(), "err", err)
		}
	}()
	return ln.Addr(), func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Warn("admin shutdown", "err", err)
		}
	}, nil
}

// adminTokenFile is where serve keeps the admin token it made when
// JETHOOK_ADMIN_TOKEN is not set, in the data dir (mode 0600): the CLI on
// the same machine reads it, anyone else needs the token.
const adminTokenFile = "admin-token"

// localAdminToken returns the token in dataDir's admin-token file,
// creating the file with a new random token if there is none. A file that
// others could read is refused rather than used.
func localAdminToken(dataDir string) (token, path string, err error) {
	path = filepath.Join(dataDir, adminTokenFile)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", path, fmt.Errorf("admin token: %w", err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		token = hex.EncodeToString(b)
		_, werr := f.WriteString(token + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", path, fmt.Errorf("admin token: %w", werr)
		}
		return token, path, nil
	case !errors.Is(err, fs.ErrExist):
		return "", path, fmt.Errorf("admin token: %w", err)
	}
	token, err = readAdminToken(path)
	return token, path, err
}

// readAdminToken reads a token file serve wrote. It refuses one that
// others may read or that holds no token.
func readAdminToken(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("admin token: %s is readable by others (mode %v): chmod 600 it, or remove it for a new one", path, info.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("admin token: %s holds no token: remove it for a new one", path)
	}
	return token, nil
}
