package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

func TestTheEventPageShowsWhatADestinationsTransformMakesOfIt(t *testing.T) {
	t.Parallel()
	r := newRig(t, token)
	withTransform := strings.Replace(oneRoute, `slow_start: 0s}`, `slow_start: 0s, transform: {script: "addHandler('transform', (request) => { request.headers['x-copy'] = request.body.html; request.body = {html: request.body.html, n: 2}; return request; });"}}`, 1)
	cfg, err := policy.Parse("test.yaml", []byte(withTransform), func(string) (string, bool) { return "http://127.0.0.1:1", true })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.fwd.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	r.publish(&store.Envelope{EventID: "evt-t", Host: "h", RemoteAddr: "192.0.2.1:1",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"html":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`)})
	c := r.client()
	r.login(c)
	var page string
	testkit.Eventually(t, 10*time.Second, "the event is stored", func() bool {
		got := r.do(c, http.MethodGet, "/events/evt-t", nil, nil)
		page = got.body
		return got.code == http.StatusOK
	})
	for _, want := range []string{
		"What its transform, <span class=\"mono\">routes[0].destinations[0].transform.script</span>",
		`<th class="mono">X-Copy</th>`,
		`&#34;n&#34;: 2`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	for _, raw := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q unescaped", raw)
		}
	}
	if strings.Contains(page, "backend-credential") {
		t.Error("the page shows the destination URL's credential")
	}
}
