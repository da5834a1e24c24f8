package filter

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jethook/jethook/internal/testkit"
)

// BenchmarkMatch measures one filter evaluation per event on realistic
// payloads, against two baselines measured in the same run: parsing the
// body as JSON (which every filter that reads `body` does), and the HTTP
// POST of the event to a backend on loopback (what each delivery costs at
// least). An event for a destination without a filter costs one nil check.
// Besides the wall time per evaluation it reports cpu-ns/op, the process's
// CPU time per evaluation (the backend's included for the POST), which
// other processes on the machine disturb less.
//
//	go test -run '^$' -bench Match -benchmem ./filter/
func BenchmarkMatch(b *testing.B) {
	push := benchEvent(b, "testdata/github-push.json", map[string][]string{
		"X-Github-Event": {"push"}, "X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"X-Hub-Signature-256": {"sha256=0123456789abcdef"}, "Content-Type": {"application/json"},
		"User-Agent": {"GitHub-Hookshot/abc123"}, "Accept": {"*/*"},
	})
	invoice := benchEvent(b, "testdata/stripe-invoice-paid.json", map[string][]string{
		"Stripe-Signature": {"t=1764550802,v1=0123456789abcdef"}, "Content-Type": {"application/json; charset=utf-8"},
		"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}, "Accept": {"*/*; q=0.5, application/xml"},
	})

	b.Run("baseline: json.Unmarshal of the Stripe body", func(b *testing.B) {
		b.ReportAllocs()
		defer testkit.CPUPerOp(b)()
		for b.Loop() {
			var v any
			if err := json.Unmarshal(invoice.Body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline: HTTP POST of the Stripe event to a loopback backend", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
		defer srv.Close()
		b.ReportAllocs()
		defer testkit.CPUPerOp(b)()
		for b.Loop() {
			resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(invoice.Body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	// A search's event: 1 KiB of JSON, as `jethook bench -scenario
	// search` stores them.
	search := &Event{Route: "bench", Method: "POST", Header: map[string][]string{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":"evt_000042","type":"order.updated","pad":"` + strings.Repeat("x", 1024-60) + `"}`)}
	// The same events as the ingress stores them: known to be JSON.
	knownJSON, invoiceJSON := *search, *invoice
	knownJSON.JSON, invoiceJSON.JSON = true, true
	for _, bc := range []struct {
		name, expr string
		ev         *Event
		want       bool
	}{
		{"search: 1 KiB body field, no match", `body.id == "evt_none"`, search, false},
		{"search: 1 KiB body field, no match, known JSON", `body.id == "evt_none"`, &knownJSON, false},
		{"GitHub header in a list", `headers["x-github-event"] in ["push", "pull_request"]`, push, true},
		{"Stripe body type prefix", `body.type.startsWith("invoice.")`, invoice, true},
		{"Stripe body type prefix, known JSON", `body.type.startsWith("invoice.")`, &invoiceJSON, true},
		{"Stripe nested amount and currency", `body.data.object.amount_paid >= 1000 && body.data.object.currency == "eur"`, invoice, true},
		{"GitHub header and body branch", `headers["x-github-event"] == "push" && body.ref == "refs/heads/main"`, push, true},
		{"GitHub raw body search", `string(raw).contains("forward/forward.go")`, push, true},
	} {
		f, err := Compile(bc.expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer testkit.CPUPerOp(b)()
			for b.Loop() {
				if ok, err := f.Match(bc.ev); ok != bc.want || err != nil {
					b.Fatalf("Match = %v, %v", ok, err)
				}
			}
		})
	}
	// What a search asks first: whether the body lacks the string the
	// expression needs (it does: Match is not called).
	f, err := Compile(`body.id == "evt_none"`)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("search: 1 KiB body field, no match, excluded by its string", func(b *testing.B) {
		b.ReportAllocs()
		defer testkit.CPUPerOp(b)()
		for b.Loop() {
			if !f.Excludes(search.Body) {
				b.Fatal("not excluded")
			}
		}
	})
}

func benchEvent(b *testing.B, file string, header map[string][]string) *Event {
	body, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	return &Event{Route: "bench", Method: "POST", Header: header, Body: body}
}
