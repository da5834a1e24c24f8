package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jethook/jethook/admin"
)

// A browser logs in with the admin token once and then carries a session
// cookie: "<expiry>.<nonce>.<mac>", the mac an HMAC-SHA256 keyed with the
// token. The cookie never holds the token, the server keeps no session
// state (nothing grows with logins), and changing the token ends every
// session. Each state change also carries a CSRF token, an HMAC of the
// session, in a form field or the X-CSRF-Token header.
const (
	sessionCookie = "jethook_session"
	sessionTTL    = 12 * time.Hour
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
	// maxForm bounds a form's body: a thousand sequence numbers fit.
	maxForm = 64 << 10
)

func (h *Handler) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, []byte(h.Token))
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// newSession returns a cookie value valid until expires.
func (h *Handler) newSession(expires time.Time) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	exp := strconv.FormatInt(expires.Unix(), 10)
	n := base64.RawURLEncoding.EncodeToString(nonce)
	return exp + "." + n + "." + base64.RawURLEncoding.EncodeToString(h.mac("session", exp, n))
}

// validSession reports whether v is a session this token signed that has
// not expired.
func (h *Handler) validSession(v string) bool {
	exp, rest, ok := strings.Cut(v, ".")
	nonce, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, h.mac("session", exp, nonce)) {
		return false
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	return err == nil && h.Now().Before(time.Unix(t, 0))
}

// session returns the request's valid session cookie value, or "".
func (h *Handler) session(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || !h.validSession(c.Value) {
		return ""
	}
	return c.Value
}

// csrf is the CSRF token of a session.
func (h *Handler) csrf(session string) string {
	if session == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(h.mac("csrf", session))
}

// bearer reports whether r carries the admin token as a bearer token:
// nil if it does, ErrWrongToken if it carries another or none, and
// ErrTooManyWrongTokens if h.Throttle did not check it.
func (h *Handler) bearer(r *http.Request) error {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return admin.ErrWrongToken
	}
	err := h.Throttle.Check(strings.TrimSpace(got), h.Token)
	if errors.Is(err, admin.ErrWrongToken) {
		h.Logger.Warn("dashboard: wrong bearer token", "remote", r.RemoteAddr)
	}
	return err
}

// auth lets through requests with the bearer token, and browsers with a
// valid session; those must also send the session's CSRF token with every
// method but GET and HEAD. A browser without a session is sent to the login
// page.
func (h *Handler) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.Token == "" {
			h.fail(w, r, http.StatusForbidden, "The dashboard needs an admin token: start jethook with JETHOOK_ADMIN_TOKEN set.")
			return
		}
		switch err := h.bearer(r); {
		case err == nil:
			next.ServeHTTP(w, r)
			return
		case errors.Is(err, admin.ErrTooManyWrongTokens):
			w.Header().Set("Retry-After", "60")
			h.fail(w, r, http.StatusTooManyRequests, "Too many wrong bearer tokens: try again in a minute.")
			return
		}
		s := h.session(r)
		if s == "" {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.fail(w, r, http.StatusUnauthorized, "Your session has ended: log in again.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			got := r.Header.Get(csrfHeader)
			if got == "" {
				got = r.PostFormValue(csrfField)
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(h.csrf(s))) != 1 {
				h.fail(w, r, http.StatusForbidden, "This form is stale or did not come from the dashboard (CSRF token missing or wrong): reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// localPath is next if it is a path on this site, else "/": the login form
// and a replay must not send a browser elsewhere. Browsers drop tabs and
// newlines from a URL and read a backslash as a slash, so "/\t/evil" or
// "/\\evil" would become "//evil", another host: a control character or a
// backslash anywhere is refused, and what is left must parse as a path
// with no scheme and no host.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if h.Token == "" {
		h.fail(w, r, http.StatusForbidden, "The dashboard needs an admin token: start jethook with JETHOOK_ADMIN_TOKEN set.")
		return
	}
	h.render(w, r, http.StatusOK, "login", "Log in", map[string]any{"Next": localPath(r.URL.Query().Get("next"))})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.Token == "" {
		h.fail(w, r, http.StatusForbidden, "The dashboard needs an admin token: start jethook with JETHOOK_ADMIN_TOKEN set.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	next := localPath(r.PostFormValue("next"))
	// Wrong tokens are bounded (admin.Throttle), apart from the bearer
	// tokens': guessing at one door does not close the other.
	switch err := h.logins.Check(strings.TrimSpace(r.PostFormValue("token")), h.Token); {
	case errors.Is(err, admin.ErrTooManyWrongTokens):
		w.Header().Set("Retry-After", "60")
		h.fail(w, r, http.StatusTooManyRequests, "Too many failed logins: try again in a minute.")
		return
	case err != nil:
		h.Logger.Warn("dashboard login failed", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", "Log in", map[string]any{"Next": next, "Wrong": true})
		return
	}
	expires := h.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: h.newSession(expires), Path: "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	h.Logger.Info("dashboard login", "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
