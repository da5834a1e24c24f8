package catchup_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// fakeStripe serves the documented shape of Stripe's Events API
// (docs.stripe.com/api/events/list and /retrieve): a list object, newest
// first, limit 1 to 100, paged with starting_after and ending_before,
// filtered by created[gt|gte|lt|lte]; errors as {"error": {...}}. Like
// Stripe's, its JSON is indented, so a client that re-encodes an event
// changes its bytes.
type fakeStripe struct {
	t   *testing.T
	srv *httptest.Server

	types string // the catch_up block's events key, if set

	mu        sync.Mutex
	events    []stripeEvent // by created, then as added
	down      bool
	limitNext int         // answer the next list requests with 429
	limited   int         // 429s answered
	gte       []int64     // created[gte] of each first-page list request
	holdNext  bool        // a list request for a next page waits until its request ends
	holding   chan string // told of each list request that waits
	retrieves counter     // by event id
	lists     counter     // list requests by "first" or "next"
	bodies    map[string][]byte
}

type stripeEvent struct {
	ID      string
	Created int64
}

func newFakeStripe(t *testing.T) *fakeStripe {
	f := &fakeStripe{t: t, bodies: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", f.list)
	mux.HandleFunc("GET /v1/events/{id}", f.retrieve)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStripe) catchUp(interval string) string {
	return fmt.Sprintf("    catch_up:\n      stripe: {api_key: %s, api_url: '%s'%s}\n      interval: %s\n", stripeKey, f.srv.URL, f.types, interval)
}

// add makes an invoice.paid event Stripe has, created at created; it
// returns its body.
func (f *fakeStripe) add(id string, created int64) []byte {
	return f.addType(id, "invoice.paid", created)
}

func (f *fakeStripe) addType(id, typ string, created int64) []byte {
	body := fmt.Appendf(nil, "{\n  \"id\": %q,\n  \"object\": \"event\",\n  \"api_version\": \"2025-06-30.basil\",\n  \"created\": %d,\n"+
		"  \"data\": {\n    \"object\": {\n      \"id\": \"in_%s\",\n      \"object\": \"invoice\",\n      \"amount_paid\": 1200\n    }\n  },\n"+
		"  \"livemode\": false,\n  \"pending_webhooks\": 1,\n  \"request\": {\n    \"id\": null,\n    \"idempotency_key\": null\n  },\n  \"type\": %q\n}",
		id, created, id, typ)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, stripeEvent{id, created})
	slices.SortStableFunc(f.events, func(a, b stripeEvent) int { return cmp.Compare(a.Created, b.Created) })
	f.bodies[id] = body
	return body
}

// send adds an event and delivers it to hook, signed, as Stripe does.
func (f *fakeStripe) send(hook, id string, created int64) int {
	body := f.add(id, created)
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	p, err := provider.New(provider.Config{Name: provider.NameStripe, Secrets: []string{stripeSecret}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := p.Sign(&provider.Request{Method: http.MethodPost, Header: h, Body: body}, stripeSecret, time.Now()); err != nil {
		f.t.Fatal(err)
	}
	return post(f.t, hook, h, body)
}

func stripeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
}

func (f *fakeStripe) authorized(w http.ResponseWriter, r *http.Request, list bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+stripeKey:
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "Invalid API Key provided")
	case f.down:
		stripeError(w, http.StatusInternalServerError, "api_error", "Something went wrong on Stripe's end.")
	case list && f.limitNext > 0:
		f.limitNext--
		f.limited++
		w.Header().Set("Retry-After", "1")
		stripeError(w, http.StatusTooManyRequests, "rate_limit_error", "Too many requests hit the API too quickly.")
	default:
		return true
	}
	return false
}

func (f *fakeStripe) list(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r, true) {
		return
	}
	q := r.URL.Query()
	limit := 10
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "limit must be between 1 and 100")
			return
		}
		limit = n
	}
	f.mu.Lock()
	held, holding := f.holdNext && q.Get("starting_after") != "", f.holding
	f.mu.Unlock()
	if held {
		holding <- q.Get("starting_after")
		<-r.Context().Done()
		return
	}
	bound := func(key string) (int64, bool) {
		v, err := strconv.ParseInt(q.Get("created["+key+"]"), 10, 64)
		return v, err == nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if gte, ok := bound("gte"); ok && q.Get("starting_after") == "" {
		f.gte = append(f.gte, gte)
	}
	var newestFirst []stripeEvent
	for i := len(f.events) - 1; i >= 0; i-- {
		e := f.events[i]
		if v, ok := bound("gt"); ok && e.Created <= v {
			continue
		}
		if v, ok := bound("gte"); ok && e.Created < v {
			continue
		}
		if v, ok := bound("lt"); ok && e.Created >= v {
			continue
		}
		if v, ok := bound("lte"); ok && e.Created > v {
			continue
		}
		newestFirst = append(newestFirst, e)
	}
	from, to := 0, len(newestFirst)
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(newestFirst, func(e stripeEvent) bool { return e.ID == after })
		if i < 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "No such event: starting_after")
			return
		}
		from = i + 1
		f.lists.add("next")
	} else {
		f.lists.add("first")
	}
	if before := q.Get("ending_before"); before != "" {
		i := slices.IndexFunc(newestFirst, func(e stripeEvent) bool { return e.ID == before })
		if i < 0 {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "No such event: ending_before")
			return
		}
		to, from = i, max(0, i-limit)
	}
	end := min(to, from+limit)
	// Written by hand, not encoded, so that each element keeps its bytes.
	page := []byte("{\n  \"object\": \"list\",\n  \"data\": [\n")
	for i, e := range newestFirst[from:end] {
		if i > 0 {
			page = append(page, ",\n"...)
		}
		page = append(page, f.bodies[e.ID]...)
	}
	page = fmt.Appendf(page, "\n  ],\n  \"has_more\": %t,\n  \"url\": \"/v1/events\"\n}", end < to)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(page)
}

func (f *fakeStripe) retrieve(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r, false) {
		return
	}
	id := r.PathValue("id")
	f.retrieves.add(id)
	f.mu.Lock()
	body, ok := f.bodies[id]
	f.mu.Unlock()
	if !ok {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "No such event")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (f *fakeStripe) set(fn func(f *fakeStripe)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
