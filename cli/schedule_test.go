package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestScheduleNamesItsMistakes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no route given", []string{"-config", "../policies.yaml"}, "want one route name"},
		{"an unknown route", []string{"-config", "../policies.yaml", "nope"}, `no route "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runSchedule(context.Background(), c.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestScheduleStopsAtMaxAgeWhenThatComesFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := dir + "/p.yaml"
	yaml := `
routes:
  - name: short
    path: /h
    retry: {backoff: fixed, delay: 10m, jitter: none, max_attempts: 50, max_age: 1h}
    destinations: [{name: app, url: "http://127.0.0.1:3000/"}]
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runSchedule(context.Background(), []string{"-config", file, "short"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "After attempt 7 fails, the event is dead-lettered (max_age).") {
		t.Fatalf("got:\n%s", out.String())
	}
}
