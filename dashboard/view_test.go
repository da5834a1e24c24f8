package dashboard

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/metrics"
)

func TestBodiesAreShownAsJSONTextOrHex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, kind, text string
	}{
		{"JSON is indented", `{"a":[1,2]}`, "JSON", "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
		{"text stays as it is", "<b>hi</b>\n\tthere", "text", "<b>hi</b>\n\tthere"},
		{"control characters make it binary", "a\x00b", "binary", "00000000  61 00 62"},
		{"invalid UTF-8 is binary", "\xff\xfe", "binary", "00000000  ff fe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBody([]byte(tc.body))
			if b.Kind != tc.kind || !strings.HasPrefix(b.Text, tc.text) || b.Size != len(tc.body) || b.Shown != b.Size {
				t.Fatalf("got %+v, want %s starting %q", b, tc.kind, tc.text)
			}
		})
	}
	t.Run("deep JSON is shown as text, not indented", func(t *testing.T) {
		t.Parallel()
		// encoding/json takes 9,999 levels; indented, these 20 KB would
		// be 200 MB.
		deep := strings.Repeat("[", 9_999) + strings.Repeat("]", 9_999)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b := newBody([]byte(deep))
		runtime.ReadMemStats(&after)
		if b.Kind != "text" || b.Text != deep {
			t.Fatalf("got %s of %d bytes", b.Kind, len(b.Text))
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
			t.Errorf("formatting 20 KB allocated %d MiB", n>>20)
		}
	})
	t.Run("a large body shows its start", func(t *testing.T) {
		t.Parallel()
		b := newBody([]byte(strings.Repeat("é", maxShown)))
		if b.Kind != "text" || b.Shown != maxShown || b.Size != 2*maxShown {
			t.Fatalf("got %s, shown %d of %d", b.Kind, b.Shown, b.Size)
		}
	})
}

func TestTheChartScalesToTheBusiestMinute(t *testing.T) {
	t.Parallel()
	ms := make([]metrics.Minute, metrics.HistoryMinutes)
	ms[10] = metrics.Minute{Start: time.Unix(600, 0), Delivered: 30, Failed: 10}
	ms[59] = metrics.Minute{Start: time.Unix(3540, 0), Failed: 1}
	c := newChart(ms)
	if c.Max != 40 || c.Delivered != 30 || c.Failed != 11 || len(c.Bars) != 2 {
		t.Fatalf("chart %+v", c)
	}
	busiest := c.Bars[0]
	if busiest.X != 10*barWidth || busiest.DeliveredH+busiest.FailedH != chartH || busiest.FailedY != 0 {
		t.Errorf("the busiest minute fills the height: %+v", busiest)
	}
	if c.Bars[1].FailedH != 1 {
		t.Errorf("a minute with one failure still shows a pixel: %+v", c.Bars[1])
	}
	if empty := newChart(make([]metrics.Minute, 60)); len(empty.Bars) != 0 || empty.Max != 0 {
		t.Errorf("an idle hour: %+v", empty)
	}
}

func TestTheLoginFormOnlySendsBackToThisSite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, next, want string }{
		{"a path with a query is kept", "/deadletters?route=a", "/deadletters?route=a"},
		{"an event page is kept", "/events/evt%2F1?route=a", "/events/evt%2F1?route=a"},
		{"nothing is the overview", "", "/"},
		{"a relative path is refused", "deadletters", "/"},
		{"a protocol-relative URL is refused", "//evil.example", "/"},
		{"a backslash browsers read as a slash is refused", `/\evil.example`, "/"},
		{"a backslash anywhere is refused", `/a\b`, "/"},
		{"an absolute URL is refused", "https://evil.example", "/"},
		{"a tab browsers drop is refused", "/\t/evil.example", "/"},
		{"a newline is refused", "/a\r\nSet-Cookie: x", "/"},
		{"a NUL is refused", "/\x00/evil.example", "/"},
		{"DEL is refused", "/\x7f/evil.example", "/"},
		{"a C1 control is refused", "/\u0085/evil.example", "/"},
		{"a path that does not parse is refused", "/%zz", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := localPath(tc.next); got != tc.want {
				t.Errorf("localPath(%q) = %q, want %q", tc.next, got, tc.want)
			}
		})
	}
}

func TestStatesPutTheMostPressingFirst(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 5, 2, 9, 30, 0, 0, time.UTC)
	got := states(admin.DestinationStatus{Paused: true, Breaker: "open", BreakerOpenUntil: &until, SlowStart: true})
	var texts []string
	for _, s := range got {
		texts = append(texts, s.Text)
	}
	if want := "paused by an operator|breaker open until 09:30:00Z|slow start: ramping up"; strings.Join(texts, "|") != want {
		t.Errorf("states: %q, want %q", strings.Join(texts, "|"), want)
	}
	got = states(admin.DestinationStatus{Breaker: "closed", LimitPerSecond: 42})
	if len(got) != 2 || got[0].Text != "delivering" || got[1].Text != "adaptive limit 42.0/s" {
		t.Errorf("a healthy destination with a learned limit: %+v", got)
	}
	if got := states(admin.DestinationStatus{Breaker: "closed"}); len(got) != 1 || got[0].Text != "delivering" {
		t.Errorf("a healthy destination: %+v", got)
	}
	if got := states(admin.DestinationStatus{Breaker: "closed", DeliveredBy: "another replica"}); len(got) != 1 || got[0].Text != "delivered by another replica" {
		t.Errorf("an ordered destination another replica delivers: %+v", got)
	}
	if got := states(admin.DestinationStatus{Breaker: "closed", DeliveredBy: "this replica"}); len(got) != 1 || got[0].Text != "delivering" {
		t.Errorf("an ordered destination this replica delivers: %+v", got)
	}
	if got := states(admin.DestinationStatus{Pull: true, Leased: 3}); len(got) != 1 || got[0].Text != "pull: 3 leased" {
		t.Errorf("a pull destination: %+v", got)
	}
	if got := states(admin.DestinationStatus{Pull: true, Paused: true}); len(got) != 2 || got[0].Text != "paused by an operator" || got[1].Text != "pull: 0 leased" {
		t.Errorf("a paused pull destination: %+v", got)
	}
}
