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
		{"a protection run names rows the table has", []string{"-scenario", "protection", "-rows", "overload,typo"}},
		{"a protection run's long outage lasts a positive time", []string{"-scenario", "protection", "-long-outage", "0s"}},
		{"a protection run's size is positive", []string{"-scenario", "protection", "-size", "0"}},
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

func TestProtectionRowsKeepsTheOrderGiven(t *testing.T) {
	t.Parallel()
	got, err := protectionRows("poison, overload")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "poison" || got[1] != "overload" {
		t.Errorf("protectionRows = %q, want [poison overload]", got)
	}
}
