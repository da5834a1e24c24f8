package provider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jethook/jethook/filter"
)

func TestEventTypeIsWhereEachSenderNamesIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		header http.Header
		body   string
		want   string
	}{
		{"github names it in a header", http.Header{"X-Github-Event": {"push"}}, `{"action":"opened"}`, "push"},
		{"shopify names its topic in a header", http.Header{"X-Shopify-Topic": {"orders/create"}}, `{}`, "orders/create"},
		{"shopify's events webhooks name it without X-", http.Header{"Shopify-Topic": {"Product"}}, `{}`, "Product"},
		{"stripe names it in the body", nil, `{"id":"evt_1","type":"invoice.paid","data":{"object":{}}}`, "invoice.paid"},
		{"slack's event callback names the inner event", nil, `{"type":"event_callback","event":{"type":"app_mention"}}`, "app_mention"},
		{"zoom names it as event", nil, `{"event":"meeting.started","payload":{}}`, "meeting.started"},
		{"paddle names it as event_type", nil, `{"event_type":"transaction.completed"}`, "transaction.completed"},
		{"a body that names none has none", nil, `{"order_id":"1004"}`, ""},
		{"a body that is not JSON has none", nil, `type=push`, ""},
		{"a type that is not a string is not one", nil, `{"type":7}`, ""},
		{"a body nested too deep is not read", nil, `{"type":"x","a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, ""},
		{"a long type is clipped", nil, `{"type":"` + strings.Repeat("a", 300) + `"}`, strings.Repeat("a", 100)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := EventType(c.header, []byte(c.body)); got != c.want {
				t.Fatalf("EventType = %q, want %q", got, c.want)
			}
			// What the ingress records as JSON reads the same known as such.
			if filter.IsJSON([]byte(c.body)) {
				if got := EventTypeOfJSON(c.header, []byte(c.body)); got != c.want {
					t.Fatalf("EventTypeOfJSON = %q, want %q", got, c.want)
				}
			}
		})
	}
}

// A body recorded as JSON is not checked again: one that is not JSON
// after all (the record is wrong, which only a bug in jethook could make)
// is read as far as gjson reads it, without a panic.
func TestEventTypeOfJSONDoesNotCheckTheBodyAgain(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","data":`)
	if got := EventType(nil, body); got != "" {
		t.Fatalf("EventType of a cut body = %q, want none", got)
	}
	if got := EventTypeOfJSON(nil, body); got != "invoice.paid" {
		t.Fatalf("EventTypeOfJSON of a cut body = %q, want the type it reads", got)
	}
	for _, body := range []string{"", "   ", "type=push", `["type"]`, `{"type":`} {
		if got := EventTypeOfJSON(nil, []byte(body)); got != "" {
			t.Errorf("EventTypeOfJSON(%q) = %q, want none", body, got)
		}
	}
}
