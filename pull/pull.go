// Package pull serves pull destinations on the public listener, under
// /v1/pull/: a client holding a destination's pull token leases that
// destination's webhooks in batches, with a long poll, and acks or naks
// each. Leasing and settling are the forwarder's (forward.Forwarder.Pull,
// Ack, Nak); this package checks the token and speaks HTTP and JSON.
package pull

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// Defaults and bounds of a pull's query.
const (
	DefaultMax = 100
	// maxSettleBody bounds an ack or nak request's JSON.
	maxSettleBody = 1 << 20
	// maxNakError bounds the reason a client gives with a nak.
	maxNakError = 256
)

// Handler serves /v1/pull/. Build it with New; Reload swaps the tokens.
type Handler struct {
	// Forwarder leases and settles. Required.
	Forwarder *forward.Forwarder
	// Logger gets refused tokens, at most one line per warnEvery.
	Logger *slog.Logger

	tokens atomic.Pointer[map[[2]string][sha256.Size]byte]
	once   sync.Once
	mux    *http.ServeMux
	warn   rate.Sometimes
}

// warnEvery bounds how often a refused token is logged: the public
// listener is anyone's to knock on.
const warnEvery = 10 * time.Second

// New returns the handler of cfg's pull destinations.
func New(cfg *policy.Config, fwd *forward.Forwarder, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{Forwarder: fwd, Logger: log, warn: rate.Sometimes{Interval: warnEvery}}
	h.Reload(cfg)
	return h
}

// Reload takes the pull tokens of cfg: a destination that is no longer
// pulled, or whose token changed, refuses the old token from now on.
func (h *Handler) Reload(cfg *policy.Config) {
	m := map[[2]string][sha256.Size]byte{}
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			if d.Pull != nil {
				m[[2]string{r.Name, d.Name}] = sha256.Sum256([]byte(d.Pull.Token))
			}
		}
	}
	h.tokens.Store(&m)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() {
		m := http.NewServeMux()
		m.HandleFunc("POST /v1/pull/{route}/{destination}", h.auth(h.pull))
		m.HandleFunc("POST /v1/pull/{route}/{destination}/ack", h.auth(h.ack))
		m.HandleFunc("POST /v1/pull/{route}/{destination}/nak", h.auth(h.nak))
		m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "pull endpoints take POST")
				return
			}
			writeError(w, http.StatusNotFound, "not_found", "pull endpoints are POST /v1/pull/ROUTE/DESTINATION, and /ack and /nak under it")
		})
		h.mux = m
	})
	h.mux.ServeHTTP(w, r)
}

