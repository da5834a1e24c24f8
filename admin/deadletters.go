package admin

import (
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

// Page sizes of dead-letter lists and filter replays.
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

// Selection picks dead letters in a replay or purge body: Seqs, or the
// same filters GET /v1/deadletters takes.
type Selection struct {
	Seqs        []uint64 `json:"seqs,omitempty"`
	Route       string   `json:"route,omitempty"`
	Destination string   `json:"destination,omitempty"`
	Status      string   `json:"status,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Since       string   `json:"since,omitempty"`
	Until       string   `json:"until,omitempty"`
	// Limit and Cursor page a replay by filter.
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// All must be true to purge every dead letter with no filter.
	All bool `json:"all,omitempty"`
}

func (s Selection) filter(now time.Time) (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{Route: s.Route, Destination: s.Destination, Status: s.Status, Reason: s.Reason}
	var err error
	if f.Since, err = parseTime("since", s.Since, now); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", s.Until, now); err != nil {
		return f, err
	}
	return f, f.Validate()
}

func (s Selection) filtered() bool {
	return s.Route != "" || s.Destination != "" || s.Status != "" || s.Reason != "" || s.Since != "" || s.Until != ""
}

// selection reads the filters of a query string.
func selection(q url.Values) Selection {
	return Selection{Route: q.Get("route"), Destination: q.Get("destination"), Status: q.Get("status"),
		Reason: q.Get("reason"), Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor")}
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
	sel := selection(q)
	f, err := sel.filter(h.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	cursor, err := parseCursor(sel.Cursor)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	limit, err := parseLimit(q.Get("limit"), defaultLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	p, err := h.Store.QueryDeadLetters(r.Context(), f, cursor, limit)
	if err != nil {
		storeError(w, err)
		return
	}
	out := DeadLetterPage{DeadLetters: make([]DeadLetter, 0, len(p.DeadLetters))}
	for _, d := range p.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, summary(d))
	}
	if p.Next > 0 {
		out.NextCursor = strconv.FormatUint(p.Next, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) countDeadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := selection(r.URL.Query()).filter(h.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	n, err := h.Store.DeadLetterCount(r.Context(), f)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"count": n})
}

func (h *Handler) showDeadLetter(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "a dead letter is named by its sequence number")
		return
	}
	d, err := h.Store.DeadLetter(r.Context(), seq)
	if err != nil {
		storeError(w, err)
		return
	}
	e := d.Envelope
	out := DeadLetterDetail{DeadLetter: summary(d), Method: e.Method, Host: e.Host, Proto: e.Proto,
		RequestURI: e.RequestURI, RemoteAddr: e.RemoteAddr, Headers: e.Header, Body: string(e.Body), BodyEncoding: "utf-8"}
	if !utf8.Valid(e.Body) {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(e.Body), "base64"
	}
	if rp, err := h.Store.LastReplay(r.Context(), e.Route, d.Destination, e.EventID); err == nil && rp.Exists && rp.Of == seq {
		out.Replay = &Replay{Seq: rp.Seq, DeadLetter: rp.Of, At: at(rp.At)}
	}
	writeJSON(w, http.StatusOK, out)
}

// ReplayResult is the answer of POST /v1/deadletters/replay.
type ReplayResult struct {
	Queued            int `json:"queued"`
	SkippedDuplicates int `json:"skipped_duplicates"`
	// NotFound counts requested sequences that are no longer dead letters.
	NotFound int `json:"not_found,omitempty"`
	// NextCursor, in a replay by filter, is the cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// replay republishes the selected dead letters to their destination only.
// By seqs it replays those; by filter it replays one page (limit, default
// 100, at most 1000) and returns the cursor of the next.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) {
	var sel Selection
	if err := readJSON(w, r, &sel); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var (
		dls []store.DeadLetter
		out ReplayResult
	)
	switch {
	case len(sel.Seqs) > 0:
		if sel.filtered() || sel.Cursor != "" {
			writeError(w, http.StatusBadRequest, "bad_request", "give seqs or filters, not both")
			return
		}
		if len(sel.Seqs) > maxLimit {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("at most %d seqs at once", maxLimit))
			return
		}
		for _, seq := range sel.Seqs {
			d, err := h.Store.DeadLetter(r.Context(), seq)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					out.NotFound++
					continue
				}
				storeError(w, err)
				return
			}
			dls = append(dls, d)
		}
	default:
		f, err := sel.filter(h.Now())
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		// A replay cursor is "<next>-<last>": last is the newest dead letter
		// when the first page was asked for, so the pages never reach the
		// dead letters these replays may add.
		next, last, _ := strings.Cut(sel.Cursor, "-")
		cursor, err := parseCursor(next)
		if err == nil && sel.Cursor != "" {
			f.MaxSeq, err = parseCursor(last)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		if sel.Cursor == "" {
			if f.MaxSeq, err = h.Store.LastDeadLetterSeq(r.Context()); err != nil {
				storeError(w, err)
				return
			}
			if f.MaxSeq == 0 {
				writeJSON(w, http.StatusOK, out)
				return
			}
		}
		limit := sel.Limit
		if limit == 0 {
			limit = defaultLimit
		}
		if limit < 1 || limit > maxLimit {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit %d: want 1 to %d", limit, maxLimit))
			return
		}
		p, err := h.Store.QueryDeadLetters(r.Context(), f, cursor, limit)
		if err != nil {
			storeError(w, err)
			return
		}
		dls = p.DeadLetters
		if p.Next > 0 {
			out.NextCursor = fmt.Sprintf("%d-%d", p.Next, f.MaxSeq)
		}
	}
	res, err := h.Store.Replay(r.Context(), dls)
	out.Queued, out.SkippedDuplicates = res.Queued, res.Duplicates
	if err != nil {
		storeError(w, err)
		return
	}
	h.Logger.Info("dead letters replayed", "queued", out.Queued, "skipped_duplicates", out.SkippedDuplicates)
	writeJSON(w, http.StatusOK, out)
}

// purge deletes the selected dead letters: by seqs, by filter (all that
// match, no paging), or every one with {"all": true}.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) {
	var sel Selection
	if err := readJSON(w, r, &sel); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var (
		n   int
		err error
	)
	switch {
	case len(sel.Seqs) > 0:
		if sel.filtered() || sel.All {
			writeError(w, http.StatusBadRequest, "bad_request", "give seqs or filters, not both")
			return
		}
		n, err = h.Store.DeleteDeadLetters(r.Context(), sel.Seqs)
	case sel.filtered() || sel.All:
		f, ferr := sel.filter(h.Now())
		if ferr != nil {
			writeError(w, http.StatusBadRequest, "bad_request", ferr.Error())
			return
		}
		n, err = h.Store.PurgeDeadLetters(r.Context(), f)
	default:
		writeError(w, http.StatusBadRequest, "bad_request", `name dead letters by seqs or filters, or send {"all": true} to purge every one`)
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	h.Logger.Info("dead letters purged", "purged", n)
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
}
