package forward

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/transform"
)

// BenchmarkTransformed times what a transform adds to an attempt on the
// forwarder's side, the script's run included: the run, the request made
// of its result, and the attempt log's summary of it (sent), on the body
// and script of jethook bench -scenario transform. The sent rows time the
// summary alone.
//
//	go test -run '^$' -bench Transformed -benchmem ./forward/
func BenchmarkTransformed(b *testing.B) {
	const script = `addHandler('transform', (request, context) => {
  const { id, type, pad } = request.body;
  request.body = { event_id: id, event_type: type, data: pad };
  request.headers['x-event-type'] = type;
  request.headers['x-tenant'] = 'bench';
  return request;
});
`
	body := []byte(`{"id":"evt_12345","type":"bench.event","pad":"` + string(bytes.Repeat([]byte{'x'}, 976)) + `"}`)
	e := &store.Envelope{Route: "bench", EventID: "evt_12345", RequestURI: "/hooks/bench", RemoteAddr: "127.0.0.1:40000",
		Header: http.Header{"Content-Type": {"application/json"}, "User-Agent": {"Go-http-client/1.1"}, "Content-Length": {"1024"}},
		Body:   body, JSON: true}
	r := policy.Route{Name: "bench", MaxBody: 1 << 20}
	dest := policy.Destination{Name: "backend", URL: "http://127.0.0.1:8080/hook", Concurrency: 1,
		Transform: &policy.Transform{Name: "bench.js", Script: script}}
	dt, err := newTransform(r, dest)
	if err != nil {
		b.Fatal(err)
	}
	u, err := parseDest(dest.URL)
	if err != nil {
		b.Fatal(err)
	}
	d := &destination{f: &Forwarder{Now: time.Now}, route: r, dest: dest, transform: dt}
	b.Run("request, run and sent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req, err := newRequestTo(context.Background(), u, e, 1)
			if err != nil {
				b.Fatal(err)
			}
			if _, o, ok := d.transformed(req, e, 1, nil); !ok || o.Sent == nil {
				b.Fatalf("transformed: %+v", o)
			}
		}
	})
	req, err := newRequestTo(context.Background(), u, e, 1)
	if err != nil {
		b.Fatal(err)
	}
	in := transformInput(req, e)
	out, err := dt.s.Run(in, transform.Context{Route: r.Name, Destination: dest.Name, EventID: e.EventID, Attempt: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("sent, the body changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dt.sent(in, out)
		}
	})
	same := *out
	same.Body = in.Body
	b.Run("sent, the body as it came", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dt.sent(in, &same)
		}
	})
}
