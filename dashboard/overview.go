package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/jethook/jethook/admin"
)

// destinationRow is one route × destination on the overview.
type destinationRow struct {
	admin.DestinationStatus
	States  []state
	Backlog uint64
	Chart   chart
}

// blockedRow is one blocked ordering key on the overview.
type blockedRow struct {
	Route, Destination string
	admin.BlockedKey
}

// state is one badge: what a destination is doing, and how worried to be.
type state struct {
	Text  string
	Class string // ok, info, warn or bad
}

// states describes s as badges, the most pressing first.
func states(s admin.DestinationStatus) []state {
	var out []state
	if s.Error != "" {
		out = append(out, state{"store: " + s.Error, "bad"})
	}
	if s.Paused {
		out = append(out, state{"paused by an operator", "warn"})
	}
	switch s.Breaker {
	case "open":
		text := "breaker open"
		if s.BreakerOpenUntil != nil {
			text += " until " + s.BreakerOpenUntil.UTC().Format("15:04:05Z")
		}
		out = append(out, state{text, "bad"})
	case "half-open":
		out = append(out, state{"breaker half-open: probing", "warn"})
	}
	if s.RetryAfterUntil != nil {
		out = append(out, state{"Retry-After pause until " + s.RetryAfterUntil.UTC().Format("15:04:05Z"), "warn"})
	}
	if s.BlockedKeys > 0 {
		text := fmt.Sprintf("%d ordering keys blocked", s.BlockedKeys)
		if s.BlockedKeys == 1 {
			text = "1 ordering key blocked"
		}
		out = append(out, state{text, "warn"})
	}
	if s.SlowStart {
		out = append(out, state{"slow start: ramping up", "info"})
	}
	switch {
	case s.Pull:
		// A pull destination has no gate but the pause: its clients
		// fetch its webhooks (docs/pull.md).
		out = append(out, state{fmt.Sprintf("pull: %d leased", s.Leased), "info"})
	case s.DeliveredBy == "another replica":
		// One replica at a time delivers an ordered destination
		// (docs/ordering.md).
		out = append(out, state{"delivered by another replica", "info"})
	case len(out) == 0:
		out = append(out, state{"delivering", "ok"})
	}
	if s.LimitPerSecond > 0 {
		// The learned limit (docs/protection.md): what the backend
		// delivered before its last sign of overload.
		out = append(out, state{fmt.Sprintf("adaptive limit %.1f/s", s.LimitPerSecond), "info"})
	}
	return out
}

// refresh is how often the overview reloads itself while it is visible.
const refresh = 5 * time.Second

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	st, err := h.Service.Status(r.Context())
	if err != nil {
		h.failure(w, r, err)
		return
	}
	now := h.Now()
	rows := make([]destinationRow, 0, len(st.Destinations))
	var totals struct{ Backlog, InBackoff, DeadLetters uint64 }
	var blocked []blockedRow
	for _, s := range st.Destinations {
		for _, k := range s.OldestBlockedKeys {
			blocked = append(blocked, blockedRow{s.Route, s.Destination, k})
		}
		row := destinationRow{DestinationStatus: s, States: states(s),
			Backlog: s.Pending + uint64(s.InFlight) + uint64(s.Leased) + uint64(s.InBackoff),
			Chart:   newChart(h.Metrics.LastHour(s.Route, s.Destination, now))}
		totals.Backlog += row.Backlog
		totals.InBackoff += uint64(s.InBackoff)
		totals.DeadLetters += s.DeadLetters
		rows = append(rows, row)
	}
	h.render(w, r, http.StatusOK, "overview", "Overview", map[string]any{
		"Rows": rows, "Totals": totals, "Blocked": blocked, "RefreshMillis": refresh.Milliseconds(), "Refresh": refresh})
}

// hold pauses or resumes a destination, then goes back to the overview.
func (h *Handler) hold(w http.ResponseWriter, r *http.Request) {
	route, dest, act := r.PathValue("route"), r.PathValue("destination"), r.PathValue("act")
	if act != "pause" && act != "resume" {
		h.notFound(w, r)
		return
	}
	if err := h.Service.Hold(route, dest, act == "pause"); err != nil {
		h.failure(w, r, err)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
