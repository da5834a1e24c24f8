package store

import (
	"encoding/json"
	"testing"
	"time"
)

func TestAnAttemptIsEncodedAsEncodingJSONWouldEncodeIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 8, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		a    Attempt
	}{
		{"a first attempt delivered", Attempt{Time: at, Route: "shop", Destination: "app", EventID: "evt_1",
			Attempt: 1, Status: 200, Latency: 3 * time.Millisecond, Outcome: "delivered"}},
		{"a failure with an error and a next delay", Attempt{Time: at, Route: "shop", Destination: "app",
			EventID: "evt.*.>1", Attempt: 3, Error: "dial tcp 127.0.0.1:1: connect: connection refused",
			Latency: 40, Outcome: "transient", Next: 2 * time.Second}},
		{"quotes, backslashes and HTML characters", Attempt{Time: at, Route: "r", Destination: "d",
			EventID: `a"b\c<d>&e`, Attempt: 2, Status: 503, Error: `"quoted" \ <tag> & more`, Outcome: "transient"}},
		{"control characters, non-ASCII and invalid UTF-8", Attempt{Time: at, Route: "r", Destination: "d",
			EventID: "sha256:00", Attempt: 12, Error: "line\nbreak\ttab é \u2028 \xff", Outcome: "permanent"}},
		{"zero values", Attempt{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			want, err := json.Marshal(attemptRecord{
				Time: a.Time.UTC(), Route: a.Route, Destination: a.Destination, EventID: a.EventID,
				Attempt: a.Attempt, Status: a.Status, Error: a.Error, LatencyNS: int64(a.Latency),
				Outcome: a.Outcome, NextNS: int64(a.Next),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := a.appendJSON(nil); string(got) != string(want) {
				t.Errorf("encoded\n %s\nencoding/json writes\n %s", got, want)
			}
		})
	}
}
