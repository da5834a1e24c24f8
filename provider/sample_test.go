package provider_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/jethook/jethook/provider"
)

func TestASampleRequestIsWhatTheSenderSends(t *testing.T) {
	t.Parallel()
	github, _ := provider.Lookup(provider.NameGitHub)
	twilio, _ := provider.Lookup(provider.NameTwilio)
	stripe, _ := provider.Lookup(provider.NameStripe)
	for _, tc := range []struct {
		name   string
		sample provider.Sample
		body   string
		event  string
		header http.Header
		want   map[string]string
		query  string
	}{
		{"the event header has the sender's default", github.Sample, `{}`, "", nil,
			map[string]string{"X-GitHub-Event": "ping", "Content-Type": "application/json"}, ""},
		{"an event named by the caller wins", github.Sample, `{}`, "push", http.Header{"X-Github-Event": {"issues"}},
			map[string]string{"X-GitHub-Event": "push"}, ""},
		{"an event header the caller set is kept", github.Sample, `{}`, "", http.Header{"X-Github-Event": {"issues"}},
			map[string]string{"X-GitHub-Event": "issues"}, ""},
		{"a form body goes form-encoded", twilio.Sample, `CallSid=CA1`, "", nil,
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, ""},
		{"a JSON body is signed through bodySHA256", twilio.Sample, `{}`, "", nil,
			map[string]string{"Content-Type": "application/json"},
			"bodySHA256=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{"a Content-Type the caller set is kept", stripe.Sample, `a=1`, "", http.Header{"Content-Type": {"text/plain"}},
			map[string]string{"Content-Type": "text/plain"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := tc.sample.Request(http.MethodPost, "/hooks/x", []byte(tc.body), tc.event, tc.header)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if r.Header.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, r.Header.Get(k), v)
				}
			}
			if r.URL.Path != "/hooks/x" || r.URL.RawQuery != tc.query {
				t.Errorf("URL %s, want /hooks/x?%s", r.URL, tc.query)
			}
		})
	}
	t.Run("an event for a sender without an event header fails", func(t *testing.T) {
		t.Parallel()
		if _, err := stripe.Sample.Request(http.MethodPost, "/", nil, "push", nil); !errors.Is(err, provider.ErrNoEventHeader) {
			t.Fatalf("error %v, want ErrNoEventHeader", err)
		}
	})
	t.Run("the caller's header is not changed", func(t *testing.T) {
		t.Parallel()
		h := http.Header{}
		if _, err := github.Sample.Request(http.MethodPost, "/", nil, "", h); err != nil || len(h) != 0 {
			t.Fatalf("header %v, error %v", h, err)
		}
	})
}
