package dashboard

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/jethook/jethook/admin"
)

// streamLine is one line of a streamed search, HTML the templates escaped
// (or, for Error, text): exactly one of Results, Row, Scan, End and Error
// is set. Results comes first: the results part of the page, empty; a Row
// for each event found; Scan as the scan goes on; End (how far it went,
// and More, the link to the next page) or Error last.
type streamLine struct {
	Results string `json:"results,omitempty"`
	Row     string `json:"row,omitempty"`
	Scan    string `json:"scan,omitempty"`
	End     string `json:"end,omitempty"`
	More    string `json:"more,omitempty"`
	Found   int    `json:"found,omitempty"` // with End: how many rows the page has
	Error   string `json:"error,omitempty"`
}

// streamEvents runs the search of res and sends the Events page's results
// as they are found, for the dashboard's script, which shows each row at
// once, the scan's progress, and can stop the search (by ending the
// request). A search that cannot start answers an error status as the
// script's other requests do.
func (h *Handler) streamEvents(w http.ResponseWriter, r *http.Request, res results) {
	out := admin.NewLineStream(w)
	html := func(name string, data any) string {
		var buf bytes.Buffer
		if err := h.pages["events"].ExecuteTemplate(&buf, name, data); err != nil {
			h.Logger.Error("dashboard page", "page", "events", "template", name, "err", err)
		}
		return buf.String()
	}
	res.Streaming = true
	found, ok := 0, true
	var last time.Time
	end, err := h.Service.Search(r.Context(), res.Search, func(e admin.EventSummary) bool {
		if !out.Started() {
			out.Write(streamLine{Results: html("results", res)})
		}
		found++
		ok = out.Write(streamLine{Row: html("eventrow", res.row(e))})
		return ok
	}, func(p admin.SearchProgress) {
		if !out.Started() {
			ok = out.Write(streamLine{Results: html("results", res)})
		}
		if ok && time.Since(last) >= admin.ProgressEvery {
			last = time.Now()
			ok = out.Write(streamLine{Scan: html("scanned", scanned{SearchProgress: p, Oldest: res.Search.Oldest})})
		}
	})
	if !ok {
		return // the page went away or stopped the search
	}
	switch {
	case err != nil && !out.Started() && errors.Is(err, admin.ErrTooManySearches):
		h.fail(w, r, http.StatusTooManyRequests, err.Error())
	case err != nil && !out.Started():
		h.failure(w, r, err)
	case err != nil:
		out.Write(streamLine{Error: "The search failed: " + err.Error()})
	default:
		if !out.Started() {
			out.Write(streamLine{Results: html("results", res)})
		}
		res.Next = res.next(end)
		out.Write(streamLine{End: html("scanned", scanned{SearchProgress: end.SearchProgress, Stopped: end.Stopped, Oldest: res.Search.Oldest}),
			More: html("more", res), Found: found})
	}
}
