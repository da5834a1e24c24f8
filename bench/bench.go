// Package bench measures jethook against bare baselines on loopback: how
// fast its ingress acknowledges webhooks next to a net/http handler that
// stores nothing, and how fast webhooks reach a backend through jethook next
// to posting them to it directly. Every such figure is meant to be read as
// a ratio against the baseline measured in the same run on the same
// machine. The retention scenario runs the jethook binary as a separate
// process instead, and reads what each webhook it keeps costs in memory and
// disk.
package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
)

// Options configure the scenarios; a zero field takes its default.
type Options struct {
	// Duration bounds each ingest case (default 5s).
	Duration time.Duration
	// Requests, if positive, ends each ingest case after that many
	// requests, even before Duration.
	Requests int
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// Events is how many webhooks the end-to-end scenario sends (default
	// 20,000).
	Events int
	// Clients is the client concurrency of the end-to-end scenario, both
	// through jethook and direct (default 64).
	Clients int
	// DestConcurrency is the destination's concurrency in jethook's
	// policy: the forwarder's requests in flight to the backend (default 64).
	DestConcurrency int
	// DeliveryTimeout bounds the wait for the last delivery (default 2m).
	DeliveryTimeout time.Duration
	// Dir holds the stores' temporary data directories (default the
	// system's temporary directory). Its disk is what sync_always pays for.
	Dir string
}

func (o *Options) applyDefaults() {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.Events <= 0 {
		o.Events = 20_000
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.DestConcurrency <= 0 {
		o.DestConcurrency = 64
	}
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 2 * time.Minute
	}
}

// hookPath is the bench route's path on jethook's ingress.
const hookPath = "/hooks/bench"

// config is a policy with one route, without verification, delivering to
// backendURL at the given concurrency.
func config(backendURL string, concurrency int) (*policy.Config, error) {
	yaml := fmt.Sprintf(`
routes:
  - name: bench
    path: %s
    destinations:
      - {name: backend, url: "${BACKEND}", concurrency: %d}
`, hookPath, concurrency)
	return policy.Parse("bench.yaml", []byte(yaml), func(k string) (string, bool) {
		return backendURL, k == "BACKEND"
	})
}

// server is an HTTP server on a loopback port. Every side of the bench
// (baseline, ingress, backend) runs on the same settings.
type server struct {
	URL string // http://127.0.0.1:port
	srv *http.Server
}

func listen(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + ln.Addr().String(), srv: newServer(h)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// newServer is an HTTP server with the settings every side of the bench
// shares.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

func (s *server) close() { _ = s.srv.Close() }

// bare is the ceiling: a handler that reads the body and answers 200,
// storing nothing.
var bare = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	w.WriteHeader(http.StatusOK)
})

// stack is jethook in this process, wired as serve wires it: an embedded
// store in a fresh temporary directory, the ingress on a loopback port, and
// the forwarder if asked for.
type stack struct {
	dir     string
	store   *store.Store
	fwd     *forward.Forwarder
	ingress *server
}

func startStack(ctx context.Context, o Options, cfg *policy.Config, syncAlways, forwarding bool) (_ *stack, err error) {
	s := &stack{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp(o.Dir, "jethook-bench-*"); err != nil {
		return nil, err
	}
	if s.store, err = store.Open(ctx, store.Options{DataDir: s.dir, SyncAlways: syncAlways}); err != nil {
		return nil, err
	}
	if forwarding {
		if err = s.startForwarder(ctx, cfg); err != nil {
			return nil, err
		}
	}
	h, err := proxy.New(cfg, s.store, nil)
	if err != nil {
		return nil, err
	}
	if s.ingress, err = listen(h); err != nil {
		return nil, err
	}
	return s, nil
}

// startForwarder starts delivering cfg's destinations from the stack's
// store.
func (s *stack) startForwarder(ctx context.Context, cfg *policy.Config) error {
	f := &forward.Forwarder{Store: s.store}
	if err := f.Start(ctx, cfg); err != nil {
		return err
	}
	s.fwd = f
	return nil
}

// stopForwarder stops delivering; messages stay in their consumers.
func (s *stack) stopForwarder() {
	if s.fwd != nil {
		s.fwd.Stop(5 * time.Second)
		s.fwd = nil
	}
}

// close stops the stack and deletes its data.
func (s *stack) close() {
	if s.ingress != nil {
		s.ingress.close()
	}
	s.stopForwarder()
	if s.store != nil {
		s.store.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// check fails a run in which any request was not answered 200: the
// end-to-end scenario waits for every event, so it cannot miss one.
func check(what string, l Measurement) error {
	if l.Failed > 0 {
		return fmt.Errorf("%s: %d of %d not answered 200", what, l.Failed, l.Failed+l.Requests)
	}
	return nil
}

// ServeBare serves the bare baseline handler on addr, a loopback address
// ("127.0.0.1:18080"), with the bench's server settings, until ctx ends. It
// lets an outside load generator such as wrk measure the same ceiling
// against a separate process (bench/wrk.sh).
func ServeBare(ctx context.Context, addr string, ready func(net.Addr)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bare listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("bare listen %q: want a loopback IP address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := newServer(bare)
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return s.Close()
	}
}
