package admin

import (
	"encoding/json"
	"net/http"
	"time"
)

// NDJSON is the media type of a search that streams its results: one JSON
// document a line.
const NDJSON = "application/x-ndjson"

// ProgressEvery is how often a streamed search reports how far it has
// read.
const ProgressEvery = 250 * time.Millisecond

// LineStream writes a response of JSON lines, each flushed as it is
// written. The 200 and its header go with the first line, so that what
// fails before any line can still answer an error status.
type LineStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

// NewLineStream streams JSON lines to w.
func NewLineStream(w http.ResponseWriter) *LineStream {
	return &LineStream{w: w, rc: http.NewResponseController(w)}
}

// Started reports whether a line, and with it the 200, was written.
func (s *LineStream) Started() bool { return s.started }

// Write sends v as one line; it reports false when the client is gone.
func (s *LineStream) Write(v any) bool {
	if !s.started {
		s.w.Header().Set("Content-Type", NDJSON)
		s.w.Header().Set("X-Content-Type-Options", "nosniff")
		s.w.Header().Set("Cache-Control", "no-store")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	b, _ := json.Marshal(v)
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}
