package app_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
)

// exported returns the metric families a running jethook serves on
// /metrics, by name, with their types. The app delivers a webhook, dead-
// letters one, rejects one and takes a duplicate, so that the families
// with labels have series; those only catch-up, a filter or a learned
// limit would fill are set through the app's own Metrics.
func exported(t *testing.T) map[string]string {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/gone") {
			w.WriteHeader(http.StatusGone)
		}
	}))
	t.Cleanup(backend.Close)
	jh := apptest.Start(t, parse(t, `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "${BACKEND}/app", slow_start: 0s}
      - {name: gone, url: "${BACKEND}/gone", slow_start: 0s}
`, backend.URL), app.Options{})
	a, ingress := jh.App, jh.Public
	for _, method := range []string{http.MethodPost, http.MethodPost, http.MethodGet} {
		req, _ := http.NewRequest(method, ingress.URL+"/hooks/shop", strings.NewReader(`{"n":1}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	a.Metrics.CatchUpPass("shop", "stripe", 1, 1, nil, time.Now())
	a.Metrics.CatchUpPass("shop", "stripe", 0, 0, errors.New("refused"), time.Now())
	a.Metrics.CatchUpCall("shop", "stripe")
	a.Metrics.Filtered("shop", "app")
	a.Metrics.FilterFailed("shop", "app", "no such key")
	a.Metrics.Destination("shop", "app").Limit(10)

	var families map[string]string
	testkit.Eventually(t, 10*time.Second, "the delivery and the dead letter in /metrics", func() bool {
		families = map[string]string{}
		for line := range strings.Lines(scrape(a)) {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
				families[f[2]] = f[3]
			}
		}
		_, delivered := families["jethook_delivery_age_seconds"]
		_, dead := families["jethook_dead_lettered_total"]
		return delivered && dead
	})
	return families
}

var metricName = regexp.MustCompile(`\bjethook_[a-z0-9_]+`)

// unknown returns the jethook metrics expr names that families lacks; a
// histogram's series are its name with _bucket, _sum or _count.
func unknown(expr string, families map[string]string) []string {
	var missing []string
	for _, name := range metricName.FindAllString(expr, -1) {
		if _, ok := families[name]; ok {
			continue
		}
		found := false
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == "histogram" {
				found = true
			}
		}
		if !found {
			missing = append(missing, name)
		}
	}
	return missing
}

// The Grafana dashboard and the Prometheus rules under deploy/ query only
// metrics a running jethook exports, and the dashboard is well formed:
// every panel has a query on the dashboard's data source variable, ids are
// unique, and the variables the queries use are defined.
func TestTheDashboardAndAlertRulesQueryMetricsJethookExports(t *testing.T) {
	t.Parallel()
	families := exported(t)

	raw, err := os.ReadFile("../../deploy/grafana/jethook.json")
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	}
	var dash struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int      `json:"id"`
			Type    string   `json:"type"`
			Title   string   `json:"title"`
			Targets []target `json:"targets"`
			GridPos struct{ H, W, X, Y int }
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/jethook.json: %v", err)
	}
	vars := map[string]bool{"__rate_interval": true}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		q, _ := json.Marshal(v.Query)
		if m := unknown(string(q), families); len(m) > 0 {
			t.Errorf("variable %s queries %v, which jethook does not export", v.Name, m)
		}
	}
	ids := map[int]bool{}
	queries := 0
	varUse := regexp.MustCompile(`\$\{?([A-Za-z_]+)`)
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s: data source %q, want the ${datasource} variable", p.Title, tg.RefID, tg.Datasource.UID)
			}
			if m := unknown(tg.Expr, families); len(m) > 0 {
				t.Errorf("panel %q query %s uses %v, which jethook does not export", p.Title, tg.RefID, m)
			}
			if len(metricName.FindAllString(tg.Expr, -1)) == 0 {
				t.Errorf("panel %q query %s names no jethook metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, m := range varUse.FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[m[1]] {
					t.Errorf("panel %q query %s uses $%s, which the dashboard does not define", p.Title, tg.RefID, m[1])
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("only %d queries read: the dashboard did not parse as expected", queries)
	}

	raw, err = os.ReadFile("../../deploy/prometheus/jethook-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("deploy/prometheus/jethook-rules.yaml: %v", err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			if m := unknown(r.Expr, families); len(m) > 0 {
				t.Errorf("alert %s uses %v, which jethook does not export", r.Alert, m)
			}
		}
	}
	if alerts == 0 {
		t.Error("no alert rules read")
	}
}

// promtool checks the rules and runs their unit tests, which give every
// alert the series that should raise it. CI installs promtool (Debian's
// prometheus package) and sets JETHOOK_REQUIRE_PROMTOOL so that this test
// cannot skip there.
func TestTheAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("JETHOOK_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found, and JETHOOK_REQUIRE_PROMTOOL is set")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "jethook-rules.yaml"},
		{"test", "rules", "jethook-rules_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert rule has a promtool unit test that expects it to fire:
// `promtool test rules` passes as well when an alert has no test at all.
func TestEveryAlertHasAUnitTestThatFiresIt(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for file, into := range map[string]any{"jethook-rules.yaml": &rules, "jethook-rules_test.yaml": &tests} {
		raw, err := os.ReadFile("../../deploy/prometheus/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			t.Fatalf("deploy/prometheus/%s: %v", file, err)
		}
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fired[a.Alertname] = fired[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			alerts++
			if !fired[r.Alert] {
				t.Errorf("alert %s: no test in jethook-rules_test.yaml expects it to fire", r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Error("no alert rules read")
	}
}