// auth lets a request through only with the pull token of the route and
// destination its path names, compared in constant time. An unknown
// destination is refused like a wrong token, so a client learns nothing
// of which destinations exist.
func (h *Handler) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := [2]string{r.PathValue("route"), r.PathValue("destination")}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		want, known := (*h.tokens.Load())[key]
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok || !known {
			h.warn.Do(func() {
				h.Logger.Warn("pull: refused a missing or wrong token (logged at most every 10s)", "remote", r.RemoteAddr)
			})
			w.Header().Set("WWW-Authenticate", `Bearer realm="jethook pull"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a pull destination's token is required; it opens that destination only")
			return
		}
		next(w, r)
	}
}

// webhook is one leased webhook as a client gets it. Body is base64 in
// JSON: the bytes as the sender sent them.
type webhook struct {
	Lease        string      `json:"lease"`
	EventID      string      `json:"event_id"`
	Attempt      int         `json:"attempt"`
	Redelivered  bool        `json:"redelivered"`
	Method       string      `json:"method"`
	Query        string      `json:"query,omitempty"`
	Header       http.Header `json:"header"`
	Body         []byte      `json:"body"`
	StoredAt     time.Time   `json:"stored_at"`
	LeaseExpires time.Time   `json:"lease_expires"`
}

type pullAnswer struct {
	Webhooks []webhook `json:"webhooks"`
}

func (h *Handler) pull(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	max, wait := DefaultMax, time.Duration(0)
	if s := q.Get("max"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > forward.MaxPullBatch {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("max must be a number from 1 to %d", forward.MaxPullBatch))
			return
		}
		max = n
	}
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > forward.MaxPullWait {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("wait must be a duration from 0s to %s", forward.MaxPullWait))
			return
		}
		wait = d
	}
	leases, err := h.Forwarder.Pull(r.Context(), r.PathValue("route"), r.PathValue("destination"), max, wait)
	if err != nil && len(leases) == 0 {
		settleError(w, err)
		return
	}
	// Leased webhooks go out even when a later fetch failed: they are the
	// client's now.
	out := pullAnswer{Webhooks: make([]webhook, 0, len(leases))}
	for _, l := range leases {
		out.Webhooks = append(out.Webhooks, webhook{Lease: l.ID, EventID: l.EventID, Attempt: l.Attempt,
			Redelivered: l.Redelivered, Method: l.Method, Query: l.Query, Header: l.Header, Body: l.Body,
			StoredAt: l.Stored.UTC(), LeaseExpires: l.Expires.UTC()})
	}
	writeJSON(w, http.StatusOK, out)
}

// settle is the body of an ack or a nak.
type settle struct {
	Leases []string `json:"leases"`
	// Of a nak: when to offer the webhooks again (a duration, "" for the
	// route's schedule), what the client's backend answered, and why.
	Delay  string `json:"delay,omitempty"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

type settleAnswer struct {
	Settled int      `json:"settled"`
	Gone    []string `json:"gone"`
}

func (h *Handler) ack(w http.ResponseWriter, r *http.Request) {
	var s settle
	if !readSettle(w, r, &s) {
		return
	}
	gone, err := h.Forwarder.Ack(r.PathValue("route"), r.PathValue("destination"), s.Leases)
	if err != nil {
		settleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, settleAnswer{Settled: len(s.Leases) - len(gone), Gone: nonNil(gone)})
}

func (h *Handler) nak(w http.ResponseWriter, r *http.Request) {
	var s settle
	if !readSettle(w, r, &s) {
		return
	}
	why := forward.NakReason{Status: s.Status, Error: s.Error}
	if s.Delay != "" {
		d, err := time.ParseDuration(s.Delay)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "delay must be a duration such as 30s, or empty for the route's schedule")
			return
		}
		why.Delay = d
	}
	if s.Status != 0 && (s.Status < 100 || s.Status > 999) {
		writeError(w, http.StatusBadRequest, "bad_request", "status must be an HTTP status, or 0 when no answer came")
		return
	}
	if len(why.Error) > maxNakError {
		why.Error = why.Error[:maxNakError]
	}
	gone, err := h.Forwarder.Nak(r.PathValue("route"), r.PathValue("destination"), s.Leases, why)
	if err != nil {
		settleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, settleAnswer{Settled: len(s.Leases) - len(gone), Gone: nonNil(gone)})
}

// readSettle decodes an ack or nak body of at most maxSettleBody bytes and
// forward.MaxLeases leases, or answers 400 or 413 and reports false.
func readSettle(w http.ResponseWriter, r *http.Request, s *settle) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSettleBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("an ack or nak body is at most %d bytes", maxSettleBody))
			return false
		}
		writeError(w, http.StatusBadRequest, "bad_request", "request body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "request body: "+err.Error())
		return false
	}
	if len(s.Leases) == 0 || len(s.Leases) > forward.MaxLeases {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("leases must list 1 to %d lease ids", forward.MaxLeases))
		return false
	}
	return true
}

// settleError answers an error of the forwarder.
func settleError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, forward.ErrUnknownDestination), errors.Is(err, forward.ErrNotPull):
		// The token matched a moment ago: a reload removed it since.
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, forward.ErrLeasesFull):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too_many_leases",
			fmt.Sprintf("%v: ack or nak what you hold (at most %d webhooks or %d MiB leased at once)", err, forward.MaxLeases, forward.MaxLeaseBytes>>20))
	case errors.Is(err, forward.ErrPullsBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too_many_pulls", fmt.Sprintf("%v: at most %d per destination", err, forward.MaxPulls))
	case errors.Is(err, forward.ErrPaused):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "paused", err.Error())
	case errors.Is(err, forward.ErrStopped):
		writeError(w, http.StatusServiceUnavailable, "shutting_down", err.Error())
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// apiError is every error answer: a stable code and a sentence.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
