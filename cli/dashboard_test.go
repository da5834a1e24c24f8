package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
)

// dashboardConfig has a route with two destinations and a pull
// destination, and one whose backend is down; %s is the backend's URL.
const dashboardConfig = `
defaults:
  retry: {backoff: fixed, delay: 300ms, jitter: none, max_attempts: 3, max_age: 1h}
  timeout: 2s
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "%[1]s/app", slow_start: 0s}
      - name: audit
        url: "%[1]s/audit"
        slow_start: 0s
        transform:
          script: |
            addHandler('transform', (request) => {
              request.headers['x-audit'] = 'yes';
              request.body = {order: request.body.order};
              return request;
            });
      - {name: laptop, pull: {token: "` + dashboardPullToken + `"}, timeout: 1m}
  - name: billing
    path: /hooks/billing
    retry: {max_attempts: 2}
    destinations:
      - {name: ledger, url: "%[1]s/ledger", slow_start: 0s}
`

// serveDashboardConfig runs jethook serve on dashboardConfig with backend
// as its backend and the admin API (and dashboard) on a port of its own,
// guarded by adminToken; it returns the two listeners' addresses.
func serveDashboardConfig(t *testing.T, backend string) (addr, adminAddr string) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, dashboardConfig, backend), 0o600); err != nil {
		t.Fatal(err)
	}
	adminAddr = testkit.FreeAddr(t)
	addr = serveForTest(t, func(s *Settings) {
		s.Config, s.AdminListen, s.AdminToken = config, adminAddr, adminToken
	})
	return addr, adminAddr
}

const dashboardPullToken = "dashboard-pull-token-0123456789abcdef"

// evilBody would run script in the page if the dashboard rendered it as
// HTML; it sets window.__pwned instead of opening a dialog, so the test
// can read whether it ran.
const evilBody = `<script>window.__pwned = "body"</script><img src=x onerror="window.__pwned = 'img'">`

// chromium finds the browser, or skips the test; JETHOOK_REQUIRE_BROWSER=1
// (set by CI) makes a missing browser a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("JETHOOK_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH, and JETHOOK_REQUIRE_BROWSER=1: install it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: install it (apt-get install chromium) to run the dashboard's browser test")
	return ""
}

// browserSteps are the two ways a browser test drives its tab in ctx:
// do runs steps, named what in a failure; eval evaluates a script
// expression. Either fails the test on an error.
func browserSteps(t *testing.T, ctx context.Context) (do func(what string, steps ...chromedp.Action[chromedp.Void]), eval func(expr string) any) {
	do = func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval = func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	return do, eval
}

// screenshots saves the tab's page as dir/dashboard-<name>-desktop.png and
// -phone.png, for docs/dashboard.md, and leaves the tab at desktop size.
func screenshots(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	desktop := chromedp.EmulateViewport(1280, 900)
	for _, size := range []struct {
		name string
		set  chromedp.Action[chromedp.Void]
	}{
		{"desktop", desktop},
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2))},
	} {
		if err := chromedp.Do(ctx, size.set); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+"-"+size.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, desktop); err != nil {
		t.Fatal(err)
	}
}

// startChromium starts browser headless and returns its tab, which ends
// with the test or with cancel.
func startChromium(t *testing.T, browser string) (tab context.Context, cancel context.CancelFunc) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	tab, cancel = chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1280, 900)); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return tab, cancel
}

