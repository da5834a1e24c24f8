package admin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jethook/jethook/store"
)

// Page sizes of dead-letter lists and replays by query.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// DeadLetter is one dead letter in lists; DeadLetterDetail adds the
// original request.
type DeadLetter struct {
	Seq            uint64     `json:"seq"` // in WEBHOOKS_DLQ: the id used by show, replay, purge
	Route          string     `json:"route"`
	Destination    string     `json:"destination"`
	EventID        string     `json:"event_id"`
	Reason         string     `json:"reason"`
	LastStatus     int        `json:"last_status"`
	LastError      string     `json:"last_error,omitempty"`
	Attempts       int        `json:"attempts"`
	ReceivedAt     *time.Time `json:"received_at,omitempty"`
	FirstSeen      *time.Time `json:"first_seen,omitempty"`
	LastAttempt    *time.Time `json:"last_attempt,omitempty"`
	DeadLetteredAt *time.Time `json:"dead_lettered_at,omitempty"`
	OriginalSeq    uint64     `json:"original_seq"` // the delivered message's sequence in WEBHOOKS
	// OrderKey is the ordering key this event held as its head, at a
	// destination with order: (docs/ordering.md).
	OrderKey string `json:"order_key,omitempty"`
}

// DeadLetterDetail is the answer of GET /v1/deadletters/{seq}.
type DeadLetterDetail struct {
	DeadLetter
	Method string `json:"method"`
	Host   string `json:"host"`
	Proto  string `json:"proto"`
	// RequestURI is the path and query the provider called; empty for a
	// webhook stored before jethook kept it.
	RequestURI string              `json:"request_uri,omitempty"`
	RemoteAddr string              `json:"remote_addr"`
	Headers    map[string][]string `json:"headers"`
	// Body is the original body: text when it is valid UTF-8, else base64
	// (BodyEncoding says which).
	Body         string  `json:"body"`
	BodyEncoding string  `json:"body_encoding"`
	Replay       *Replay `json:"replay,omitempty"`
}

// DeadLetterPage is the answer of GET /v1/deadletters. NextCursor, when
// set, is the cursor of the next page.
type DeadLetterPage struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	NextCursor  string       `json:"next_cursor,omitempty"`
}

func summary(d store.DeadLetter) DeadLetter {
	return DeadLetter{
		Seq:            d.DLQSeq,
		Route:          d.Envelope.Route,
		Destination:    d.Destination,
		EventID:        d.Envelope.EventID,
		Reason:         d.Reason,
		OrderKey:       d.OrderKey,
		LastStatus:     d.LastStatus,
		LastError:      d.LastError,
		Attempts:       d.Attempts,
		ReceivedAt:     at(d.Envelope.ReceivedAt),
		FirstSeen:      at(d.FirstSeen),
		LastAttempt:    at(d.LastAttempt),
		DeadLetteredAt: at(d.DeadLetteredAt),
		OriginalSeq:    d.Seq,
	}
}

