package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/transform"
)

// PreviewRequest is the body of POST /v1/events/{id}/preview: which
// destination of the event's route, and optionally a script to run
// instead of the one that destination runs now (to try a change on a
// stored event before a reload).
type PreviewRequest struct {
	Destination string `json:"destination"`
	// Route picks the event when the same id came in on several routes.
	Route string `json:"route,omitempty"`
	// Script, when set, is the transform to run, named Name in errors,
	// with Env as process.env and Timeout (a duration, "50ms") as its time
	// limit; the destination's memory and body limits apply.
	Script  string            `json:"script,omitempty"`
	Name    string            `json:"name,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout string            `json:"timeout,omitempty"`
}

func (h *Handler) preview(w http.ResponseWriter, r *http.Request) {
	var req PreviewRequest
	if err := readJSON(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	p, err := h.Service.Preview(r.Context(), r.PathValue("id"), req)
	if errors.Is(err, forward.ErrUnknownDestination) {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// Preview makes the request a destination would get for a stored event on
// its first attempt, its transform (or req.Script) applied. Nothing is
// sent or stored.
func (svc *Service) Preview(ctx context.Context, id string, req PreviewRequest) (forward.Preview, error) {
	svc.setup()
	if req.Destination == "" {
		return forward.Preview{}, badRequest("destination: name the destination whose request to show")
	}
	e, _, err := svc.Store.Event(ctx, id, req.Route)
	if err != nil {
		return forward.Preview{}, err
	}
	var t *policy.Transform
	if req.Script != "" {
		t = &policy.Transform{Script: req.Script, Name: req.Name, Env: req.Env, Timeout: transform.DefaultTimeout, Memory: transform.DefaultMemory}
		if t.Name == "" {
			t.Name = "script.js"
		}
		if req.Timeout != "" {
			d, err := time.ParseDuration(req.Timeout)
			if err != nil || d <= 0 {
				return forward.Preview{}, badRequest("timeout: want a duration such as 50ms")
			}
			t.Timeout = d
		}
	}
	p, err := svc.Forwarder.Preview(e.Route, req.Destination, e, t)
	if err != nil && t != nil && !errors.Is(err, forward.ErrUnknownDestination) {
		return p, badRequest("%v", err)
	}
	return p, err
}
