package cli

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func TestBenchRefusesSettingsItCannotRunBeforeRunningAnything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"an unknown scenario is refused", []string{"-scenario", "retention,soak"}},
		{"a retention run keeps at least one webhook", []string{"-scenario", "retention", "-retained", "0"}},
		{"a retention run settles for a positive time", []string{"-scenario", "retention", "-settle", "0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := runBench(context.Background(), tc.args, &out); !errors.Is(err, errUsage) {
				t.Errorf("runBench(%q) = %v, want a usage error", tc.args, err)
			}
		})
	}
}

func TestScenariosTakesRetentionBesideTheOthers(t *testing.T) {
	t.Parallel()
	want, err := scenarios("ingest, retention")
	if err != nil {
		t.Fatal(err)
	}
	if !want["ingest"] || !want["retention"] || len(want) != 2 {
		t.Errorf("scenarios(%q) = %v, want ingest and retention", "ingest, retention", want)
	}
}
