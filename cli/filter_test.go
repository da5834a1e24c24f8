package cli

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// A destination whose filter an event does not match shows it as filtered,
// with the one record of the check, and a reload refuses a filter that
// does not compile, naming its line.
func TestEventsShowSaysADestinationFilteredTheEventOut(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	filtered := strings.Replace(opsConfig, `url: "BACKEND/audit", slow_start: 0s}`,
		`url: "BACKEND/audit", slow_start: 0s, filter: 'body.type.startsWith("invoice.")'}`, 1)
	r.write(filtered)
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	_, id := r.post("/hooks/shop", `{"type":"customer.created"}`, nil)
	_, invoice := r.post("/hooks/shop", `{"type":"invoice.paid"}`, nil)
	var out string
	eventually(t, "the event settled at both destinations", func() bool {
		var err error
		if out, err = r.run(events, "show", id); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, "destination app: delivered") && strings.Contains(out, "destination audit: filtered")
	})
	if !regexp.MustCompile(`(?m)^  1\s+\S+ \S+\s+filtered\s+-\s+0s\s+-\s*$`).MatchString(out) {
		t.Errorf("no filtered attempt row:\n%s", out)
	}
	eventually(t, "the invoice delivered to audit", func() bool { return r.count("/audit", invoice) == 1 })
	if n := r.count("/audit", id); n != 0 {
		t.Errorf("audit received the filtered event %d times", n)
	}

	r.write(strings.Replace(filtered, `startsWith("invoice.")`, `startsWith("invoice.")`+" &&", 1))
	err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "policies.yaml:10: routes[0].destinations[1].filter: filter does not compile") {
		t.Fatalf("a filter that does not compile: %v, want an error naming its line and key", err)
	}
}
