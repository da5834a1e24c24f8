package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// stripe is an event as Stripe posts it (trimmed).
var stripe = &Event{
	Route:  "stripe",
	Method: "POST",
	Header: map[string][]string{
		"Content-Type":     {"application/json; charset=utf-8"},
		"Stripe-Signature": {"t=1700000000,v1=abc"},
		"Accept":           {"*/*", "application/json"},
	},
	Body: []byte(`{"id":"evt_1","type":"invoice.paid","livemode":false,
		"data":{"object":{"object":"invoice","amount_paid":2500,"currency":"eur","lines":{"data":[{"price":{"id":"price_pro"}}]}}}}`),
}

// github is a push as GitHub posts it (trimmed).
var github = &Event{
	Route:  "github",
	Method: "POST",
	Header: map[string][]string{
		"X-Github-Event":    {"push"},
		"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
	},
	Body: []byte(`{"ref":"refs/heads/main","repository":{"full_name":"acme/api","private":true},"commits":[{"id":"1"},{"id":"2"}]}`),
}

func TestMatch(t *testing.T) {
	t.Parallel()
	notJSON := &Event{Route: "hmac", Method: "PUT", Header: map[string][]string{"X-Kind": {"a"}}, Body: []byte("kind=order&id=7")}
	tests := []struct {
		name string
		expr string
		ev   *Event
		want bool
		kind string // the run-time error's kind, if one is expected
	}{
		{"a prefix of the body's type matches", `body.type.startsWith("invoice.")`, stripe, true, ""},
		{"another prefix does not", `body.type.startsWith("customer.")`, stripe, false, ""},
		{"a nested number compares with an int", `body.data.object.amount_paid >= 1000`, stripe, true, ""},
		{"a nested number compares with a double", `body.data.object.amount_paid < 2500.5`, stripe, true, ""},
		{"a list inside the body can be searched", `body.data.object.lines.data.exists(l, l.price.id == "price_pro")`, stripe, true, ""},
		{"has tells a missing key without an error", `has(body.data.object.customer)`, stripe, false, ""},
		{"a header is read by its lower-case name", `headers["x-github-event"] in ["push", "pull_request"]`, github, true, ""},
		{"a header not in the list does not match", `headers["x-github-event"] in ["issues"]`, github, false, ""},
		{"several values of a header are joined", `headers["accept"] == "*/*, application/json"`, stripe, true, ""},
		{"a missing header can be tested with in", `"x-shopify-topic" in headers`, github, false, ""},
		{"a field of the body and a header combine", `headers["x-github-event"] == "push" && body.ref == "refs/heads/main" && body.repository.private`, github, true, ""},
		{"the strings extension is there", `body.repository.full_name.split("/")[0] == "acme"`, github, true, ""},
		{"regular expressions match", `body.ref.matches("^refs/heads/(main|release-.*)$")`, github, true, ""},
		{"the route is known", `route == "github"`, github, true, ""},
		{"the method is known", `method == "PUT"`, notJSON, true, ""},
		{"a body that is not JSON is null", `body == null`, notJSON, true, ""},
		{"the raw body is bytes", `string(raw).startsWith("kind=order")`, notJSON, true, ""},
		{"the raw body has a size", `size(raw) == 15`, notJSON, true, ""},
		{"a missing key is an error, not a match", `body.nope == 1`, stripe, false, "no such key"},
		{"a field of a null body is an error", `body.type == "x"`, notJSON, false, "no such key"},
		{"a missing header is an error", `headers["x-shopify-topic"] == "orders/create"`, github, false, "no such key"},
		{"a list index past the end is an error", `body.commits[5].id == "1"`, github, false, "index out of range"},
		{"a wrong type is an error", `body.ref > 1`, github, false, "no such overload"},
		{"a failed conversion is an error", `int(body.ref) == 1`, github, false, "conversion"},
		{"division by zero is an error", `1 / (size(body.commits) - 2) == 0`, github, false, "division by zero"},
		{"a dynamic result that is not a boolean is an error", `body.data.object.lines.data.exists(l, l.price.id)`, stripe, false, "no such overload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := Compile(tt.expr)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.expr, err)
			}
			got, err := f.Match(tt.ev)
			if got != tt.want {
				t.Errorf("Match = %v, want %v (err %v)", got, tt.want, err)
			}
			if IsJSON(tt.ev.Body) {
				// Known to be JSON at ingress, the body reads the same
				// without its check.
				known := *tt.ev
				known.JSON = true
				if again, err2 := f.Match(&known); again != got || (err2 == nil) != (err == nil) {
					t.Errorf("known JSON: Match = %v, %v; unknown: %v, %v", again, err2, got, err)
				}
			}
			var fe *Error
			switch {
			case tt.kind == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.kind != "" && !errors.As(err, &fe):
				t.Errorf("err = %v, want kind %q", err, tt.kind)
			case tt.kind != "" && fe.Kind != tt.kind:
				t.Errorf("kind = %q, want %q", fe.Kind, tt.kind)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, want string
	}{
		{"a syntax error gives its column", `body.type.startsWith("a"`, "line 1 column 25: Syntax error"},
		{"an unknown variable is named", `event.type == "x"`, "undeclared reference to 'event'"},
		{"a type mismatch is caught before any event", `headers["x"] + 1 == 2`, "no matching overload"},
		{"a number is not a filter", `1 + 1`, "must be a boolean expression, but gives int"},
		{"a bare body field is not known to be boolean", `body.livemode`, "must be a boolean expression, but gives dyn"},
		{"an empty filter is refused", `  `, "filter is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(tt.expr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile(%q) = %v, want an error containing %q", tt.expr, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestCostLimitStopsARunawayFilter(t *testing.T) {
	t.Parallel()
	ev := &Event{Body: []byte(strings.Repeat("a", 4<<20))}
	// Lower-casing and searching 4 MiB costs about 5 million units.
	f, err := Compile(`string(raw).lowerAscii().contains("b")`)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.Match(ev)
	var fe *Error
	if ok || !errors.As(err, &fe) || fe.Kind != "cost limit" {
		t.Fatalf("Match = %v, %v; want no match with a cost limit error", ok, err)
	}
}

func TestALargeBodyFitsTheCostLimit(t *testing.T) {
	t.Parallel()
	body := `{"type":"invoice.paid","pad":"` + strings.Repeat("x", 5<<20) + `"}`
	ev := &Event{Body: []byte(body)}
	for _, expr := range []string{`body.type == "invoice.paid"`, `string(raw).contains("invoice.paid")`, `body.pad.endsWith("x")`} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := f.Match(ev); !ok || err != nil {
			t.Errorf("%s on a 5 MiB body = %v, %v; want a match", expr, ok, err)
		}
	}
}

func TestErrorKindsNeverQuoteThePayload(t *testing.T) {
	t.Parallel()
	ev := &Event{Header: map[string][]string{"X-Key": {"secret-token"}}, Body: []byte(`{"n":"secret-value"}`)}
	for _, expr := range []string{`body[headers["x-key"]] == 1`, `int(body.n) == 1`, `body[body.n] == 1`} {
		f, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Match(ev)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: err = %v; want an error without the payload", expr, err)
		}
		var fe *Error
		if errors.As(err, &fe) && !slices.Contains(Kinds, fe.Kind) {
			t.Errorf("%s: kind %q is not one of Kinds", expr, fe.Kind)
		}
	}
}

func TestReadsNamesTheVariablesAnExpressionUses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`headers["x-github-event"] == "push"`, []string{"headers"}},
		{`body.order == 7 && method == "POST"`, []string{"body", "method"}},
		{`string(raw).contains("1004") || route == "shop"`, []string{"raw", "route"}},
		{`size("x") == 1`, nil},
		// A loop variable named like one counts: reading more than needed
		// is safe, less is not.
		{`[1, 2].exists(body, body == 2)`, []string{"body"}},
	} {
		f, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range []string{"headers", "body", "raw", "route", "method"} {
			if f.Reads(v) {
				got = append(got, v)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s reads %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestIsJSONIsWhatBodyReadsAsJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		body string
		want bool
	}{
		{"an object", `{"id":"evt_1","n":[1,2,{"a":null}]}`, true},
		{"a string", `"text"`, true},
		{"a form", "kind=order&id=7", false},
		{"a truncated object", `{"id":"evt_1"`, false},
		{"empty", "", false},
		{"nested past the depth limit", strings.Repeat("[", 200) + strings.Repeat("]", 200), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsJSON([]byte(tt.body)); got != tt.want {
				t.Errorf("IsJSON(%.40q) = %v, want %v", tt.body, got, tt.want)
			}
		})
	}
}
