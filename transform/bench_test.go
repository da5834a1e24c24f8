package transform

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
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
		defer testkit.CPUPerOp(b)()
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
		{typical, `addHandler('transform', (request, context) => {
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
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				if out, err := s.Run(req, c); err != nil || out == nil {
					b.Fatalf("Run = %v, %v", out, err)
				}
			}
		})
		if bc.name != typical {
			continue
		}
		// As the forwarder runs it: handed to a worker goroutine, which
		// grew its stack when it began and waits for the next run.
		b.Run(bc.name+", each handed to a worker", func(b *testing.B) {
			b.ReportAllocs()
			defer testkit.CPUPerOp(b)()
			runs, errs := make(chan struct{}), make(chan error)
			go func() {
				GrowStack()
				for range runs {
					_, err := s.Run(req, c)
					errs <- err
				}
			}()
			defer close(runs)
			for b.Loop() {
				runs <- struct{}{}
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
		})
		// What the hand-off to a worker costs without a script: the same
		// loop of arithmetic, about as long as the typical run, called and
		// handed to a worker. On an otherwise idle machine each hand-off
		// wakes another thread, which then sleeps again, and that costs
		// CPU time of its own.
		for _, handed := range []bool{false, true} {
			name := "arithmetic as long as the typical run"
			if handed {
				name += ", each handed to a worker"
			}
			b.Run(name, func(b *testing.B) {
				defer testkit.CPUPerOp(b)()
				runs, done := make(chan struct{}), make(chan struct{})
				go func() {
					for range runs {
						arithmetic()
						done <- struct{}{}
					}
				}()
				defer close(runs)
				for b.Loop() {
					if !handed {
						arithmetic()
						continue
					}
					runs <- struct{}{}
					<-done
				}
			})
		}
	}
}

// arithmetic takes about as long as the typical run (15 µs on the
// 2-core machine of docs/transformations.md), allocating nothing.
//
//go:noinline
func arithmetic() {
	x := uint64(1)
	for range 14_000 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	arithmeticSink = x
}

var arithmeticSink uint64

// typical is the name of BenchmarkRun's typical script.
const typical = "rename fields and add two headers (typical)"

// BenchmarkStop measures how long a run that goes past a limit takes to
// be stopped, under the default limits: by the wall clock (ns/op) and in
// the process's CPU time (cpu-ns/op), its first attempt and the watchdog
// included.
//
//	go test -run '^$' -bench Stop -benchtime 5x ./transform/
func BenchmarkStop(b *testing.B) {
	for _, bc := range []struct {
		name, body string
		kinds      []string // what may stop it
	}{
		{"an endless loop", "for (;;) {}", []string{KindTimeout}},
		// Fresh memory costs its page faults: the time limit may come first.
		{"1 GiB in strings of 16 MiB", "const a = []; for (let i = 0; i < 64; i++) a.push('x'.repeat(1 << 24) + i);", []string{KindMemory, KindTimeout}},
		{"a regular expression that backtracks, in exec", "/^(a|aa)+\\1$/.exec('a'.repeat(50) + 'b');", []string{KindTimeout}},
	} {
		s, err := Compile("stop.js", "addHandler('transform', (request, context) => {\n"+bc.body+"\nreturn request;\n});", nil, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		req := &Request{Method: "POST", Path: "/hook", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`)}
		b.Run(bc.name, func(b *testing.B) {
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				var e *Error
				if _, err := s.Run(req, Context{}); !errors.As(err, &e) || !slices.Contains(bc.kinds, e.Kind) {
					b.Fatalf("Run = %v, want a transform error of a kind in %q", err, bc.kinds)
				}
			}
		})
	}
}