// The dashboard as jethook serves it, in a real headless Chromium: log in,
// see the overview, open a dead letter whose body and headers hold markup
// and check none of it ran, replay it and see it delivered, and replay
// everything matching a filter with the script's progress. With
// JETHOOK_SCREENSHOTS=dir it saves each page at desktop and phone size.
func TestTheDashboardInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)

	var appStatus atomic.Int32
	appStatus.Store(http.StatusOK)
	var mu sync.Mutex
	appBodies := map[string]int{}
	var auditBodies []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/audit":
			mu.Lock()
			auditBodies = append(auditBodies, string(b))
			mu.Unlock()
		case "/app":
			code := int(appStatus.Load())
			if code == http.StatusOK {
				mu.Lock()
				appBodies[string(b)]++
				mu.Unlock()
			}
			w.WriteHeader(code)
		case "/ledger":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(backend.Close)
	addr, adminAddr := serveDashboardConfig(t, backend.URL)
	ingress, admin := "http://"+addr, "http://"+adminAddr

	post := func(path, body string, hdr map[string]string) string {
		code, id := apptest.Post(t, ingress+path, body, hdr)
		if code != http.StatusOK || id == "" {
			t.Fatalf("POST %s: %d", path, code)
		}
		return id
	}
	deadLetters := func(query string) int {
		req, _ := http.NewRequest(http.MethodGet, admin+"/v1/deadletters/count?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var c struct{ Count int }
		_ = json.NewDecoder(resp.Body).Decode(&c)
		return c.Count
	}

	var order string
	for i := range 5 {
		order = post("/hooks/shop", fmt.Sprintf(`{"type":"order.created","order":{"id":%d,"total":"%d.90","items":["sku-1","sku-2"]}}`, 1000+i, 10+i), nil)
	}
	testkit.Eventually(t, 10*time.Second, "app has the 5 orders", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(appBodies) == 5
	})
	appStatus.Store(http.StatusBadRequest)
	post("/hooks/shop", evilBody, map[string]string{"Content-Type": "text/html", "X-Evil": `"><img src=x onerror="window.__pwned='header'">`})
	post("/hooks/billing", `{"invoice":"in_1"}`, nil)
	post("/hooks/billing", `{"invoice":"in_2"}`, nil)
	testkit.Eventually(t, 15*time.Second, "one dead letter on shop/app and two on billing", func() bool {
		return deadLetters("route=shop&destination=app") == 1 && deadLetters("route=billing") == 2
	})
	// lease is a client of the pull destination laptop.
	type leased struct {
		Body        []byte
		Redelivered bool
	}
	lease := func(max int) []leased {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/pull/shop/laptop?max=%d&wait=1s", ingress, max), nil)
		req.Header.Set("Authorization", "Bearer "+dashboardPullToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ Webhooks []leased }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("lease from laptop: %d %v", resp.StatusCode, err)
		}
		return got.Webhooks
	}
	if got := lease(1); len(got) != 1 {
		t.Fatalf("leased %d webhooks from laptop, want 1", len(got))
	}

	tab, cancelTab := startChromium(t, browser)
	console := chromedp.Console(tab)
	ctx, cancel := context.WithTimeout(tab, 45*time.Second)
	t.Cleanup(cancel)
	do, eval := browserSteps(t, ctx)
	// Pages to photograph at both sizes at the end: name and how to get there.
	shots := map[string][]chromedp.Action[chromedp.Void]{}
	visit := func(path string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Navigate(admin + path), chromedp.WaitVisible(chromedp.CSS("main"))}
	}

	do("log in",
		chromedp.Navigate(admin+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), adminToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.overview`)))
	if text := eval(`document.querySelector("table.overview").innerText`).(string); !strings.Contains(text, "shop → app") || !strings.Contains(text, "billing → ledger") {
		t.Fatalf("the overview does not list the destinations: %s", text)
	}
	laptop := `[...document.querySelectorAll("table.overview tbody tr")].find(tr => tr.innerText.includes("shop → laptop")).innerText`
	if text := eval(laptop).(string); !strings.Contains(text, "pulled by its clients") || !strings.Contains(text, "pull: 1 leased") ||
		!strings.Contains(text, "5 new · 1 leased") {
		t.Fatalf("the overview does not show laptop as a pull destination with one lease: %s", text)
	}
	if eval(`document.cookie`) != "" {
		t.Error("the session cookie is readable by script")
	}
	// It refreshes by itself: the live part is replaced with a new one.
	eval(`document.querySelector(".live").dataset.seen = "1"`)
	do("refresh", chromedp.WaitVisible(chromedp.CSS(`.live:not([data-seen])`)))
	shots["overview"] = visit("/")

	do("open the dead letter",
		chromedp.Navigate(admin+"/deadletters?route=shop"),
		chromedp.Click(chromedp.CSS(`tbody a[href^="/deadletters/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`pre.body`)))
	if got := eval(`typeof window.__pwned`); got != "undefined" {
		t.Fatalf("markup from the webhook ran: window.__pwned is %v", eval(`window.__pwned`))
	}
	if got := eval(`document.querySelector("pre.body").textContent`); got != evilBody {
		t.Fatalf("the body is not shown as text: %q", got)
	}
	if n := eval(`document.querySelectorAll("main script, main img, main [onerror]").length`); n != float64(0) {
		t.Fatalf("%v elements from the webhook are in the page", n)
	}
	if !strings.Contains(eval(`document.querySelector("table.headers").innerText`).(string), `onerror="window.__pwned='header'"`) {
		t.Error("the header is not shown as text")
	}
	deadLetterURL := eval(`location.pathname`).(string)
	shots["deadletter"] = visit(deadLetterURL)
	shots["deadletters"] = visit("/deadletters")
	shots["purge"] = append(visit("/deadletters?route=billing"),
		chromedp.Click(chromedp.CSS(`form[action="/deadletters/purge"] button`)), chromedp.WaitVisible(chromedp.CSS("#confirm-purge")))

	appStatus.Store(http.StatusOK)
	do("replay it",
		chromedp.Click(chromedp.CSS(`#replay`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if text := eval(`document.querySelector(".notice").innerText`).(string); !strings.Contains(text, "Queued 1 for replay") {
		t.Fatalf("after replay: %q", text)
	}
	do("open its event", chromedp.Click(chromedp.CSS(`dl.facts a[href^="/events/"]`)), chromedp.WaitVisible(chromedp.CSS(`section.panel`)))
	eventURL := eval(`location.pathname + location.search`).(string)
	delivered := `[...document.querySelectorAll("section.panel h3")].some(h => h.innerText.startsWith("app") && h.innerText.includes("delivered"))`
	testkit.Eventually(t, 10*time.Second, "the event page shows the replay delivered to app", func() bool {
		do("reload the event", chromedp.Navigate(admin+eventURL), chromedp.WaitVisible(chromedp.CSS(`section.panel`)))
		return eval(delivered) == true
	})
	mu.Lock()
	got := appBodies[evilBody]
	mu.Unlock()
	if got != 1 {
		t.Fatalf("the backend got the replayed body %d times, want 1", got)
	}
	// Replayed to the pull destination too, as a developer would to run
	// it on their machine: laptop's client gets it.
	do("replay it to laptop",
		chromedp.Navigate(admin+deadLetterURL),
		chromedp.Click(chromedp.CSS(`form.replay-to button`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if text := eval(`document.querySelector(".notice").innerText`).(string); !strings.Contains(text, "Queued 1 for replay") {
		t.Fatalf("after replay to laptop: %q", text)
	}
	testkit.Eventually(t, 10*time.Second, "laptop's client leases the replay", func() bool {
		return slices.ContainsFunc(lease(100), func(w leased) bool { return string(w.Body) == evilBody && w.Redelivered })
	})

	// Everything matching a filter, by the script, with progress.
	do("replay all matching",
		chromedp.Navigate(admin+"/deadletters?route=billing"),
		chromedp.Click(chromedp.CSS(`form[data-replay-all] button`)),
		chromedp.WaitVisible(chromedp.CSS(`progress:not([hidden])`)))
	testkit.Eventually(t, 10*time.Second, "the progress says done", func() bool {
		return strings.HasPrefix(eval(`document.querySelector(".progress-text").textContent`).(string), "Done: queued 2")
	})

	// Search by what the webhooks say: the search box, the type column,
	// the URL that holds the search, and a resend from the event found.
	post("/hooks/shop", `{"type":"<img src=x onerror=\"window.__pwned='type'\">","order":{"id":77}}`, nil)
	do("search for order 1003",
		chromedp.Navigate(admin+"/events"),
		chromedp.WaitVisible(chromedp.CSS(`form.search input[name="q"]`)),
		chromedp.SendKeys(chromedp.CSS(`form.search input[name="q"]`), `body.order.id == 1003`),
		chromedp.SetValue(chromedp.CSS(`form.search input[name="since"]`), "24h"),
		chromedp.Submit(chromedp.CSS(`form.search input[name="q"]`)))
	// The page before the search has its results too (all events): wait
	// for the search's own to end.
	searched := func(what string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, what+" ends", func() bool {
			return eval(`location.search !== "" && document.getElementById("results")?.dataset.state === "done"`).(bool)
		})
	}
	searched("the search for order 1003")
	rows := `[...document.querySelectorAll("table.events tbody tr")].map(tr => tr.querySelector("td.type").innerText + " " + tr.querySelector("a").innerText).join("|")`
	found := eval(rows).(string)
	if !strings.HasPrefix(found, "order.created ") || strings.Contains(found, "|") {
		t.Fatalf("the search for order 1003 found %q, want one order.created event", found)
	}
	searchURL := eval(`location.pathname + location.search`).(string)
	if !strings.Contains(searchURL, "q=body.order.id") || !strings.Contains(searchURL, "since=24h") {
		t.Fatalf("the URL does not hold the search: %s", searchURL)
	}
	do("open the search's link afresh", chromedp.Navigate(admin+searchURL), chromedp.WaitVisible(chromedp.CSS(`p.scan`)))
	searched("the search's link")
	if again := eval(rows).(string); again != found {
		t.Fatalf("the search's link found %q, the search %q", again, found)
	}
	shots["search"] = visit(searchURL)
	do("search by a type that holds markup", chromedp.Navigate(admin+"/events?type=%3Cimg*"), chromedp.WaitVisible(chromedp.CSS(`p.scan`)))
	searched("the search by type")
	if got := eval(`typeof window.__pwned`); got != "undefined" {
		t.Fatalf("markup from a webhook's type ran: window.__pwned is %v", eval(`window.__pwned`))
	}
	if text := eval(`document.querySelector("table.events td.type").textContent`).(string); !strings.HasPrefix(text, "<img") {
		t.Fatalf("the type is not shown as text: %q", text)
	}
	do("open the order and deliver it again",
		chromedp.Navigate(admin+searchURL),
		chromedp.Click(chromedp.CSS(`table.events tbody a`)),
		chromedp.WaitVisible(chromedp.CSS(`button.resend`)),
		chromedp.Click(chromedp.CSS(`section.panel:first-of-type button.resend`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if text := eval(`document.querySelector(".notice").innerText`).(string); !strings.Contains(text, "app: queued to be delivered again now") {
		t.Fatalf("after deliver again: %q", text)
	}
	// What audit's transform sent on each attempt: the SHA-256 of the body
	// its backend got, which the preview of the script makes again.
	var audited string
	mu.Lock()
	for _, b := range auditBodies {
		if strings.Contains(b, `"id":1003`) {
			audited = b
		}
	}
	mu.Unlock()
	sum := sha256.Sum256([]byte(audited))
	auditPanel := `[...document.querySelectorAll("section.panel")].find(s => s.querySelector("h3").innerText.startsWith("audit"))`
	sent := eval(auditPanel + `.querySelector("tr.sent").innerText`).(string)
	if audited == "" || !strings.Contains(sent, "Sent by the transform") || !strings.Contains(sent, hex.EncodeToString(sum[:])) || !strings.Contains(sent, "x-audit") {
		t.Fatalf("the audit attempt says %q; its backend got %q", sent, audited)
	}
	if previewed := eval(auditPanel + `.querySelector("details.preview .sha").textContent`).(string); previewed != hex.EncodeToString(sum[:]) {
		t.Fatalf("the preview's body SHA-256 is %q, the attempt's %x", previewed, sum)
	}
	testkit.Eventually(t, 10*time.Second, "app got order 1003 again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body, n := range appBodies {
			if strings.Contains(body, `"id":1003`) {
				return n == 2
			}
		}
		return false
	})

	shots["events"] = visit("/events?route=shop")
	shots["login"] = visit("/login")
	shots["event"] = visit("/events/" + url.PathEscape(order) + "?route=shop")
	if dir := os.Getenv("JETHOOK_SCREENSHOTS"); dir != "" {
		for name, steps := range shots {
			do("open "+name, steps...)
			screenshots(t, ctx, dir, name)
		}
	}

	// Nothing on any page tripped the Content-Security-Policy or threw.
	cancelTab()
	checkConsole(t, console)
}

// evilKey is an ordering key, from a payload, that would run script in a
// page rendered as HTML and colour a terminal.
const evilKey = "<img src=x onerror=\"window.__pwned='key'\">\x1b[31m"

// A key whose head keeps failing, seen by an operator: the overview lists
// it, the page of the event waiting behind it names the head, and `jethook
// events show` and `jethook status` say the same; the key, which comes
// from the payload, is text in the page and escaped on the terminal.
//
// The second event is posted once the head has failed: posted at once,
// under a heavily loaded -race run, the head could reach the server's end
// of a fetch the client had given up on (the server took over a second to
// see it), come back only after its ack wait, after the second took the
// key, and go next after it (see docs/ordering.md). Not parallel: it
// starts a browser.
func TestABlockedOrderingKeyIsShownInTheDashboardAndTheCLI(t *testing.T) {
	browser := chromium(t)
	r := newOpsRig(t)
	ordered := strings.Replace(opsConfig, `{name: app, url: "BACKEND/app", slow_start: 0s}`,
		`{name: app, url: "BACKEND/app", slow_start: 0s, order: {key: 'body.key'}}`, 1)
	r.write(strings.Replace(ordered, "max_attempts: 3", "max_attempts: 1000", 1))
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	first, _ := json.Marshal(map[string]string{"key": evilKey, "n": "1"})
	second, _ := json.Marshal(map[string]string{"key": evilKey, "n": "2"})
	// Each posted as a provider would: again until stored, so that the
	// second is never stored without the first.
	stored := func(body []byte, statuses map[string]string) string {
		var id string
		eventually(t, "the webhook stored", func() bool {
			code, got := r.post("/hooks/shop", string(body), statuses)
			if code != http.StatusOK {
				t.Logf("post answered %d", code)
			}
			id = got
			return code == http.StatusOK
		})
		return id
	}
	var st string
	defer func() {
		if t.Failed() {
			t.Logf("the last status read:\n%s\njethook's log:\n%s", st, r.jethook.Log.String())
		}
	}()
	head := stored(first, map[string]string{"app": "503"})
	// The head's first attempt fails after the rig's reload and the
	// destination's start: under a loaded test run that takes a while.
	testkit.Eventually(t, 30*time.Second, "one key blocked", func() bool {
		st, _ = r.run(status)
		return strings.Contains(st, "1 keys blocked by a failing event")
	})
	waiting := stored(second, nil)
	eventually(t, "one key blocked with one event waiting", func() bool {
		st, _ = r.run(status)
		return strings.Contains(st, "1 keys blocked by a failing event") && strings.Contains(st, "1 events waiting behind their key")
	})
	quoted := fmt.Sprintf("%q", evilKey)
	if !strings.Contains(st, "key "+quoted) || !strings.Contains(st, "event "+head+" failing since") {
		t.Errorf("status does not list the blocked key %s with its head %s:\n%s", quoted, head, st)
	}
	show, err := r.run(events, "show", waiting)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"destination app: waiting", "order: waits behind key " + quoted, "(0 ahead of it); the head is event " + head, "destination audit: delivered"} {
		if !strings.Contains(show, want) {
			t.Errorf("events show lacks %q:\n%s", want, show)
		}
	}
	if strings.Contains(st+show, "\x1b") {
		t.Error("the key's escape character reached the terminal")
	}

	tab, _ := startChromium(t, browser)
	ctx, cancel := context.WithTimeout(tab, 45*time.Second)
	t.Cleanup(cancel)
	do, _ := browserSteps(t, ctx)
	text := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	do("log in",
		chromedp.Navigate(r.admin.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), adminToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.blocked`)))
	if got := text(`document.querySelector("table.overview").innerText`); !strings.Contains(got, "1 ordering key blocked") {
		t.Errorf("the overview's states do not say a key is blocked: %s", got)
	}
	row := text(`document.querySelector("table.blocked tbody tr").innerText`)
	if !strings.Contains(row, "<img src=x onerror=") || !strings.Contains(row, head) {
		t.Errorf("the blocked key's row does not show the key and its head %s: %q", head, row)
	}
	do("open the waiting event",
		chromedp.Navigate(r.admin.URL+"/events/"+url.PathEscape(waiting)+"?route=shop"),
		chromedp.WaitVisible(chromedp.CSS(`p.order`)))
	got := text(`document.querySelector("p.order").innerText`)
	if !strings.HasPrefix(got, "Waits behind its ordering key <img src=x onerror=") || !strings.Contains(got, "The key's head is event "+head) {
		t.Errorf("the event page does not say what the event waits behind: %q", got)
	}
	if href := text(`document.querySelector("p.order a").getAttribute("href")`); !strings.HasPrefix(href, "/events/"+url.PathEscape(head)) {
		t.Errorf("the head's link is %q", href)
	}
	if got := text(`typeof window.__pwned + " " + document.querySelectorAll("main img, main [onerror]").length`); got != "undefined 0" {
		t.Fatalf("markup from the key is in the page: %s", got)
	}
}

// checkConsole fails the test on every exception the pages threw and every
// Content-Security-Policy violation they reported, of what console read
// until its tab was closed.
func checkConsole(t *testing.T, console iter.Seq2[chromedp.ConsoleMessage, error]) {
	t.Helper()
	for m, err := range console {
		if err != nil {
			break
		}
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			t.Errorf("browser console: %s", m.Text)
		}
	}
}
