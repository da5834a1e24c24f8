package forward

import (
	"context"
	"net/http"
	"testing"

	"github.com/jethook/jethook/store"
)

func TestTheSendersQueryIsAppendedToTheDestinationsAsItCame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, dest, uri, want string }{
		{"no query leaves the destination as it is", "http://b/x?k=v", "/hooks/a", "http://b/x?k=v"},
		{"an empty query too", "http://b/x", "/hooks/a?", "http://b/x"},
		{"the sender's query follows the destination's", "http://b/x?k=v", "/hooks/a?a=1&b=2", "http://b/x?k=v&a=1&b=2"},
		{"a destination without a query gets the sender's", "http://b/x", "/hooks/a?a=1", "http://b/x?a=1"},
		{"a destination ending in ? or & takes no extra &", "http://b/x?", "/hooks/a?a=1", "http://b/x?a=1"},
		{"a destination ending in &", "http://b/x?k=v&", "/hooks/a?a=1", "http://b/x?k=v&a=1"},
		{"a # in the sender's query is escaped, not a fragment", "http://u:p@b/x?token=t", "/hooks/a?a#%zz", "http://u:p@b/x?token=t&a%23%zz"},
		{"spaces, controls and non-ASCII bytes are escaped", "http://b/x", "/hooks/a?a= b\x01\xff", "http://b/x?a=%20b%01%FF"},
		{"the sender's escapes pass as they are", "http://b/x", "/hooks/a?q=%2F%zz+x", "http://b/x?q=%2F%zz+x"},
		{"the destination's fragment stays last", "http://b/x?k=v#f", "/hooks/a?a=1", "http://b/x?k=v&a=1#f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dest, err := parseDest(tc.dest)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendQuery(dest, tc.uri).String(); got != tc.want {
				t.Errorf("appendQuery(%q, %q) = %q, want %q", tc.dest, tc.uri, got, tc.want)
			}
		})
	}
}

func TestADestinationURLThatDoesNotParseIsNamedWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	_, err := parseDest("http://alice:S3cretPass@b/x%zz?token=T0kenValue")
	if err == nil || err.Error() != `destination http://b/x%zz: invalid URL escape "%zz"` {
		t.Errorf("err = %v", err)
	}
}

func BenchmarkNewRequest(b *testing.B) {
	e := &store.Envelope{Route: "r", EventID: "evt_1", RequestURI: "/hooks/r?x=1", RemoteAddr: "10.0.0.1:1234",
		Header: http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"push"}, "User-Agent": {"GitHub-Hookshot/1"}},
		Body:   []byte(`{"a":1}`)}
	dest, err := parseDest("http://127.0.0.1:8080/hooks/app?k=v") // once per destination, as its attempts do
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := newRequestTo(context.Background(), dest, e, 1); err != nil {
			b.Fatal(err)
		}
	}
}
