package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// transformConfig is opsConfig with a transform on audit.
var transformConfig = strings.Replace(opsConfig, `      - {name: audit, url: "BACKEND/audit", slow_start: 0s}
`, `      - name: audit
        url: "BACKEND/audit?token=t0ps3cret"
        slow_start: 0s
        transform:
          script: |
            addHandler('transform', (request, context) => {
              console.log('type', request.body.e);
              if (request.body.e === 'drop') return null;
              if (request.body.e === 'fail') $transform.fail('no e');
              request.body = {event: request.body.e, attempt: context.attempt};
              request.headers['x-audit'] = context.destination;
              return request;
            });
`, 1)

func TestTransformTestShowsWhatADestinationWouldGetForAStoredEvent(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	_, id := r.post("/hooks/shop", `{"e":1}`, nil)
	eventually(t, "the event delivered", func() bool { return r.count("/audit", id) == 1 })
	r.write(transformConfig) // not reloaded: the running jethook has no transform

	out, err := r.run(transformTest, "test", "-config", r.config, "shop", "audit", id)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"console.log: type 1\n",
		"POST " + r.backend.URL + "/audit\n", // the running destination's URL
		"Content-Type: application/json\n",
		"X-Audit: audit\n",
		"X-Webhook-Id: " + id + "\n",
		"\n{\"event\":1,\"attempt\":1}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = r.run(transformTest, "test", "-running", "shop", "audit", id)
	if err != nil || !strings.Contains(out, "audit has no transform; it gets the webhook as stored") || !strings.Contains(out, "\n{\"e\":1}\n") {
		t.Errorf("-running: %v\n%s", err, out)
	}
	if _, err := r.run(transformTest, "test", "-config", r.config, "shop", "audit", "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown event: %v", err)
	}
}

func TestTransformTestRunsOnAPayloadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(transformConfig, "BACKEND", "http://127.0.0.1:3000")), 0o600); err != nil {
		t.Fatal(err)
	}
	payload := func(body string) string {
		f := filepath.Join(dir, "payload.json")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		err := transformTest(t.Context(), nil, args, &out)
		return out.String(), err
	}
	out, err := run("test", "-config", config, "-file", payload(`{"e":"order"}`), "-query", "tenant=7", "shop", "audit")
	if err != nil || !strings.Contains(out, "POST http://127.0.0.1:3000/audit?…&tenant=7\n") || !strings.Contains(out, `{"event":"order","attempt":1}`) {
		t.Errorf("%v\n%s", err, out)
	}
	if strings.Contains(out, "t0ps3cret") {
		t.Errorf("the destination URL's token was printed:\n%s", out)
	}
	out, err = run("test", "-config", config, "-file", payload(`{"e":"drop"}`), "shop", "audit")
	if err != nil || !strings.Contains(out, "audit: the transform returned null; the event would be filtered there") {
		t.Errorf("drop: %v\n%s", err, out)
	}
	out, err = run("test", "-config", config, "-file", payload(`{"e":"fail"}`), "shop", "audit")
	if err == nil || !strings.HasPrefix(err.Error(), "transform_error: failed: no e (at routes[0].destinations[1].transform.script:4:") ||
		!strings.Contains(out, "the event would be dead-lettered there") {
		t.Errorf("fail: %v\n%s", err, out)
	}
	if _, err := run("test", "-config", config, "-file", payload(`{}`), "shop", "nope"); err == nil || !strings.Contains(err.Error(), `no destination "nope"`) {
		t.Errorf("unknown destination: %v", err)
	}
}

func TestEventsShowSaysWhatEachAttemptThroughATransformSent(t *testing.T) {
	t.Parallel()
	r := newOpsRig(t)
	r.write(transformConfig)
	if err := r.client.call(context.Background(), http.MethodPost, "/v1/reload", nil, nil, nil); err != nil {
		t.Fatalf("reload: %v", err)
	}
	// The reload restarts audit with its transform: an event posted before
	// it has may go out as stored.
	_, warm := r.post("/hooks/shop", `{"e":0}`, nil)
	eventually(t, "audit runs its transform", func() bool {
		out, err := r.run(events, "show", warm)
		return err == nil && strings.Contains(out, "  transform: ")
	})
	_, id := r.post("/hooks/shop", `{"e":1}`, nil)
	eventually(t, "the event delivered to audit", func() bool { return r.count("/audit", id) == 1 })
	sent := `{"event":1,"attempt":1}`
	sum := sha256.Sum256([]byte(sent))
	want := fmt.Sprintf("  attempt 1 sent %d bytes, body sha256 %x; script sha256:", len(sent), sum)
	var out string
	eventually(t, "audit's attempt logged", func() bool {
		var err error
		out, err = r.run(events, "show", id)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, want)
	})
	if !strings.Contains(out, " changed body; headers ") || !strings.Contains(out, "x-audit\n") {
		t.Errorf("the output does not say what the script changed:\n%s", out)
	}
	if strings.Count(out, " sent ") != 1 {
		t.Errorf("the destination without a transform has a record of what a transform sent:\n%s", out)
	}
}
