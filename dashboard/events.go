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
	for _, s := range h.Forwarder.Status() {
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
	Columns []string // the state at each of Destinations, "" where it has none
}

// events finds an event by id, or searches events: the same search as
// GET /v1/events and jethook events search, from the URL's query, one
// page at a time.
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
	columns := dests[s.Route]
	if s.Destination != "" {
		columns = []string{s.Destination}
	}
	var rows []eventRow
	end, err := h.api.Search(r.Context(), s, func(e admin.EventSummary) bool {
		row := eventRow{EventSummary: e}
		for _, c := range columns {
			state := ""
			for _, d := range e.Destinations {
				if d.Destination == c {
					state = d.State
				}
			}
			row.Columns = append(row.Columns, state)
		}
		rows = append(rows, row)
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
	data := map[string]any{"Routes": names, "AllDestinations": dests, "Search": s, "Columns": columns,
		"States": []string{store.StateDelivered, store.StatePending, store.StateInFlight, store.StateInBackoff, store.StateDeadLettered, store.StateFiltered},
		"Events": rows, "End": end}
	if end.NextCursor != "" {
		next := s
		next.Cursor = end.NextCursor
		data["Next"] = "/events?" + next.Values().Encode()
	}
	h.render(w, r, http.StatusOK, "events", "Events", data)
}

// event shows one event: its request, body and each destination's
// attempts.
func (h *Handler) event(w http.ResponseWriter, r *http.Request) {
	id, route := r.PathValue("id"), r.URL.Query().Get("route")
	ev, err := h.api.Event(r.Context(), id, route)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	env, _, err := h.Store.Event(r.Context(), id, ev.Route)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	previews := map[string]previewView{}
	for _, d := range ev.Destinations {
		if d.Transform == "" {
			continue
		}
		p, err := h.api.Preview(r.Context(), id, admin.PreviewRequest{Destination: d.Destination, Route: ev.Route})
		if err != nil {
			previews[d.Destination] = previewView{Script: d.Transform, Error: err.Error()}
			continue
		}
		previews[d.Destination] = newPreview(d.Transform, p)
	}
	h.render(w, r, http.StatusOK, "event", "Event "+id, map[string]any{
		"Event": ev, "Request": request(env), "Body": newBody(env.Body), "Done": r.URL.Query().Get("resent"), "Previews": previews})
}

// resend sends an event again (admin.Handler.Resend) to the destination
// the form names, or to every one, and goes back to the event with what
// was done.
func (h *Handler) resend(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	id := r.PathValue("id")
	res, err := h.api.Resend(r.Context(), id, admin.ResendRequest{Route: r.PostFormValue("route"), Destination: r.PostFormValue("destination")})
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
