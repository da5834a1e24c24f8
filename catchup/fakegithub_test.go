package catchup_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// fakeGitHub serves the documented shape of GitHub's hook deliveries API
// for one repository hook (docs.github.com/rest/repos/webhooks, "List
// deliveries for a repository webhook" and "Redeliver a delivery for a
// repository webhook"): deliveries newest first, paged by a cursor in the
// Link header, and a redelivery that is a new delivery with the same guid,
// sent to the hook's URL signed with its secret.
type fakeGitHub struct {
	t    *testing.T
	srv  *httptest.Server
	hook string // the hook's URL: jethook's route
	base string // /repos/OWNER/REPO/hooks/ID

	mu         sync.Mutex
	deliveries []ghDelivery // oldest first
	payloads   map[string][]byte
	nextID     int64
	down       bool          // answer 503 to everything
	limitNext  int           // answer the next list requests with 429
	limited    int           // 429s answered
	hold       chan struct{} // when set, redeliveries wait for it to close
	asks       counter       // redelivery requests by guid
	wg         sync.WaitGroup
}

type ghDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      string    `json:"action"`
}

// newFakeGitHub starts the API; set hook before the first delivery.
func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, base: "/repos/acme/shop/hooks/42", payloads: map[string][]byte{}, nextID: 1000}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{repo}/hooks/{hook}/deliveries", f.list)
	mux.HandleFunc("POST /repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}/attempts", f.redeliver)
	mux.HandleFunc("GET /orgs/{org}/hooks/{hook}/deliveries", f.list)
	mux.HandleFunc("POST /orgs/{org}/hooks/{hook}/deliveries/{id}/attempts", f.redeliver)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.srv.Close()
		f.wg.Wait()
	})
	return f
}

// catchUp is the catch_up block of a route on this hook.
func (f *fakeGitHub) catchUp(interval string) string {
	return fmt.Sprintf("    catch_up:\n      github: {token: %s, hook: %s, api_url: '%s'}\n      interval: %s\n",
		ghToken, strings.TrimPrefix(f.base, "/"), f.srv.URL, interval)
}

// hookOf is the hook a request names: /repos/OWNER/REPO/hooks/ID or
// /orgs/ORG/hooks/ID.
func hookOf(r *http.Request) string {
	if org := r.PathValue("org"); org != "" {
		return "/orgs/" + org + "/hooks/" + r.PathValue("hook")
	}
	return "/repos/" + r.PathValue("owner") + "/" + r.PathValue("repo") + "/hooks/" + r.PathValue("hook")
}

// missed records a delivery GitHub tried while jethook could not take it.
func (f *fakeGitHub) missed(guid string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payloads[guid] = fmt.Appendf(nil, `{"action":"opened","guid":%q}`, guid)
	f.record(guid, code, false)
}

// send delivers guid to the hook now, as GitHub does, and records it.
func (f *fakeGitHub) send(guid string) int {
	f.mu.Lock()
	f.payloads[guid] = fmt.Appendf(nil, `{"action":"opened","guid":%q}`, guid)
	f.mu.Unlock()
	code := f.post(guid)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(guid, code, false)
	return code
}

func (f *fakeGitHub) record(guid string, code int, redelivery bool) {
	f.nextID++
	f.deliveries = append(f.deliveries, ghDelivery{ID: f.nextID, GUID: guid, DeliveredAt: time.Now().UTC().Truncate(time.Second),
		Redelivery: redelivery, Duration: 0.1, Status: http.StatusText(code), StatusCode: code, Event: "issues", Action: "opened"})
}

// post sends guid's payload to the hook, signed, and returns the status (0
// when the hook could not be reached).
func (f *fakeGitHub) post(guid string) int {
	f.mu.Lock()
	body := f.payloads[guid]
	f.mu.Unlock()
	h := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"issues"}, "X-Github-Delivery": {guid}}
	p, err := provider.New(provider.Config{Name: provider.NameGitHub, Secrets: []string{ghSecret}})
	if err != nil {
		f.t.Error(err)
		return 0
	}
	if err := p.Sign(&provider.Request{Method: http.MethodPost, Header: h, Body: body}, ghSecret, time.Now()); err != nil {
		f.t.Error(err)
		return 0
	}
	req, _ := http.NewRequest(http.MethodPost, f.hook, bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// authorized answers 401, 404, 503 or 429 as GitHub would, and reports
// whether the request may go on.
func (f *fakeGitHub) authorized(w http.ResponseWriter, r *http.Request, list bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+ghToken:
		ghError(w, http.StatusUnauthorized, "Bad credentials")
	case hookOf(r) != f.base:
		ghError(w, http.StatusNotFound, "Not Found")
	case f.down:
		ghError(w, http.StatusServiceUnavailable, "Service Unavailable")
	case list && f.limitNext > 0:
		f.limitNext--
		f.limited++
		w.Header().Set("Retry-After", "1")
		ghError(w, http.StatusTooManyRequests, "You have exceeded a secondary rate limit.")
	default:
		return true
	}
	return false
}

func ghError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r, true) {
		return
	}
	perPage, err := strconv.Atoi(r.URL.Query().Get("per_page"))
	if err != nil || perPage <= 0 || perPage > 100 {
		perPage = 30
	}
	from := 0 // position in newest-first order
	if c := r.URL.Query().Get("cursor"); c != "" {
		if from, err = strconv.Atoi(c); err != nil {
			ghError(w, http.StatusBadRequest, "bad cursor")
			return
		}
	}
	f.mu.Lock()
	var page []ghDelivery
	n := len(f.deliveries)
	for i := from; i < n && len(page) < perPage; i++ {
		page = append(page, f.deliveries[n-1-i])
	}
	more := from+len(page) < n
	f.mu.Unlock()
	if more {
		w.Header().Set("Link", fmt.Sprintf(`<%s%s/deliveries?per_page=%d&cursor=%d>; rel="next"`, f.srv.URL, f.base, perPage, from+len(page)))
	}
	w.Header().Set("Content-Type", "application/json")
	if page == nil {
		page = []ghDelivery{}
	}
	_ = json.NewEncoder(w).Encode(page)
}

func (f *fakeGitHub) redeliver(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r, false) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	guid := ""
	for _, d := range f.deliveries {
		if d.ID == id {
			guid = d.GUID
		}
	}
	hold := f.hold
	f.mu.Unlock()
	if guid == "" {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	f.asks.add(guid)
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte("{}"))
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if hold != nil {
			<-hold
		}
		code := f.post(guid)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.record(guid, code, true)
	}()
}

func (f *fakeGitHub) set(fn func(f *fakeGitHub)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
