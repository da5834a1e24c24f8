package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

func runEcho(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("echo", out)
	listen := fs.String("listen", "127.0.0.1:3000", "address to listen on")
	status := fs.Int("status", http.StatusOK, "status to answer with")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *status < 100 || *status > 599 {
		return fmt.Errorf("%w: -status %d is not an HTTP status", errUsage, *status)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "echo backend on http://%s, answering %d\n", ln.Addr(), *status)
	return serveEcho(ctx, ln, *status, out)
}

// serveEcho is a stand-in backend for trying jethook out: it prints each
// request's method, path, headers and body, and answers status.
func serveEcho(ctx context.Context, ln net.Listener, status int, out io.Writer) error {
	var mu sync.Mutex
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			keys := make([]string, 0, len(r.Header))
			for k := range r.Header {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
			for _, k := range keys {
				fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
			}
			fmt.Fprintf(&b, "\n%s\n\n", body)
			mu.Lock()
			io.WriteString(out, b.String())
			mu.Unlock()
			w.WriteHeader(status)
		}),
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
