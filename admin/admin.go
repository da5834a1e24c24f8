// Package admin is jethook's operator API: an http.Handler for its own
// listener (never the public port) with open probes (/healthz, /readyz),
// Prometheus /metrics, and under /v1/ the bearer-token API to inspect
// status, find events, list, replay and purge dead letters, pause and
// resume destinations, and reload the configuration. The questions and
// actions themselves are Service's methods (Status, Event, DeadLetters,
// ReplaySeqs, ...): one Service, built once, serves the API and the
// dashboard it mounts at /.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// Handler serves the admin API: the HTTP face of a Service. Set the
// fields, then serve it; the zero value of the optional fields works.
type Handler struct {
	// Service answers the API's questions and does its actions. Required.
	Service *Service
	// Token is the bearer token /v1/ requires. Empty, /v1/ answers 403.
	Token string
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Ready adds the caller's own readiness (configuration loaded) to the
	// store's in /readyz; nil adds nothing.
	Ready func(context.Context) error
	// Dashboard serves / and every path the API does not; nil answers 404.
	Dashboard http.Handler
	// Hosts are the names besides IP addresses and localhost that a
	// request's Host may carry; any other gets 421 (allowedHost), which
	// keeps web pages out by DNS rebinding.
	Hosts []string
	// Throttle bounds the wrong bearer tokens /v1/ checks; nil makes one
	// for this handler. Serve shares one with the dashboard's bearer
	// tokens.
	Throttle *Throttle

	once sync.Once
	mux  *http.ServeMux
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.setup()
	if !h.checkHost(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) routes() {
	h.Service.setup()
	if h.Throttle == nil {
		h.Throttle = &Throttle{Now: h.Service.Now}
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	m.HandleFunc("GET /readyz", h.readyz)
	m.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if h.Metrics == nil {
			writeError(w, http.StatusNotFound, "not_found", "metrics are not enabled")
			return
		}
		h.Metrics.ServeHTTP(w, r)
	})
	v1 := func(pattern string, fn http.HandlerFunc) { m.Handle(pattern, h.auth(fn)) }
	v1("GET /v1/status", h.status)
	v1("GET /v1/events", h.search)
	v1("GET /v1/events/{id}", h.event)
	v1("POST /v1/events/{id}/resend", h.resend)
	v1("POST /v1/events/{id}/preview", h.preview)
	v1("GET /v1/deadletters", h.listDeadLetters)
	v1("GET /v1/deadletters/count", h.countDeadLetters)
	v1("GET /v1/deadletters/{seq}", h.showDeadLetter)
	v1("POST /v1/deadletters/replay", h.replay)
	v1("DELETE /v1/deadletters", h.purge)
	v1("POST /v1/destinations/{route}/{destination}/pause", h.pause)
	v1("POST /v1/destinations/{route}/{destination}/resume", h.resume)
	v1("POST /v1/reload", h.reload)
	v1("/v1/", h.noEndpoint)
	// The Go profiler, for finding where a running process spends its time
	// (docs/performance.md). Behind the token: goroutine stacks and the
	// command line are the process's insides.
	m.Handle("GET /debug/pprof/", h.auth(http.HandlerFunc(pprof.Index)))
	m.Handle("GET /debug/pprof/cmdline", h.auth(http.HandlerFunc(pprof.Cmdline)))
	m.Handle("GET /debug/pprof/profile", h.auth(http.HandlerFunc(pprof.Profile)))
	m.Handle("GET /debug/pprof/symbol", h.auth(http.HandlerFunc(pprof.Symbol)))
	m.Handle("GET /debug/pprof/trace", h.auth(http.HandlerFunc(pprof.Trace)))
	if h.Dashboard != nil {
		m.Handle("/", h.Dashboard)
	}
	h.mux = m
}

// setup fills in the defaults and the routes once.
func (h *Handler) setup() { h.once.Do(h.routes) }

