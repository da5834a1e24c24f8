package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
)

// Bounds of one page of a search.
const (
	defaultSearchLimit = 50
	// DefaultSearchBytes is the most a page of a search reads, headers
	// and bodies, unless it asks for less or more (up to MaxSearchBytes).
	DefaultSearchBytes = 2 << 30
	MaxSearchBytes     = 32 << 30
	// searchTime is the longest one page of a search runs; it then ends
	// with a cursor, within the admin listener's write timeout.
	searchTime = time.Minute
	// maxSearches is how many searches run at once; one more is refused
	// (429), so that searches cannot take the cores delivery needs.
	maxSearches = 2
	maxExpr     = 4 << 10
)

// SearchStates are the states a search filters on: store.State* and
// StateWaiting; attempting matches in_flight and in_backoff.
var SearchStates = []string{store.StateDelivered, StateWaiting, store.StatePending, store.StateInFlight,
	store.StateInBackoff, store.StateDeadLettered, store.StateFiltered, store.StateAttempting}

// Search is a search of stored events as it travels in a URL: GET
// /v1/events, the dashboard's Events page and `jethook events search`
// all read it with ParseSearch and write it with Values. Empty fields
// select everything.
type Search struct {
	// Expr is a CEL expression over headers, body, raw, route and method,
	// as destination filters are written (docs/filters.md): q in a URL.
	Expr  string
	Route string
	// Destination narrows the states shown, and the state filter, to one
	// destination of Route.
	Destination string
	// State keeps the events that are in this state at Destination, or at
	// any destination of their route: delivered, waiting, pending,
	// in_flight, in_backoff, attempting (either of those two),
	// dead_lettered or filtered.
	State string
	// Type keeps the events of this type (provider.EventType); a trailing
	// "*" matches any type it begins ("invoice.*").
	Type         string
	Since, Until string // RFC 3339 times or durations ago (24h)
	Oldest       bool   // order=oldest; newest first otherwise
	Limit        int    // results per page; 0 is the default
	Cursor       string // next_cursor of the previous page
	MaxBytes     int64  // bytes one page may read; 0 is DefaultSearchBytes
}

// ParseSearch reads a search from a query string.
func ParseSearch(q url.Values) (Search, error) {
	s := Search{Expr: q.Get("q"), Route: q.Get("route"), Destination: q.Get("destination"), State: q.Get("state"),
		Type: q.Get("type"), Since: q.Get("since"), Until: q.Get("until"), Cursor: q.Get("cursor")}
	switch q.Get("order") {
	case "", "newest":
	case "oldest":
		s.Oldest = true
	default:
		return s, badRequest("order %q: want newest or oldest", q.Get("order"))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return s, badRequest("limit %q: want 1 to %d", v, maxLimit)
		}
		s.Limit = n
	}
	if v := q.Get("max_bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxSearchBytes {
			return s, badRequest("max_bytes %q: want 1 to %d", v, int64(MaxSearchBytes))
		}
		s.MaxBytes = n
	}
	return s, nil
}

// Values is the query string of s, ParseSearch's inverse; empty fields
// are left out.
func (s Search) Values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"q": s.Expr, "route": s.Route, "destination": s.Destination, "state": s.State,
		"type": s.Type, "since": s.Since, "until": s.Until, "cursor": s.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if s.Oldest {
		q.Set("order", "oldest")
	}
	if s.Limit != 0 {
		q.Set("limit", strconv.Itoa(s.Limit))
	}
	if s.MaxBytes != 0 {
		q.Set("max_bytes", strconv.FormatInt(s.MaxBytes, 10))
	}
	return q
}

// EventSummary is one event a search found: what it is and where it
// stands at each destination of its route.
type EventSummary struct {
	Seq          uint64             `json:"seq"`
	EventID      string             `json:"event_id"`
	Route        string             `json:"route"`
	Type         string             `json:"type,omitempty"`
	Method       string             `json:"method"`
	ReceivedAt   *time.Time         `json:"received_at,omitempty"`
	Size         int                `json:"size"`
	Destinations []DestinationState `json:"destinations"`
}

// DestinationState is an event's state at one destination (see
// EventDestination for the states).
type DestinationState struct {
	Destination string `json:"destination"`
	State       string `json:"state"`
}

// SearchProgress is how far a search has read: webhooks and bytes, and
// the stored time it has reached (newest first, the window from its end
// down to Reached is covered; oldest first, from its start up to it).
type SearchProgress struct {
	Scanned int        `json:"scanned"`
	Bytes   int64      `json:"bytes"`
	Reached *time.Time `json:"reached,omitempty"`
	// Skipped is how many stored messages (of every route) the search
	// passed over unread: blocks whose index shows they hold none of the
	// strings the expression needs a body field to equal.
	Skipped int `json:"skipped,omitempty"`
}

