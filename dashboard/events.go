package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// eventsPerPage is how many recent events one page lists, each with its
// state at every destination of its route.
const eventsPerPage = 20

// eventRow is one recent event with its state per destination.
type eventRow struct {
	store.EventSummary
	Outcomes []outcome
}

type outcome struct {
	Destination string
	State       string
}

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

// events finds an event by id, or lists a route's recent events.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, route := strings.TrimSpace(q.Get("id")), q.Get("route")
	if id != "" {
		http.Redirect(w, r, "/events/"+url.PathEscape(id)+query("route", route), http.StatusSeeOther)
		return
	}
	names, dests := h.routes()
	if route == "" && len(names) > 0 {
		route = names[0]
	}
	data := map[string]any{"Routes": names, "Route": route, "Destinations": dests[route]}
	if route == "" {
		h.render(w, r, http.StatusOK, "events", "Events", data)
		return
	}
	var before uint64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, "before: want the sequence of the next page's link")
			return
		}
		before = n
	}
	p, err := h.Store.RecentEvents(r.Context(), route, before, eventsPerPage)
	if err != nil {
		h.failure(w, r, err)
		return
	}
	rows := make([]eventRow, 0, len(p.Events))
	for _, e := range p.Events {
		row := eventRow{EventSummary: e}
		env := &store.Envelope{Route: e.Route, EventID: e.EventID}
		for _, d := range dests[route] {
			state := store.StateUnknown
			if got, err := h.Store.Delivery(r.Context(), env, e.Seq, d); err == nil {
				state = got.State
			}
			row.Outcomes = append(row.Outcomes, outcome{Destination: d, State: state})
		}
		rows = append(rows, row)
	}
	data["Events"] = rows
	if p.Before > 0 {
		data["Older"] = strconv.FormatUint(p.Before, 10)
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
		"Event": ev, "Request": request(env), "Body": newBody(env.Body), "Previews": previews})
}

// previewView is what the event page shows of the request a destination's
// transform makes of the event now.
type previewView struct {
	Script, Method, Target string
	Headers                []header
	Body                   body
	Dropped                bool
	Error                  string
}

func newPreview(script string, p forward.Preview) previewView {
	v := previewView{Script: script, Method: p.Method, Target: p.URL, Dropped: p.Dropped, Error: p.Error}
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
