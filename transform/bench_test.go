package transform

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"
)

// BenchmarkRun measures one run per event on the Stripe invoice.paid body
// the filter benchmarks use (5.6 KB), against decoding that body with
// encoding/json, measured in the same run. Besides the wall time per run
// it reports cpu-ns/op, the process's CPU time per run (the watchdog's
// included), which other processes on the machine disturb less.
//
//	go test -run '^$' -bench Run -benchmem ./transform/
func BenchmarkRun(b *testing.B) {
	body, err := os.ReadFile("../filter/testdata/stripe-invoice-paid.json")
	if err != nil {
		b.Fatal(err)
	}
	header := http.Header{
		"Stripe-Signature": {"t=1764550802,v1=0123456789abcdef"}, "Content-Type": {"application/json; charset=utf-8"},
		"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}, "Accept": {"*/*; q=0.5, application/xml"},
		"X-Webhook-Id": {"evt_1"}, "X-Webhook-Attempt": {"1"}, "X-Forwarded-For": {"203.0.113.7"},
	}
	b.Run("baseline: json.Unmarshal of the Stripe body", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct{ name, src string }{
		{"two headers, body untouched", `addHandler('transform', (request, context) => {
  request.headers['x-event-type'] = context.event_type;
  request.headers['x-tenant'] = 'eu';
  return request;
});`},
		{"two headers from the body", `addHandler('transform', (request, context) => {
  request.headers['x-event-type'] = request.body.type;
  request.headers['x-customer'] = request.body.data.object.customer;
  return request;
});`},
		{"rename fields and add two headers (typical)", `addHandler('transform', (request, context) => {
  const invoice = request.body.data.object;
  request.body = {
    event: request.body.type,
    invoice_id: invoice.id,
    customer: invoice.customer,
    amount: invoice.amount_paid / 100,
    currency: invoice.currency,
  };
  request.headers['x-event-type'] = request.body.event;
  request.headers['x-tenant'] = 'eu';
  return request;
});`},
		{"drop a field, keep the rest", `addHandler('transform', (request, context) => {
  delete request.body.data.object.customer_email;
  return request;
});`},
	} {
		// A long timeout: a run the machine's other load delays must not
		// fail the benchmark.
		s, err := Compile("bench.js", bc.src, nil, Limits{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		// As forward delivers a stored webhook: the ingress found its body
		// to be JSON.
		req := &Request{Method: "POST", Path: "/billing", Header: header, Body: body, JSON: true}
		c := Context{Route: "stripe", Destination: "billing", EventID: "evt_1", Attempt: 1}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				if out, err := s.Run(req, c); err != nil || out == nil {
					b.Fatalf("Run = %v, %v", out, err)
				}
			}
		})
	}
}

// cpuPerOp starts counting CPU time; the function it returns reports it
// per operation.
func cpuPerOp(b *testing.B) func() {
	start := processCPU()
	return func() { b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op") }
}