// SearchEnd is how a page of a search ended: NextCursor, when set, goes on
// with the next page; Stopped says why the page ended before the window's
// end: limit (the page is full), max_bytes or deadline.
type SearchEnd struct {
	SearchProgress
	NextCursor string `json:"next_cursor,omitempty"`
	Stopped    string `json:"stopped,omitempty"`
}

// SearchPage is the answer of GET /v1/events as one JSON document.
type SearchPage struct {
	Events []EventSummary `json:"events"`
	SearchEnd
}

// ErrTooManySearches refuses a search while maxSearches run.
var ErrTooManySearches = fmt.Errorf("%d searches are running; try again when one has ended", maxSearches)

// compiled is a Search checked and ready to run.
type compiled struct {
	scan  store.Scan
	dests map[string][]string // route → its destinations, in order
	state func(d store.Delivery) bool
	expr  *filter.Filter
	typ   string
}

func (svc *Service) compile(s Search) (compiled, error) {
	var c compiled
	now := svc.Now()
	since, err := parseTime("since", s.Since, now)
	if err != nil {
		return c, &RequestError{Reason: err.Error()}
	}
	until, err := parseTime("until", s.Until, now)
	if err != nil {
		return c, &RequestError{Reason: err.Error()}
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return c, badRequest("until must be after since")
	}
	cursor, err := parseCursor(s.Cursor)
	if err != nil {
		return c, &RequestError{Reason: err.Error()}
	}
	c.dests = map[string][]string{}
	ordered := map[[2]string]bool{}
	for _, f := range svc.Forwarder.Status() {
		c.dests[f.Route] = append(c.dests[f.Route], f.Destination)
		ordered[[2]string{f.Route, f.Destination}] = f.Ordered
	}
	switch {
	case s.Route != "" && store.DeadLetterQuery{Route: s.Route}.Validate() != nil:
		return c, badRequest("%q is not a route name: names hold only letters, digits, \"_\" and \"-\"", s.Route)
	case s.Destination != "" && s.Route == "":
		return c, badRequest("a destination filter needs a route")
	case s.Destination != "" && !slices.Contains(c.dests[s.Route], s.Destination):
		return c, badRequest("route %q has no destination %q", s.Route, s.Destination)
	case s.State != "" && !slices.Contains(SearchStates, s.State):
		return c, badRequest("state %q: want one of %s", s.State, strings.Join(SearchStates, ", "))
	case len(s.Expr) > maxExpr:
		return c, badRequest("the expression is %d bytes; at most %d", len(s.Expr), maxExpr)
	case len(s.Type) > 100:
		return c, badRequest("type: at most 100 bytes")
	}
	if strings.TrimSpace(s.Expr) != "" {
		if c.expr, err = filter.Compile(s.Expr); err != nil {
			return c, badRequest("q: %s", strings.Replace(err.Error(), "filter", "expression", 1))
		}
	}
	if s.Destination != "" {
		c.dests[s.Route] = []string{s.Destination}
	}
	if s.State != "" {
		c.state = func(d store.Delivery) bool { return store.StateMatches(s.State, d.State) }
	}
	c.typ = s.Type
	limit := s.Limit
	if limit == 0 {
		limit = defaultSearchLimit
	}
	maxBytes := s.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultSearchBytes
	}
	c.scan = store.Scan{Route: s.Route, Since: since, Until: until, Oldest: s.Oldest, Cursor: cursor,
		Limit: limit, MaxBytes: maxBytes}
	if c.expr != nil {
		c.scan.Values = c.expr.Values()
	}
	// What the match reads: a search that reads no bodies reads headers
	// alone; the event type can be in either.
	c.scan.NoBody = c.typ == "" && (c.expr == nil || !c.expr.Reads("body") && !c.expr.Reads("raw"))
	c.scan.NoHeaders = c.typ == "" && (c.expr == nil || !c.expr.Reads("headers"))
	if s.State != "" {
		// Whether an event waits behind its ordering key depends on its
		// key, which the destination's key expression reads from the
		// headers or the body.
		for route, dests := range c.dests {
			for _, d := range dests {
				if (s.Route == "" || route == s.Route) && ordered[[2]string{route, d}] {
					c.scan.NoBody, c.scan.NoHeaders = false, false
				}
			}
		}
	}
	return c, nil
}

// typeMatches reports whether an event of type got is of the type want
// names: the same, or beginning with want's text before a trailing "*".
func typeMatches(want, got string) bool {
	if p, ok := strings.CutSuffix(want, "*"); ok {
		return strings.HasPrefix(got, p)
	}
	return got == want
}

// eventType is the type e names (provider.EventType), its body not
// checked again when the ingress recorded it as JSON.
func eventType(e *store.Envelope) string {
	if e.JSON {
		return provider.EventTypeOfJSON(e.Header, e.Body)
	}
	return provider.EventType(e.Header, e.Body)
}

