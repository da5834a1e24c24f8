package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// eventsPerPage is how many events one page of a search lists, each with
// its state at every destination of its route.
const eventsPerPage = 20

// routes are the routes that have running destinations, in configuration
// order, and each one's destinations.
func (h *Handler) routes() (names []string, dests map[string][]string) {
	dests = map[string][]string{}
	for _, s := range h.Service.Forwarder.Status() {
		if !slices.Contains(names, s.Route) {
			names = append(names, s.Route)
		}
		dests[s.Route] = append(dests[s.Route], s.Destination)
	}
	return names, dests
}

// eventRow is an event found, with its states in the table's destination
// columns when the search names a route.
type eventRow struct {
	admin.EventSummary
	Columns   []string // the state at each of Names, "" where it has none
	Names     []string // the table's destination columns; none without a route
	AllRoutes bool     // the table has a Route column
}

// results is the results part of the Events page: the rows found so far,
// how far the scan went, and the link to the next page.
type results struct {
	Search    admin.Search
	Columns   []string
	Events    []eventRow
	Scan      *scanned // nil before the scan has read anything
	Next      string
	Streaming bool // rows come as they are found (streamEvents)
}

// scanned is what the page says of a scan's progress or end.
type scanned struct {
	admin.SearchProgress
	Stopped string
	Oldest  bool
}

// events finds an event by id, or searches events: the same search as
// GET /v1/events and jethook events search, from the URL's query, one
// page at a time. The dashboard's script asks for the page's rows as they
// are found (streamEvents); without it, the page comes when the search
// ends.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, "/events/"+url.PathEscape(id)+query("route", q.Get("route")), http.StatusSeeOther)
		return
	}
	s, err := admin.ParseSearch(q)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	if s.Limit == 0 {
		s.Limit = eventsPerPage
	}
	names, dests := h.routes()
	res := results{Search: s, Columns: dests[s.Route]}
	if s.Destination != "" {
		res.Columns = []string{s.Destination}
	}
	if strings.Contains(r.Header.Get("Accept"), admin.NDJSON) {
		h.streamEvents(w, r, res)
		return
	}
	end, err := h.Service.Search(r.Context(), s, func(e admin.EventSummary) bool {
		res.Events = append(res.Events, res.row(e))
		return true
	}, nil)
	if errors.Is(err, admin.ErrTooManySearches) {
		h.fail(w, r, http.StatusTooManyRequests, err.Error())
		return
	}
	if err != nil {
		h.failure(w, r, err)
		return
	}
	res.Scan = &scanned{SearchProgress: end.SearchProgress, Stopped: end.Stopped, Oldest: s.Oldest}
	res.Next = res.next(end)
	h.render(w, r, http.StatusOK, "events", "Events", map[string]any{"Routes": names, "AllDestinations": dests,
		"Search": s, "States": admin.SearchStates, "Results": res})
}

// row is e as a row of the results' table.
func (res *results) row(e admin.EventSummary) eventRow {
	row := eventRow{EventSummary: e, AllRoutes: res.Search.Route == ""}
	if res.Search.Route == "" {
		return row
	}
	row.Names = res.Columns
	for _, c := range res.Columns {
		state := ""
		for _, d := range e.Destinations {
			if d.Destination == c {
				state = d.State
			}
		}
		row.Columns = append(row.Columns, state)
	}
	return row
}

// next is the link to the page after the one that ended with end, or "".
func (res *results) next(end admin.SearchEnd) string {
	if end.NextCursor == "" {
		return ""
	}
	next := res.Search
	next.Cursor = end.NextCursor
	return "/events?" + next.Values().Encode()
}

// event shows one event: its request, body and each destination's
// attempts.
func (h *Handler) event(w http.ResponseWriter, r *http.Request) {
	id, route := r.PathValue("id"), r.URL.Query().Get("route")
	ev, err := h.Service.Event(r.Context(), id, route)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	env, _, err := h.Service.Store.Event(r.Context(), id, ev.Route)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	previews := map[string]previewView{}
	for _, d := range ev.Destinations {
		if d.Transform == "" {
			continue
		}
		p, err := h.Service.Preview(r.Context(), id, admin.PreviewRequest{Destination: d.Destination, Route: ev.Route})
		if err != nil {
			previews[d.Destination] = previewView{Script: d.Transform, Error: err.Error()}
			continue
		}
		previews[d.Destination] = newPreview(d.Transform, p)
	}
	h.render(w, r, http.StatusOK, "event", "Event "+id, map[string]any{
		"Event": ev, "Request": request(env), "Body": newBody(env.Body), "Done": r.URL.Query().Get("resent"), "Previews": previews})
}

// resend sends an event again (admin.Service.Resend) to the destination
// the form names, or to every one, and goes back to the event with what
// was done.
func (h *Handler) resend(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	id := r.PathValue("id")
	res, err := h.Service.Resend(r.Context(), id, admin.ResendRequest{Route: r.PostFormValue("route"), Destination: r.PostFormValue("destination")})
	if err != nil {
		h.failure(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, res)
		return
	}
	var done []string
	for _, o := range res.Destinations {
		done = append(done, o.Destination+": "+resendText[o.Action])
	}
	http.Redirect(w, r, "/events/"+url.PathEscape(id)+query("route", res.Route, "resent", strings.Join(done, "; ")+"."), http.StatusSeeOther)
}

// resendText says what a resend did at a destination.
var resendText = map[string]string{
	admin.ResendQueued:    "queued to be delivered again now",
	admin.ResendReplayed:  "dead letter replayed",
	admin.ResendRetrying:  "next retry brought forward to now",
	admin.ResendDuplicate: "already queued again",
	admin.ResendWaiting:   "already on its way, nothing done",
	admin.ResendSkipped:   "skipped (its filter did not take the event)",
}

// previewView is what the event page shows of the request a destination's
// transform makes of the event now.
type previewView struct {
	Script, Method, Target string
	Headers                []header
	Body                   body
	Dropped                bool
	Error                  string
	Sent                   *store.Sent
}

func newPreview(script string, p forward.Preview) previewView {
	v := previewView{Script: script, Method: p.Method, Target: p.URL, Dropped: p.Dropped, Error: p.Error, Sent: p.Sent}
	if p.Query != "" {
		v.Target += "?" + p.Query
	}
	v.Headers = headers(p.Header)
	v.Body = newBody([]byte(p.Body))
	return v
}

// requestView is what a page shows of the original request.
type requestView struct {
	Method, Host, Proto, RemoteAddr string
	Headers                         []header
}

type header struct{ Name, Value string }

func request(e *store.Envelope) requestView {
	v := requestView{Method: e.Method, Host: e.Host, Proto: e.Proto, RemoteAddr: e.RemoteAddr}
	v.Headers = headers(e.Header)
	return v
}

// headers lists h sorted by name, one row per value.
func headers(h map[string][]string) []header {
	var out []header
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, header{k, v})
		}
	}
	slices.SortStableFunc(out, func(a, b header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// attemptsOf returns the attempts to destination in ev.
func attemptsOf(ev admin.Event, destination string) []admin.Attempt {
	for _, d := range ev.Destinations {
		if d.Destination == destination {
			return d.Attempts
		}
	}
	return nil
}