// Selection picks dead letters: by Seqs, or by a query of what they are
// (Route, Destination, Status, Reason, Since, Until). It is the body of a
// replay or purge, and its query travels as a query string (GET
// /v1/deadletters, the dashboard's links, the CLI's requests):
// ParseSelection reads one and Values writes one.
type Selection struct {
	Seqs        []uint64 `json:"seqs,omitempty"`
	Route       string   `json:"route,omitempty"`
	Destination string   `json:"destination,omitempty"`
	Status      string   `json:"status,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Since       string   `json:"since,omitempty"`
	Until       string   `json:"until,omitempty"`
	// Limit and Cursor page a list, or a replay by query.
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// All must be true to purge every dead letter with no query.
	All bool `json:"all,omitempty"`
	// To, in a replay, names another destination of the dead letters'
	// route to replay them to instead of their own, such as a
	// developer's pull destination. By query, it needs Route and
	// Destination.
	To string `json:"to,omitempty"`
}

// selectionKeys are the query string's keys of a Selection's query, in
// the order people read them.
var selectionKeys = []string{"route", "destination", "status", "reason", "since", "until"}

// ParseSelection reads a Selection's query and cursor from a query string
// or form; the values are checked where they are used.
func ParseSelection(q url.Values) Selection {
	return Selection{Route: q.Get("route"), Destination: q.Get("destination"), Status: q.Get("status"),
		Reason: q.Get("reason"), Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor")}
}

// Values is the query string ParseSelection reads back: s's query, and
// its cursor when it has one. Empty fields are left out.
func (s Selection) Values() url.Values {
	q := url.Values{}
	for i, v := range []string{s.Route, s.Destination, s.Status, s.Reason, s.Since, s.Until} {
		if v != "" {
			q.Set(selectionKeys[i], v)
		}
	}
	if s.Cursor != "" {
		q.Set("cursor", s.Cursor)
	}
	return q
}

// query is s's query for the store, times read against now.
func (s Selection) query(now time.Time) (store.DeadLetterQuery, error) {
	q := store.DeadLetterQuery{Route: s.Route, Destination: s.Destination, Status: s.Status, Reason: s.Reason}
	var err error
	if q.Since, err = parseTime("since", s.Since, now); err != nil {
		return q, err
	}
	if q.Until, err = parseTime("until", s.Until, now); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// HasQuery reports whether s selects by a query.
func (s Selection) HasQuery() bool {
	return s.Route != "" || s.Destination != "" || s.Status != "" || s.Reason != "" || s.Since != "" || s.Until != ""
}

// parseTime reads an RFC 3339 time or a duration meaning that long ago.
func parseTime(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (2h)", name, v)
}

func parseCursor(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("cursor %q: want the next_cursor of a previous page", v)
	}
	return n, nil
}

func parseLimit(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, fmt.Errorf("limit %q: want 1 to %d", v, maxLimit)
	}
	return n, nil
}

// listDeadLetters answers one page of dead letters, oldest first (by
// WEBHOOKS_DLQ sequence).
func (h *Handler) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), defaultLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out, err := h.Service.DeadLetters(r.Context(), ParseSelection(q), limit)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// DeadLetters returns one page of up to limit dead letters matching sel's
// query, from sel.Cursor on, oldest first (by WEBHOOKS_DLQ sequence).
func (svc *Service) DeadLetters(ctx context.Context, sel Selection, limit int) (DeadLetterPage, error) {
	svc.setup()
	q, err := sel.query(svc.Now())
	if err != nil {
		return DeadLetterPage{}, &RequestError{Reason: err.Error()}
	}
	cursor, err := parseCursor(sel.Cursor)
	if err != nil {
		return DeadLetterPage{}, &RequestError{Reason: err.Error()}
	}
	p, err := svc.Store.QueryDeadLetters(ctx, q, cursor, limit)
	if err != nil {
		return DeadLetterPage{}, err
	}
	out := DeadLetterPage{DeadLetters: make([]DeadLetter, 0, len(p.DeadLetters))}
	for _, d := range p.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, summary(d))
	}
	if p.Next > 0 {
		out.NextCursor = strconv.FormatUint(p.Next, 10)
	}
	return out, nil
}

func (h *Handler) countDeadLetters(w http.ResponseWriter, r *http.Request) {
	n, err := h.Service.DeadLetterCount(r.Context(), ParseSelection(r.URL.Query()))
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"count": n})
}

// DeadLetterCount counts the dead letters sel's query selects.
func (svc *Service) DeadLetterCount(ctx context.Context, sel Selection) (uint64, error) {
	svc.setup()
	q, err := sel.query(svc.Now())
	if err != nil {
		return 0, &RequestError{Reason: err.Error()}
	}
	return svc.Store.DeadLetterCount(ctx, q)
}

func (h *Handler) showDeadLetter(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "a dead letter is named by its sequence number")
		return
	}
	out, err := h.Service.DeadLetter(r.Context(), seq)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// DeadLetter returns the dead letter at WEBHOOKS_DLQ sequence seq with the
// original request, and its replay if any.
func (svc *Service) DeadLetter(ctx context.Context, seq uint64) (DeadLetterDetail, error) {
	svc.setup()
	d, err := svc.Store.DeadLetter(ctx, seq)
	if err != nil {
		return DeadLetterDetail{}, err
	}
	e := d.Envelope
	out := DeadLetterDetail{DeadLetter: summary(d), Method: e.Method, Host: e.Host, Proto: e.Proto,
		RequestURI: e.RequestURI, RemoteAddr: e.RemoteAddr, Headers: e.Header, Body: string(e.Body), BodyEncoding: "utf-8"}
	if !utf8.Valid(e.Body) {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(e.Body), "base64"
	}
	if rp, err := svc.Store.LastReplay(ctx, e.Route, d.Destination, e.EventID); err == nil && rp.Exists && rp.Of == seq {
		out.Replay = &Replay{Seq: rp.Seq, DeadLetter: rp.Of, At: at(rp.At)}
	}
	return out, nil
}

// ReplayResult is the answer of POST /v1/deadletters/replay.
type ReplayResult struct {
	Queued            int `json:"queued"`
	SkippedDuplicates int `json:"skipped_duplicates"`
	// NotFound counts requested sequences that are no longer dead letters.
	NotFound int `json:"not_found,omitempty"`
	// NextCursor, in a replay by query, is the cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// replay republishes the selected dead letters to their destination only:
// by seqs, or one page by query.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) {
	var sel Selection
	if err := readJSON(w, r, &sel); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var (
		out ReplayResult
		err error
	)
	if len(sel.Seqs) > 0 {
		if sel.HasQuery() || sel.Cursor != "" {
			writeError(w, http.StatusBadRequest, "bad_request", "give seqs or a query, not both")
			return
		}
		out, err = h.Service.ReplaySeqs(r.Context(), sel.Seqs, sel.To)
	} else {
		out, err = h.Service.ReplayMatching(r.Context(), sel)
	}
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ReplaySeqs republishes the dead letters at the given WEBHOOKS_DLQ
// sequences (at most 1000) to their destination only, or, when to is not
// empty, to that destination of their route instead.
func (svc *Service) ReplaySeqs(ctx context.Context, seqs []uint64, to string) (ReplayResult, error) {
	svc.setup()
	var out ReplayResult
	if len(seqs) > maxLimit {
		return out, badRequest("at most %d seqs at once", maxLimit)
	}
	var dls []store.DeadLetter
	for _, seq := range seqs {
		d, err := svc.Store.DeadLetter(ctx, seq)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				out.NotFound++
				continue
			}
			return out, err
		}
		if to != "" && !svc.hasDestination(d.Envelope.Route, to) {
			return out, badRequest("dead letter %d is of route %q, which has no destination %q to replay to", seq, d.Envelope.Route, to)
		}
		dls = append(dls, d)
	}
	return svc.republish(ctx, dls, to, out)
}

// hasDestination reports whether route has a running destination dest.
func (svc *Service) hasDestination(route, dest string) bool {
	for _, f := range svc.Forwarder.Status() {
		if f.Route == route && f.Destination == dest {
			return true
		}
	}
	return false
}

// ReplayMatching republishes one page (sel.Limit, default 100, at most
// 1000) of the dead letters sel's query selects, from sel.Cursor on, and
// returns the cursor of the next page. The pages cover the dead letters
// that existed when the first page was asked for. With sel.To they go to
// that destination of sel.Route instead of their own: one destination's
// dead letters (sel.Destination), so that no event goes there twice.
func (svc *Service) ReplayMatching(ctx context.Context, sel Selection) (ReplayResult, error) {
	svc.setup()
	var out ReplayResult
	q, err := sel.query(svc.Now())
	if err != nil {
		return out, &RequestError{Reason: err.Error()}
	}
	if sel.To != "" {
		if sel.Route == "" || sel.Destination == "" {
			return out, badRequest("to %q replays one destination's dead letters: give route and destination too", sel.To)
		}
		if !svc.hasDestination(sel.Route, sel.To) {
			return out, badRequest("route %q has no destination %q to replay to", sel.Route, sel.To)
		}
	}
	// A replay cursor is "<next>-<last>": last is the newest dead letter
	// when the first page was asked for, so the pages never reach the
	// dead letters these replays may add.
	next, last, _ := strings.Cut(sel.Cursor, "-")
	cursor, err := parseCursor(next)
	if err == nil && sel.Cursor != "" {
		q.MaxSeq, err = parseCursor(last)
	}
	if err != nil {
		return out, &RequestError{Reason: err.Error()}
	}
	if sel.Cursor == "" {
		if q.MaxSeq, err = svc.Store.LastDeadLetterSeq(ctx); err != nil {
			return out, err
		}
		if q.MaxSeq == 0 {
			return out, nil
		}
	}
	limit := sel.Limit
	if limit == 0 {
		limit = defaultLimit
	}
	if limit < 1 || limit > maxLimit {
		return out, badRequest("limit %d: want 1 to %d", limit, maxLimit)
	}
	p, err := svc.Store.QueryDeadLetters(ctx, q, cursor, limit)
	if err != nil {
		return out, err
	}
	if p.Next > 0 {
		out.NextCursor = fmt.Sprintf("%d-%d", p.Next, q.MaxSeq)
	}
	return svc.republish(ctx, p.DeadLetters, sel.To, out)
}

// republish replays dls, to their own destination or to, and adds the
// counts to out.
func (svc *Service) republish(ctx context.Context, dls []store.DeadLetter, to string, out ReplayResult) (ReplayResult, error) {
	var (
		res store.ReplayCounts
		err error
	)
	if to == "" {
		res, err = svc.Store.Replay(ctx, dls)
	} else {
		res, err = svc.Store.ReplayTo(ctx, dls, to)
	}
	out.Queued, out.SkippedDuplicates = res.Queued, res.Duplicates
	if err != nil {
		return out, err
	}
	svc.traceReplays(ctx, dls, to)
	log := svc.Logger
	if to != "" {
		log = log.With("to", to)
	}
	log.Info("dead letters replayed", "queued", out.Queued, "skipped_duplicates", out.SkippedDuplicates)
	return out, nil
}

// purge deletes the selected dead letters.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) {
	var sel Selection
	if err := readJSON(w, r, &sel); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	n, err := h.Service.Purge(r.Context(), sel)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
}

// Purge deletes the selected dead letters: by seqs, by query (all that
// match, no paging), or every one with All; a selection that names
// nothing is refused. It returns how many it deleted.
func (svc *Service) Purge(ctx context.Context, sel Selection) (int, error) {
	svc.setup()
	var (
		n   int
		err error
	)
	if sel.To != "" {
		return 0, badRequest("to is for replays; a purge deletes the dead letters it selects")
	}
	switch {
	case len(sel.Seqs) > 0:
		if sel.HasQuery() || sel.All {
			return 0, badRequest("give seqs or a query, not both")
		}
		n, err = svc.Store.DeleteDeadLetters(ctx, sel.Seqs)
	case sel.HasQuery() || sel.All:
		q, qerr := sel.query(svc.Now())
		if qerr != nil {
			return 0, &RequestError{Reason: qerr.Error()}
		}
		n, err = svc.Store.PurgeDeadLetters(ctx, q)
	default:
		return 0, badRequest(`name dead letters by seqs or a query, or send {"all": true} to purge every one`)
	}
	if err != nil {
		return n, err
	}
	svc.Logger.Info("dead letters purged", "purged", n)
	return n, nil
}