// Search runs one page of s: it hands each event found to found, newest
// (or oldest) first, and reports progress as it reads; found returning
// false ends the page early. Stopping ctx stops the search. At most
// maxSearches run at once: one more gets ErrTooManySearches.
func (svc *Service) Search(ctx context.Context, s Search, found func(EventSummary) bool, progress func(SearchProgress)) (SearchEnd, error) {
	svc.setup()
	c, err := svc.compile(s)
	if err != nil {
		return SearchEnd{}, err
	}
	select {
	case svc.searches <- struct{}{}:
		defer func() { <-svc.searches }()
	default:
		return SearchEnd{}, ErrTooManySearches
	}
	deliveries := svc.Store.Deliveries()
	states := func(e *store.Envelope, seq uint64, keep func(store.Delivery) bool) ([]DestinationState, bool) {
		out := make([]DestinationState, 0, len(c.dests[e.Route]))
		kept := keep == nil
		for _, d := range c.dests[e.Route] {
			got, err := deliveries.Of(ctx, e, seq, d)
			if err == nil && (got.State == store.StateDelivered || got.State == store.StateInFlight || got.State == store.StateInBackoff) {
				// Acked in its consumer, but it may wait behind its key.
				_, err = svc.order(e, seq, d, &got)
			}
			if err != nil {
				got.State = store.StateUnknown
			}
			kept = kept || keep(got)
			out = append(out, DestinationState{Destination: d, State: got.State})
		}
		return out, kept
	}
	c.scan.Deadline = time.Now().Add(searchTime)
	c.scan.Match = func(e *store.Envelope, seq uint64) bool {
		if c.expr != nil && c.expr.Excludes(e.Body) {
			return false // the cheapest test first
		}
		if c.typ != "" && !typeMatches(c.typ, eventType(e)) {
			return false
		}
		if c.expr != nil {
			if ok, _ := c.expr.Match(&filter.Event{Route: e.Route, Method: e.Method, Header: e.Header, Body: e.Body, JSON: e.JSON}); !ok {
				return false
			}
		}
		if c.state != nil {
			_, ok := states(e, seq, c.state)
			return ok
		}
		return true
	}
	hit := func(hh store.Hit) bool {
		e := hh.Envelope
		ds, _ := states(e, hh.Seq, nil)
		return found(EventSummary{Seq: hh.Seq, EventID: e.EventID, Route: e.Route, Type: eventType(e),
			Method: e.Method, ReceivedAt: at(e.ReceivedAt), Size: hh.Size, Destinations: ds})
	}
	var report func(store.ScanProgress)
	if progress != nil {
		report = func(p store.ScanProgress) { progress(searchProgress(p)) }
	}
	end, err := svc.Store.Search(ctx, c.scan, hit, report)
	out := SearchEnd{SearchProgress: searchProgress(end.ScanProgress), Stopped: end.Stopped}
	if end.Next > 0 {
		out.NextCursor = strconv.FormatUint(end.Next, 10)
	}
	return out, err
}

func searchProgress(p store.ScanProgress) SearchProgress {
	return SearchProgress{Scanned: p.Scanned, Bytes: p.Bytes, Reached: at(p.Reached), Skipped: p.Skipped}
}

// searchLine is one line of a streamed search: exactly one field is set.
type searchLine struct {
	Event    *EventSummary   `json:"event,omitempty"`
	Progress *SearchProgress `json:"progress,omitempty"`
	End      *SearchEnd      `json:"end,omitempty"`
	Error    *apiError       `json:"error,omitempty"`
}

// search answers GET /v1/events: one page as a JSON document, or, asked
// for application/x-ndjson, each event as it is found, progress lines, and
// an end line with the cursor.
func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	s, err := ParseSearch(r.URL.Query())
	if err != nil {
		storeError(w, err)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), NDJSON) {
		page := SearchPage{Events: []EventSummary{}}
		end, err := h.Service.Search(r.Context(), s, func(e EventSummary) bool {
			page.Events = append(page.Events, e)
			return true
		}, nil)
		if err != nil {
			searchError(w, err)
			return
		}
		page.SearchEnd = end
		writeJSON(w, http.StatusOK, page)
		return
	}
	out := NewLineStream(w)
	var last time.Time
	end, err := h.Service.Search(r.Context(), s, func(e EventSummary) bool {
		return out.Write(searchLine{Event: &e})
	}, func(p SearchProgress) {
		if time.Since(last) >= ProgressEvery {
			last = time.Now()
			out.Write(searchLine{Progress: &p})
		}
	})
	switch {
	case err != nil && !out.Started():
		searchError(w, err)
	case err != nil:
		out.Write(searchLine{Error: &apiError{Error: "search_failed", Message: err.Error()}})
	default:
		out.Write(searchLine{End: &end})
	}
}

// searchError answers a search that could not start.
func searchError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrTooManySearches) {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "too_many_searches", err.Error())
		return
	}
	storeError(w, err)
}
