package dashboard

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jethook/jethook/admin"
)

// Page sizes: dead letters listed, and replayed per request of a replay by
// query (the script repeats it until the cursor runs out).
const (
	deadLettersPerPage = 50
	replayPage         = 500
)

func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sel := admin.ParseSelection(q)
	p, err := h.Service.DeadLetters(r.Context(), sel, deadLettersPerPage)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	sel.Cursor = ""
	count, err := h.Service.DeadLetterCount(r.Context(), sel)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	// Which of them were replayed, and when: one index lookup each.
	replayed := map[uint64]*time.Time{}
	for _, d := range p.DeadLetters {
		if rp, err := h.Service.Store.LastReplay(r.Context(), d.Route, d.Destination, d.EventID); err == nil && rp.Exists && rp.Of == d.Seq {
			replayed[d.Seq] = &rp.At
		}
	}
	names, dests := h.routes()
	data := map[string]any{"Page": p, "Selection": sel, "Count": count, "Routes": names, "Destinations": dests,
		"Query": sel.Values().Encode(), "Replayed": replayed}
	if p.NextCursor != "" {
		next := sel.Values()
		next.Set("cursor", p.NextCursor)
		data["Next"] = next.Encode()
	}
	data["Done"] = done(q)
	h.render(w, r, http.StatusOK, "deadletters", "Dead letters", data)
}

func (h *Handler) deadLetter(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		h.fail(w, r, http.StatusBadRequest, "A dead letter is named by its sequence number.")
		return
	}
	d, err := h.Service.DeadLetter(r.Context(), seq)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	raw := []byte(d.Body)
	if d.BodyEncoding == "base64" {
		raw, _ = base64.StdEncoding.DecodeString(d.Body)
	}
	data := map[string]any{"DL": d, "Headers": headers(d.Headers), "Body": newBody(raw), "PullTo": h.pullDestinations(d.Route)}
	// The attempt timeline comes from the attempt log, through the event.
	if ev, err := h.Service.Event(r.Context(), d.EventID, d.Route); err == nil {
		data["Attempts"] = attemptsOf(ev, d.Destination)
	}
	data["Done"] = done(r.URL.Query())
	h.render(w, r, http.StatusOK, "deadletter", "Dead letter "+strconv.FormatUint(seq, 10), data)
}

// pullDestinations names route's pull destinations, where a dead letter
// of the route can be replayed for a developer to run it (docs/pull.md).
func (h *Handler) pullDestinations(route string) []string {
	var out []string
	for _, s := range h.Service.Forwarder.Status() {
		if s.Route == route && s.Pull {
			out = append(out, s.Destination)
		}
	}
	return out
}

// done says what the last action did, from the numbers its redirect put in
// the query (only numbers: a link cannot make the page say anything else).
func done(q url.Values) string {
	n := func(k string) int {
		v, err := strconv.Atoi(q.Get(k))
		if err != nil {
			return -1
		}
		return v
	}
	var parts []string
	if v := n("purged"); v >= 0 {
		parts = append(parts, fmt.Sprintf("Purged %d dead letter%s.", v, plural(v)))
	}
	if v := n("queued"); v >= 0 {
		parts = append(parts, fmt.Sprintf("Queued %d for replay.", v))
	}
	if v := n("skipped"); v > 0 {
		parts = append(parts, fmt.Sprintf("Skipped %d already replayed.", v))
	}
	if v := n("missing"); v > 0 {
		parts = append(parts, fmt.Sprintf("%d no longer existed.", v))
	}
	return strings.Join(parts, " ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// seqs reads the form's seq fields; bad ones are a RequestError.
func seqs(form url.Values) ([]uint64, error) {
	var out []uint64
	for _, v := range form["seq"] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return nil, &admin.RequestError{Reason: "seq " + strconv.Quote(v) + ": want a dead letter's sequence number"}
		}
		out = append(out, n)
	}
	return out, nil
}

// replay replays the selected dead letters (seq fields), or one page of
// those the query selects (from cursor), to their own destination or to
// the form's to. The script asks for JSON and repeats a replay by query
// until next_cursor is empty; a plain form is sent back to the page it
// came from with the counts.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	picked, err := seqs(r.PostForm)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	var res admin.ReplayResult
	switch {
	case len(picked) > 0:
		res, err = h.Service.ReplaySeqs(r.Context(), picked, r.PostFormValue("to"))
	case r.PostFormValue("matching") == "1":
		sel := admin.ParseSelection(r.PostForm)
		sel.Limit, sel.To = replayPage, r.PostFormValue("to")
		res, err = h.Service.ReplayMatching(r.Context(), sel)
	default:
		err = &admin.RequestError{Reason: "Pick dead letters to replay, or replay all that match the filter."}
	}
	if err != nil {
		h.failure(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, res)
		return
	}
	u, err := url.Parse(localPath(r.PostFormValue("back")))
	if err != nil {
		u = &url.URL{Path: "/"} // localPath returns only paths that parse
	}
	q := u.Query()
	q.Set("queued", strconv.Itoa(res.Queued))
	q.Set("skipped", strconv.Itoa(res.SkippedDuplicates))
	q.Set("missing", strconv.Itoa(res.NotFound))
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// purge asks first: without confirm=1 it shows what would go and a button
// to confirm; with it, it purges and goes back to the list.
func (h *Handler) purge(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	picked, err := seqs(r.PostForm)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	sel := admin.ParseSelection(r.PostForm)
	sel.Cursor = ""
	if len(picked) > 0 {
		sel = admin.Selection{Seqs: picked}
	} else {
		sel.All = true // the query, or when there is none, every one
	}
	if r.PostFormValue("confirm") != "1" {
		n := uint64(len(picked))
		if len(picked) == 0 {
			if n, err = h.Service.DeadLetterCount(r.Context(), sel); err != nil {
				h.failure(w, r, err)
				return
			}
		}
		query := sel.Values()
		var described []string
		for _, k := range []string{"route", "destination", "status", "reason", "since", "until"} {
			if v := query.Get(k); v != "" {
				described = append(described, k+" "+v)
			}
		}
		h.render(w, r, http.StatusOK, "purge", "Purge dead letters", map[string]any{
			"Count": n, "Seqs": picked, "Selection": sel, "Described": strings.Join(described, ", "), "Query": query.Encode()})
		return
	}
	n, err := h.Service.Purge(r.Context(), sel)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]int{"purged": n})
		return
	}
	q := sel.Values()
	q.Set("purged", strconv.Itoa(n))
	http.Redirect(w, r, "/deadletters?"+q.Encode(), http.StatusSeeOther)
}
