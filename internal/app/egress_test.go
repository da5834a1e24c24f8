package app_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/internal/testkit"
)

// Alert notices go where the policies file says, so they are held to the
// egress rules like deliveries: an alert URL on the metadata address is
// refused at the connection.
func TestAnAlertURLOnAMetadataAddressIsRefused(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound) // a dead letter at once, which alerts
	}))
	t.Cleanup(backend.Close)
	cfg := parse(t, oneRoute+"alerts: {url: \"http://169.254.169.254/latest/meta-data/\", batch: 100ms}\n", backend.URL)
	logs := &testkit.LogBuffer{}
	jh := apptest.Start(t, cfg, app.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	ingress := jh.Public
	resp, err := http.Post(ingress.URL+"/hooks/shop", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, "the alert refused", func() bool {
		return strings.Contains(logs.String(), `"msg":"alert not sent","err":"dial tcp 169.254.169.254:80: egress refused: 169.254.169.254 is in 169.254.0.0/16`)
	})
}
