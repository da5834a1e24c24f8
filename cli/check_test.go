package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestCheckListsTheShippedRoutesAndWarnsAboutUnverifiedOnes(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := runCheck(context.Background(), []string{"-config", "../policies.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example", "/hooks/example", "http://127.0.0.1:3000/webhooks/example",
		"warning:", "provider none", "ok, 1 routes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The README's example of a config error, reproduced.
func TestCheckReportsAConfigMistakeWithFileLineAndKey(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/broken.yaml"
	yaml := "defaults:\n  timeout: 10s\nroutes:\n  - name: example\n    path: /hooks/example\n" +
		"    destinations: [{name: app, url: \"http://127.0.0.1:3000/\"}]\n    retires: 3\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runCheck(context.Background(), []string{"-config", file}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `broken.yaml:7: routes[0].retires: unknown key "retires"`) {
		t.Fatalf("err = %v", err)
	}
}
