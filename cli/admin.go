package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
