// Package dashboard is jethook's web dashboard, served by the admin
// listener at /: each destination's health with charts of the last hour,
// events and their attempts, dead letters to inspect, replay and purge, and
// pause and resume. Pages are server-rendered html/template with a little
// JavaScript from an embedded file; it calls the admin API's Service, so it
// shows and does exactly what the API does.
package dashboard

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler serves the dashboard. Set the fields, then serve it; the zero
// value of the optional fields works.
type Handler struct {
	// Service answers the pages' questions and does their actions: the
	// one the admin API serves, so that its bounds (how many searches run
	// at once) hold for both. Required.
	Service *admin.Service
	// Metrics gives each destination's attempts per minute for the charts;
	// nil draws them empty.
	Metrics *metrics.Metrics
	// Token is the admin token: what an operator logs in with, and the key
	// sessions are signed with. Empty, every page but the static files
	// answers 403 and says how to set it.
	Token string
	// Logger gets logins and operator actions; never a token or a payload.
	Logger *slog.Logger
	// Now is the clock for sessions, ages and charts; nil is time.Now.
	Now func() time.Time
	// Throttle bounds the wrong bearer tokens the pages check; nil makes
	// one. Serve shares the admin API's. The login form has its own, so
	// that guessing at one door does not close the other.
	Throttle *admin.Throttle

	once   sync.Once
	logins *admin.Throttle // wrong tokens the login form checks
	pages  map[string]*template.Template
	mux    http.Handler
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(h.setup)
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) setup() {
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	if h.Now == nil {
		h.Now = time.Now
	}
	h.logins = &admin.Throttle{Now: h.Now}
	if h.Throttle == nil {
		h.Throttle = &admin.Throttle{Now: h.Now}
	}
	h.pages = parsePages()
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", staticFiles(http.FileServerFS(static))))
	m.HandleFunc("GET /login", h.loginPage)
	m.HandleFunc("POST /login", h.login)
	page := func(pattern string, fn http.HandlerFunc) { m.Handle(pattern, h.auth(fn)) }
	page("POST /logout", h.logout)
	page("GET /{$}", h.overview)
	page("POST /destinations/{route}/{destination}/{act}", h.hold)
	page("GET /events", h.events)
	page("GET /events/{id}", h.event)
	page("POST /events/{id}/resend", h.resend)
	page("GET /deadletters", h.deadLetters)
	page("GET /deadletters/{seq}", h.deadLetter)
	page("POST /deadletters/replay", h.replay)
	page("POST /deadletters/purge", h.purge)
	page("/", h.notFound)
	// Browsers say where a request comes from (Sec-Fetch-Site, Origin): a
	// cross-origin POST is refused before the CSRF token is even read.
	h.mux = secure(http.NewCrossOriginProtection().Handler(m))
}

// csp lets the pages load scripts, styles and requests from the dashboard
// itself only: no inline script or style, no frames, no other origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the headers every answer carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// staticFiles lets browsers keep the script and stylesheet but check back.
func staticFiles(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusNotFound, "No page at "+r.URL.Path+".")
}

// failure answers err from the admin methods with its status and sentence.
func (h *Handler) failure(w http.ResponseWriter, r *http.Request, err error) {
	var re *admin.RequestError
	switch {
	case errors.As(err, &re):
		h.fail(w, r, http.StatusBadRequest, re.Reason)
	case errors.Is(err, store.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, "Not found: it never came in, or is older than the retention, or was purged.")
	case errors.Is(err, store.ErrUnavailable):
		h.fail(w, r, http.StatusServiceUnavailable, "The store is unavailable: "+err.Error())
	case errors.Is(err, forward.ErrUnknownDestination):
		h.fail(w, r, http.StatusNotFound, err.Error())
	default:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	}
}

// fail renders the error page, or JSON to the dashboard's own script.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		writeJSON(w, status, map[string]string{"error": http.StatusText(status), "message": msg})
		return
	}
	h.render(w, r, status, "error", "Error", map[string]any{"Status": status, "StatusText": http.StatusText(status), "Message": msg})
}
