package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jethook/jethook/admin"
)

// page is what every template gets: the layout's needs and the page's own
// data in Data.
type page struct {
	Title string
	Name  string // the template, which the navigation marks as current
	CSRF  string // empty when the request came with a bearer token
	Now   time.Time
	Data  any
}

var funcs = template.FuncMap{
	"when":       when,
	"ago":        ago,
	"dur":        duration,
	"bytes":      size,
	"bytes64":    size64,
	"pathEscape": url.PathEscape,
	"join":       strings.Join,
	"query":      func(kv ...string) template.URL { return template.URL(query(kv...)) },
	"selectionFields": func(s admin.Selection) map[string]string {
		out := map[string]string{}
		for k, v := range s.Values() {
			out[k] = v[0]
		}
		return out
	},
}

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	names, err := templateFS.ReadDir("templates")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(n.Name(), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n.Name()))
	}
	return out
}

// render writes the page name with data. The page is rendered to a buffer
// first, so a template error answers 500 instead of half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	var buf bytes.Buffer
	p := page{Title: title, Name: name, CSRF: h.csrf(h.session(r)), Now: h.Now(), Data: data}
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.Logger.Error("dashboard page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// wantsJSON is true for the dashboard script's own requests.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// when is a time in UTC to the second, or "—" when zero.
func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "—"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil {
			return "—"
		}
		return when(*v)
	}
	return "—"
}

// ago is how long before now t was, in the largest two units.
func ago(now time.Time, t any) string {
	var v time.Time
	switch x := t.(type) {
	case time.Time:
		v = x
	case *time.Time:
		if x != nil {
			v = *x
		}
	}
	if v.IsZero() {
		return "never"
	}
	d := now.Sub(v)
	switch {
	case d < -time.Second:
		return "in " + duration(-d)
	case d < time.Second:
		return "just now"
	}
	return duration(d) + " ago"
}

// duration says d briefly: 850ms, 12s, 3m20s, 4h05m, 2d03h.
func duration(d any) string {
	var v time.Duration
	switch x := d.(type) {
	case time.Duration:
		v = x
	case float64:
		v = time.Duration(x * float64(time.Second))
	}
	switch {
	case v < time.Second:
		return fmt.Sprintf("%dms", v.Milliseconds())
	case v < time.Minute:
		return fmt.Sprintf("%ds", int(v.Seconds()))
	case v < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(v.Minutes()), int(v.Seconds())%60)
	case v < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(v.Hours()), int(v.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(v.Hours())/24, int(v.Hours())%24)
}

// size says n bytes briefly.
func size(n int) string { return size64(int64(n)) }

func size64(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// query builds "?k=v&..." from pairs, leaving out empty values.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