// apiMethods are the methods the /v1/ endpoints take.
var apiMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// noEndpoint answers a /v1/ request no endpoint takes: 405 with Allow when
// the path has endpoints under other methods (RFC 9110 §15.5.6), else 404.
// The catch-all pattern hides the ServeMux's own 405.
func (h *Handler) noEndpoint(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, method := range apiMethods {
		other := r.Clone(r.Context())
		other.Method = method
		if _, pattern := h.mux.Handler(other); pattern != "/v1/" {
			allow = append(allow, method)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+": use "+strings.Join(allow, " or "))
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "no admin endpoint "+r.Method+" "+r.URL.Path)
}

// auth lets a request through only with the configured bearer token,
// compared in constant time; wrong tokens are bounded by h.Throttle.
func (h *Handler) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.Token == "" {
			writeError(w, http.StatusForbidden, "forbidden", "admin token not configured: set JETHOOK_ADMIN_TOKEN")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="jethook admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing bearer token")
			return
		}
		switch err := h.Throttle.Check(strings.TrimSpace(got), h.Token); {
		case errors.Is(err, ErrTooManyWrongTokens):
			w.Header().Set("Retry-After", "60")
			writeError(w, http.StatusTooManyRequests, "too_many_wrong_tokens", err.Error())
			return
		case err != nil:
			h.Service.Logger.Warn("admin API: wrong bearer token", "remote", r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="jethook admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readyTimeout bounds /readyz: a probe that does not hear back in time
// counts as a failure anyway, and must not pile up.
const readyTimeout = 2 * time.Second

// readyz is 200 once the store takes writes and the configuration is
// loaded, else 503 with the reason. It answers within readyTimeout
// whatever the store or the Ready callback does.
func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- h.ready(ctx) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = fmt.Errorf("no answer within %s", readyTimeout)
	}
	if err != nil {
		answer := readyError{Error: "not_ready", Message: err.Error()}
		var nre *store.NotReadyError
		if errors.As(err, &nre) {
			answer.Reason = nre.Reason
		}
		writeJSON(w, http.StatusServiceUnavailable, answer)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ready\n")
}

// readyError is /readyz's 503: Reason is the store's (store.Reasons) when
// it is the store that is not ready.
type readyError struct {
	Error   string `json:"error"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
}

func (h *Handler) ready(ctx context.Context) error {
	if err := h.Service.Store.Ready(ctx); err != nil {
		return err // "store unavailable: <reason>: <detail>"
	}
	if h.Ready != nil {
		return h.Ready(ctx)
	}
	return nil
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	h.hold(w, r, true)
}

func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	h.hold(w, r, false)
}

func (h *Handler) hold(w http.ResponseWriter, r *http.Request, on bool) {
	route, dest := r.PathValue("route"), r.PathValue("destination")
	if err := h.Service.Hold(route, dest, on); err != nil {
		if errors.Is(err, forward.ErrUnknownDestination) {
			writeError(w, http.StatusNotFound, "not_found", err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"route": route, "destination": dest, "paused": on})
}

func (h *Handler) reload(w http.ResponseWriter, r *http.Request) {
	switch err := h.Service.Reload(r.Context()); {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"reloaded": true})
	case errors.Is(err, ErrNoReload):
		writeError(w, http.StatusNotImplemented, "not_implemented", err.Error())
	case errors.Is(err, store.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	default:
		writeError(w, http.StatusUnprocessableEntity, "invalid_config", err.Error())
	}
}

// apiError is every error answer: a stable code and a sentence.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: code, Message: msg})
}

// RequestError is a request the admin API cannot take as given (a bad
// filter, cursor or selection); its message says why.
type RequestError struct{ Reason string }

func (e *RequestError) Error() string { return e.Reason }

func badRequest(format string, args ...any) error {
	return &RequestError{Reason: fmt.Sprintf(format, args...)}
}

// storeError answers err from the Go methods: 400 for a RequestError, 404
// for ErrNotFound, 503 when the store is unavailable, else 500.
func storeError(w http.ResponseWriter, err error) {
	var re *RequestError
	switch {
	case errors.As(err, &re):
		writeError(w, http.StatusBadRequest, "bad_request", re.Reason)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, store.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// readJSON decodes a request body of at most 1 MiB into v, rejecting
// unknown fields; an empty body leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// at is a time for JSON: nil (omitted) when zero.
func at(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
