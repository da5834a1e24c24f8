package policy

import (
	"strings"
	"testing"
	"time"
)

const alertsRoutes = `
routes:
  - name: shop
    path: /hooks/shop
    destinations:
      - {name: app, url: "http://127.0.0.1:3000/hook"}
`

func TestAlertsBlock(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"ALERT_WEBHOOK_URL": "https://hooks.slack.example/services/T0/B0/s3cr3t"})
	for _, tc := range []struct {
		name, yaml string
		want       *Alerts
	}{
		{"is absent unless configured", "", nil},
		{"takes the URL from the environment and defaults the rest",
			// Quoted: in a flow mapping a bare ${...} is YAML syntax.
			`alerts: {url: "${ALERT_WEBHOOK_URL}", batch: 1m, max_per_hour: 30}` + "\n",
			&Alerts{URL: "https://hooks.slack.example/services/T0/B0/s3cr3t", Batch: time.Minute, MaxPerHour: 30, Headroom: 0.10}},
		{"takes batch, max_per_hour and headroom",
			"alerts:\n  url: http://chat.internal/hook\n  batch: 5m\n  max_per_hour: 4\n  headroom: 25%\n",
			&Alerts{URL: "http://chat.internal/hook", Batch: 5 * time.Minute, MaxPerHour: 4, Headroom: 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("policies.yaml", []byte(tc.yaml+alertsRoutes), vars)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && cfg.Alerts != nil:
				t.Errorf("Alerts = %+v, want nil", cfg.Alerts)
			case tc.want != nil && (cfg.Alerts == nil || *cfg.Alerts != *tc.want):
				t.Errorf("Alerts = %+v, want %+v", cfg.Alerts, tc.want)
			}
		})
	}
}

func TestAlertsErrorsNameLineAndKeyButNeverTheURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"an unknown key", "alerts:\n  url: https://chat.example/h\n  channel: ops\n", "policies.yaml:3: alerts.channel: unknown key \"channel\""},
		{"a missing url", "alerts:\n  batch: 1m\n", "policies.yaml:2: alerts.url: missing"},
		{"a url that is not http", "alerts:\n  url: ftp://chat.example/s3cr3t\n", "policies.yaml:2: alerts.url: must be an absolute http or https URL with a host"},
		{"a zero batch", "alerts:\n  url: https://chat.example/h\n  batch: 0s\n", "policies.yaml:3: alerts.batch: must be greater than 0"},
		{"a zero hourly limit", "alerts:\n  url: https://chat.example/h\n  max_per_hour: 0\n", "policies.yaml:3: alerts.max_per_hour: must be at least 1, got 0"},
		{"an unset variable", "alerts:\n  url: ${ALERT_WEBHOOK_URL}\n", "policies.yaml:2: alerts.url:"},
		{"a headroom without a percent sign", "alerts:\n  url: https://chat.example/h\n  headroom: 0.1\n", `policies.yaml:3: alerts.headroom: want a percentage above 0% and below 100%, like "10%", got "0.1"`},
		{"a headroom of 100%", "alerts:\n  url: https://chat.example/h\n  headroom: 100%\n", "policies.yaml:3: alerts.headroom: want a percentage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("policies.yaml", []byte(tc.yaml+alertsRoutes), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q shows the alert URL", err)
			}
		})
	}
}
