package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
// creating the file with a new random token if there is none. The file is
// written whole under a temporary name and then renamed, so a crash never
// leaves one without a token. A file that others could read, or a symlink,
// is refused rather than used.
func localAdminToken(dataDir string) (token, path string, err error) {
	path = filepath.Join(dataDir, adminTokenFile)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", path, fmt.Errorf("admin token: %w", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		token, err = readAdminToken(path)
		return token, path, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	token = hex.EncodeToString(b)
	if err := writeFileAtomic(path, []byte(token+"\n")); err != nil {
		return "", path, fmt.Errorf("admin token: %w", err)
	}
	return token, path, nil
}

// writeFileAtomic writes data to a new file beside path, readable only by
// its owner, syncs it and renames it to path: path either does not exist
// or holds all of data.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// readAdminToken reads a token file serve wrote. It refuses a symlink, a
// file that others may read, and one that holds no token.
func readAdminToken(path string) (string, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if info.Mode()&fs.ModeSymlink != 0 || !info.Mode().IsRegular() {
		return "", fmt.Errorf("admin token: %s is a symlink or not a regular file: remove it for a new one", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	defer f.Close()
	// The file opened must be the one checked: not a symlink swapped in
	// between.
	if opened, err := f.Stat(); err != nil || !os.SameFile(info, opened) {
		return "", fmt.Errorf("admin token: %s changed while it was read: try again", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("admin token: %s is readable by others (mode %v): chmod 600 it, or remove it for a new one", path, info.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("admin token: %s holds no token: remove it for a new one", path)
	}
	return token, nil
}
