package transform

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/provider"
)

// example is one testdata/examples/NAME.json: a request, the context, and
// what NAME.js must make of them.
type example struct {
	Env     map[string]string `json:"env"`
	Context struct {
		Route       string    `json:"route"`
		Destination string    `json:"destination"`
		Attempt     int       `json:"attempt"`
		Now         time.Time `json:"now"`
	} `json:"context"`
	In      exampleRequest  `json:"in"`
	Out     *exampleRequest `json:"out"`
	Dropped bool            `json:"dropped"`
	Error   string          `json:"error"`
}

type exampleRequest struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Headers http.Header `json:"headers"`
	Body    string      `json:"body"`
}

func TestTheExamplesGiveTheirExpectedRequests(t *testing.T) {
	scripts, err := filepath.Glob("testdata/examples/*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, file := range scripts {
		name := strings.TrimSuffix(filepath.Base(file), ".js")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(strings.TrimSuffix(file, ".js") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var ex example
			if err := json.Unmarshal(raw, &ex); err != nil {
				t.Fatal(err)
			}
			// A long timeout: the machine's other load must not fail an example.
			s, err := Compile(name+".js", string(src), ex.Env, Limits{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			in := &Request{Method: ex.In.Method, Path: ex.In.Path, Query: ex.In.Query, Header: ex.In.Headers, Body: []byte(ex.In.Body)}
			c := Context{Route: ex.Context.Route, Destination: ex.Context.Destination, Attempt: ex.Context.Attempt, Now: ex.Context.Now}
			out, err := s.Run(in, c)
			switch {
			case ex.Error != "":
				if err == nil || err.Error() != ex.Error {
					t.Fatalf("error %v, want %s", err, ex.Error)
				}
				return
			case err != nil:
				t.Fatal(err)
			case ex.Dropped:
				if out != nil {
					t.Fatalf("got %+v, want the event dropped", out)
				}
				return
			case out == nil:
				t.Fatal("dropped; want a request")
			}
			got := exampleRequest{Method: out.Method, Path: out.Path, Query: out.Query, Headers: out.Header, Body: string(out.Body)}
			if !reflect.DeepEqual(got, *ex.Out) {
				t.Errorf("got\n%+v\nwant\n%+v", got, *ex.Out)
			}
		})
	}
}

func TestTheContextsEventTypeIsTheOneTheProviderPackageFinds(t *testing.T) {
	t.Parallel()
	s, err := Compile("type.js", `addHandler('transform', (request, context) => {
  request.headers['x-type'] = context.event_type;
  return request;
});`, nil, Limits{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		header http.Header
		body   string
		want   string
	}{
		{"Gitea's header", http.Header{"X-Gitea-Event": {"push"}}, `{"action":"opened"}`, "push"},
		{"Forgejo's header", http.Header{"X-Forgejo-Event": {"pull_request"}}, `{}`, "pull_request"},
		{"GitHub's header", http.Header{"X-Github-Event": {"issues"}}, `{"type":"x"}`, "issues"},
		{"Shopify's newer header", http.Header{"Shopify-Topic": {"orders/create"}}, `{}`, "orders/create"},
		{"Slack's event inside its envelope", http.Header{}, `{"type":"event_callback","event":{"type":"app_mention"}}`, "app_mention"},
		{"Stripe's type", http.Header{}, `{"type":"invoice.paid"}`, "invoice.paid"},
		{"Paddle's event_type", http.Header{}, `{"event_type":"transaction.completed"}`, "transaction.completed"},
		{"Lemon Squeezy's meta.event_name", http.Header{}, `{"meta":{"event_name":"order_created"}}`, "order_created"},
		{"a body that names none", http.Header{}, `{"id":1}`, ""},
		{"a body that is not JSON", http.Header{}, `type=push`, ""},
	}
	for _, c := range cases {
		// As a delivery runs it, the ingress having found the body to be
		// JSON (Request.JSON), and as a run on a body not known to be.
		for _, known := range []bool{false, true} {
			if known && !json.Valid([]byte(c.body)) {
				continue
			}
			t.Run(fmt.Sprintf("%s, known to be JSON %v", c.name, known), func(t *testing.T) {
				out, err := s.Run(&Request{Method: "POST", Path: "/", Header: c.header, Body: []byte(c.body), JSON: known}, Context{})
				if err != nil {
					t.Fatal(err)
				}
				got, found := out.Header.Get("X-Type"), provider.EventType(c.header, []byte(c.body))
				if got != c.want || found != c.want {
					t.Errorf("context.event_type %q, provider.EventType %q; want %q", got, found, c.want)
				}
			})
		}
	}
}

// A machine's request, headers and context objects serve run after run:
// what one run set on them, their prototypes included, must be gone in
// the next.
func TestARunSeesNothingAnEarlierRunSetOnTheObjectsItWasGiven(t *testing.T) {
	s, err := Compile("t.js", `addHandler('transform', (request, context) => {
  const seen = [request.mine, request.headers['x-mine'], context.mine, request.inherited, request.headers.inherited,
    context.inherited, Object.keys(request).join(), Object.keys(request.headers).join(), Object.keys(context).join()];
  const secret = request.body.secret;
  request.mine = secret;
  request.headers['x-mine'] = secret;
  context.mine = secret;
  for (const o of [request, request.headers, context]) Object.setPrototypeOf(o, {inherited: secret});
  request.body = {secret, seen};
  return request;
});`, nil, Limits{Pool: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"event-one", "event-two", "event-three"} {
		req := &Request{Method: "POST", Path: "/hook", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"secret": "` + secret + `"}`), JSON: true}
		out, err := s.Run(req, Context{Route: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Header.Get("X-Mine"); got != secret {
			t.Fatalf("x-mine %q, want %q", got, secret)
		}
		var res struct {
			Secret string
			Seen   []any
		}
		if err := json.Unmarshal(out.Body, &res); err != nil || res.Secret != secret {
			t.Fatalf("body %s (%v), want the secret %q", out.Body, err, secret)
		}
		want := []any{nil, nil, nil, nil, nil, nil,
			"headers,method,path,query,parsed_query,body", "content-type",
			"route,destination,event_id,attempt,event_type,received_at,connection"}
		if !reflect.DeepEqual(res.Seen, want) {
			t.Errorf("run with %s saw %q, want %q", secret, res.Seen, want)
		}
	}
}
