package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// digest is a SHA-256 in hex, as Sent.BodySHA256 holds one.
const digest = "1488e7537f89f29f9815984507e40e7a775cedbbacc21161142c9d8838aa2488"

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
		{"a failure parked until its next attempt", Attempt{Time: at, Route: "shop", Destination: "app",
			EventID: "evt_2", Attempt: 4, Status: 503, Outcome: "transient", Next: time.Minute, Parked: true}},
		{"quotes, backslashes and HTML characters", Attempt{Time: at, Route: "r", Destination: "d",
			EventID: `a"b\c<d>&e`, Attempt: 2, Status: 503, Error: `"quoted" \ <tag> & more`, Outcome: "transient"}},
		{"control characters, non-ASCII and invalid UTF-8", Attempt{Time: at, Route: "r", Destination: "d",
			EventID: "sha256:00", Attempt: 12, Error: "line\nbreak\ttab é \u2028 \xff", Outcome: "permanent"}},
		{"a request a transform made", Attempt{Time: at, Route: "r", Destination: "d", EventID: "evt_3", Attempt: 1,
			Status: 200, Outcome: "delivered", Sent: &Sent{Script: "sha256:0123456789abcdef", BodySHA256: "ab", BodySize: 42,
				Changed: []string{"body", "path"}, Headers: []string{"x-\"quoted\"", "x-event-type"}}}},
		{"a request with its body's SHA-256", Attempt{Time: at, Route: "r", Destination: "d", EventID: "evt_5", Attempt: 2,
			Status: 200, Outcome: "delivered", Sent: &Sent{Script: "sha256:0123456789abcdef", BodySHA256: digest, BodySize: 131,
				Changed: []string{"body"}, Headers: []string{"x-event-type", "x-tenant"}}}},
		{"a request a transform left as it was", Attempt{Time: at, Route: "r", Destination: "d", EventID: "evt_4",
			Outcome: "transient", Sent: &Sent{Script: "sha256:0123456789abcdef", BodySHA256: "cd"}}},
		{"zero values", Attempt{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			want, err := json.Marshal(attemptRecord{
				Time: a.Time.UTC(), Route: a.Route, Destination: a.Destination, EventID: a.EventID,
				Attempt: a.Attempt, Status: a.Status, Error: a.Error, LatencyNS: int64(a.Latency),
				Outcome: a.Outcome, NextNS: int64(a.Next), Parked: a.Parked, Sent: recordOf(a.Sent),
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

// What a transform sent reads back as it was, from records of today's
// form and from records written with Sent's own JSON before it.
func TestWhatATransformSentReadsBackFromARecordOfEitherForm(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		sent Sent
	}{
		{"a body's SHA-256", Sent{Script: "sha256:0123456789abcdef", BodySHA256: digest, BodySize: 131,
			Changed: []string{"path", "body"}, Headers: []string{"x-event-type", "x-tenant"}}},
		{"nothing changed", Sent{Script: "sha256:0123456789abcdef", BodySHA256: digest}},
		{"a digest in upper case is kept as it is", Sent{Script: "s", BodySHA256: strings.ToUpper(digest), BodySize: 1}},
		{"a value that is no SHA-256 is kept as it is", Sent{Script: "s", BodySHA256: "ab", BodySize: 2, Headers: []string{"x"}}},
		{"no digest", Sent{Script: "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := Attempt{Time: at, Route: "r", Destination: "d", EventID: "evt_1", Attempt: 1, Outcome: "delivered", Sent: &tc.sent}
			before, err := json.Marshal(struct {
				Time    time.Time `json:"time"`
				Route   string    `json:"route"`
				Dest    string    `json:"destination"`
				EventID string    `json:"event_id"`
				Attempt int       `json:"attempt"`
				Outcome string    `json:"outcome"`
				Sent    *Sent     `json:"sent"`
			}{a.Time, a.Route, a.Destination, a.EventID, a.Attempt, a.Outcome, a.Sent})
			if err != nil {
				t.Fatal(err)
			}
			for form, data := range map[string][]byte{"today's": a.appendJSON(nil), "before": before} {
				var r attemptRecord
				if err := json.Unmarshal(data, &r); err != nil {
					t.Fatalf("%s: %v", data, err)
				}
				if got := r.Sent.sent(); got == nil || !reflect.DeepEqual(*got, tc.sent) {
					t.Errorf("a record of %s form,\n %s\nreads back as %+v, want %+v", form, data, got, tc.sent)
				}
			}
		})
	}
}

// A record's sent in today's form is more than a quarter smaller than
// Sent's own JSON: the record is the index's largest entry per attempt.
func TestARecordKeepsWhatATransformSentInLessRoomThanSentsJSON(t *testing.T) {
	t.Parallel()
	s := &Sent{Script: "sha256:0123456789abcdef", BodySHA256: digest, BodySize: 1009,
		Changed: []string{"body"}, Headers: []string{"x-event-type", "x-tenant"}}
	full, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if short := s.appendJSON(nil); 4*len(short) > 3*len(full) {
		t.Errorf("recorded in %d bytes (%s), Sent's JSON takes %d", len(short), short, len(full))
	}
}

// The index reads every record's key fields by hand (attemptKey); it must
// read what encoding/json reads, and fall back to it for anything else.
func TestAnAttemptRecordsKeyIsReadAsEncodingJSONReadsIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 8, 0, 0, 123456789, time.UTC)
	records := [][]byte{
		Attempt{Time: at, Route: "shop", Destination: "app", EventID: "evt_1", Attempt: 1, Status: 200, Outcome: "delivered"}.appendJSON(nil),
		Attempt{Time: at, Route: "r", Destination: "d", EventID: `a"b\c<d>&e`, Outcome: "transient"}.appendJSON(nil),
		Attempt{Time: at, Route: "r", Destination: "d", EventID: "é \u2028", Outcome: "permanent"}.appendJSON(nil),
		[]byte(`{"event_id":"evt_2","route":"r","destination":"d","time":"2026-12-03T08:00:00Z"}`), // another order
		[]byte(`{"time":"yesterday","route":"r","destination":"d","event_id":"evt_3"}`),
		[]byte(`{"time":"2026-12-03T08:00:00Z","route":"r","destination":"d","event_id":""}`),
		[]byte(`{"time":"2026-12-03T08:00:00Z","route":"r","destination":"d","event_id":"evt_4`), // cut short
		[]byte(`not json`),
		nil,
	}
	for _, data := range records {
		var want attemptRecord
		wantOK := json.Unmarshal(data, &want) == nil && want.EventID != ""
		got, ok := attemptKey(data)
		if ok != wantOK || ok && (!got.Time.Equal(want.Time) || got.Route != want.Route || got.Destination != want.Destination || got.EventID != want.EventID) {
			t.Errorf("%s:\n read %+v, %v\n want %+v, %v", data, got, ok, want, wantOK)
		}
	}
}

// BenchmarkReadingAnAttemptRecordsKey times attemptKey against
// encoding/json reading the same record.
func BenchmarkReadingAnAttemptRecordsKey(b *testing.B) {
	data := Attempt{Time: time.Now(), Route: "github", Destination: "app", EventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Attempt: 1, Status: 200, Latency: 3 * time.Millisecond, Outcome: "delivered"}.appendJSON(nil)
	var byHand, reflection float64
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var r attemptRecord
			if json.Unmarshal(data, &r) != nil {
				b.Fatal("unreadable")
			}
		}
		reflection = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("attemptKey", func(b *testing.B) {
		for b.Loop() {
			if _, ok := attemptKey(data); !ok {
				b.Fatal("unreadable")
			}
		}
		byHand = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if reflection > 0 {
		b.Logf("attemptKey ÷ encoding/json: %.2f", byHand/reflection)
	}
}

// BenchmarkAppendingAnAttemptRecord times appendJSON on the record of a
// transformed attempt, and reports its length.
func BenchmarkAppendingAnAttemptRecord(b *testing.B) {
	a := Attempt{Time: time.Now(), Route: "bench", Destination: "backend", EventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Attempt: 1, Status: 200, Latency: 3 * time.Millisecond, Outcome: "delivered",
		Sent: &Sent{Script: "sha256:0123456789abcdef", BodySHA256: digest, BodySize: 1009,
			Changed: []string{"body"}, Headers: []string{"x-event-type", "x-tenant"}}}
	buf := a.appendJSON(nil)
	b.ReportAllocs()
	for b.Loop() {
		buf = a.appendJSON(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes/record")
}
