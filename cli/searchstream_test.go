package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// gatedStream passes a streamed search's lines through as they come until
// it has passed the first row, then holds the rest until open is closed.
// closed is closed when the browser's side of the stream ends.
type gatedStream struct {
	ctx    context.Context // the browser's request
	lines  *bufio.Reader
	body   io.Closer
	open   <-chan struct{}
	held   bool
	closed chan struct{}
	once   sync.Once
	buf    []byte
}

func (g *gatedStream) Read(p []byte) (int, error) {
	if len(g.buf) == 0 {
		if g.held {
			select {
			case <-g.open:
			case <-g.ctx.Done():
				return 0, g.ctx.Err()
			}
		}
		line, err := g.lines.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		g.held = g.held || bytes.HasPrefix(line, []byte(`{"row"`))
		g.buf = line
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func (g *gatedStream) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.body.Close()
}

// The Events page's search in a real headless Chromium shows the first
// event found while the search still runs, with a Stop button that ends
// it, and the rest as they come. A proxy between the browser and the
// dashboard holds a streamed search after its first row, so that the
// test sees the page mid-search without depending on how fast it scans.
func TestTheDashboardShowsASearchsEventsAsTheyAreFound(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(backend.Close)
	addr, adminAddr := serveDashboardConfig(t, backend.URL)
	for i := range 3 {
		resp, err := http.Post("http://"+addr+"/hooks/shop", "application/json", strings.NewReader(fmt.Sprintf(`{"order":{"id":%d}}`, 2000+i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	var mu sync.Mutex
	open := make(chan struct{})
	var streams []*gatedStream
	target, _ := url.Parse("http://" + adminAddr)
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Header.Get("Content-Type") == "application/x-ndjson" {
				g := &gatedStream{ctx: resp.Request.Context(), lines: bufio.NewReader(resp.Body), body: resp.Body, open: open, closed: make(chan struct{})}
				resp.Body = g
				mu.Lock()
				streams = append(streams, g)
				mu.Unlock()
			}
			return nil
		},
	})
	t.Cleanup(proxy.Close)
	t.Cleanup(func() {
		select {
		case <-open:
		default:
			close(open)
		}
	})

	tab, cancelTab := startChromium(t, browser)
	console := chromedp.Console(tab)
	ctx, cancel := context.WithTimeout(tab, 45*time.Second)
	t.Cleanup(cancel)
	do, eval := browserSteps(t, ctx)
	rows := `document.querySelectorAll("table.events tbody tr").length`
	search := func(expr string) {
		t.Helper()
		do("search "+expr,
			chromedp.Navigate(proxy.URL+"/events"),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-state="done"]`)),
			chromedp.SetValue(chromedp.CSS(`form.search input[name="q"]`), expr),
			chromedp.Click(chromedp.CSS(`form.search button`)))
	}

	do("log in",
		chromedp.Navigate(proxy.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), adminToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.overview`)))

	// The first event is on the page while the search is held after it.
	search(`body.order.id >= 2000`)
	do("the first event shows mid-search",
		chromedp.WaitVisible(chromedp.CSS(`#results[data-state="searching"] table.events tbody tr`)),
		chromedp.WaitVisible(chromedp.CSS(`#results button.stop`)))
	if n := eval(rows); n != float64(1) {
		t.Fatalf("%v rows while the search is held after its first, want 1", n)
	}
	if u := eval(`location.search`).(string); !strings.Contains(u, "q=body.order.id") {
		t.Fatalf("the URL does not hold the search: %s", u)
	}
	if dir := os.Getenv("JETHOOK_SCREENSHOTS"); dir != "" {
		screenshots(t, ctx, dir, "searching")
	}
	mu.Lock()
	first := streams[len(streams)-1]
	mu.Unlock()
	do("stop it",
		chromedp.Click(chromedp.CSS(`#results button.stop`)),
		chromedp.WaitVisible(chromedp.CSS(`#results[data-state="stopped"]`)))
	if text := eval(`document.querySelector("#results .scan-text").textContent`).(string); !strings.HasPrefix(text, "Stopped.") {
		t.Fatalf("after Stop the page says %q", text)
	}
	select {
	case <-first.closed:
	case <-ctx.Done():
		t.Fatal("Stop did not end the search's request")
	}

	// Let the next search run on: the rest comes, then its end.
	close(open)
	search(`body.order.id >= 2000`)
	do("the search ends", chromedp.WaitVisible(chromedp.CSS(`#results[data-state="done"]`)))
	if n := eval(rows); n != float64(3) {
		t.Fatalf("%v rows at the search's end, want 3", n)
	}
	if text := eval(`document.querySelector("#results .scan-text").textContent`).(string); !strings.HasPrefix(text, "Scanned 3 webhooks") {
		t.Fatalf("at the end the page says %q", text)
	}
	if n := eval(`document.querySelectorAll("#results button.stop").length`); n != float64(0) {
		t.Fatal("the Stop button stays after the search ended")
	}

	// A search that finds nothing says so; one that does not compile says
	// why.
	search(`body.order.id == 1`)
	do("nothing found", chromedp.WaitVisible(chromedp.CSS(`#results[data-state="done"] p.none`)))
	search(`body.order.id ==`)
	do("a bad expression", chromedp.WaitVisible(chromedp.CSS(`#results[data-state="failed"]`)))
	if text := eval(`document.querySelector("#results .scan-text").textContent`).(string); !strings.Contains(text, "does not compile") {
		t.Fatalf("a bad expression: the page says %q", text)
	}

	cancelTab()
	checkConsole(t, console)
}
