package cli

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestHelpListsTheCommandsAndEachCommandHasItsOwnHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 0 {
			t.Errorf("jethook %v: exit %d, stderr %q", args, code, errOut.String())
		}
		for _, c := range commands() {
			if !strings.Contains(out.String(), "  "+c.name+" ") {
				t.Errorf("jethook %v does not list %q:\n%s", args, c.name, out.String())
			}
		}
	}
	help := func(t *testing.T, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 0 {
			t.Errorf("jethook %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	for _, c := range commands() {
		if got := help(t, c.name, "-h"); !strings.HasPrefix(got, "Usage: jethook "+c.name) {
			t.Errorf("jethook %s -h:\n%s", c.name, got)
		}
	}
	for _, sub := range []string{"dlq ls", "dlq show", "dlq replay", "dlq purge", "events show"} {
		args := append(strings.Fields(sub), "-h")
		if got := help(t, args...); !strings.HasPrefix(got, "Usage: jethook "+sub) || !strings.Contains(got, summaries[sub][1:]) {
			t.Errorf("jethook %s -h:\n%s", sub, got)
		}
	}
	if got := help(t, "serve", "-h"); !strings.Contains(got, "JETHOOK_RETENTION [72h]") {
		t.Errorf("jethook serve -h does not list the settings:\n%s", got)
	}
	if got := help(t, "dlq", "-h"); !strings.Contains(got, "replay  "+summaries["dlq replay"]) {
		t.Errorf("jethook dlq -h does not list its commands:\n%s", got)
	}
}

func TestVersionPrintsTheModuleVersionAndCommit(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "jethook ") ||
			!strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("jethook %v: exit %d, %q %q", args, code, out.String(), errOut.String())
		}
	}
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/jethook/jethook", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}
	if got, want := version(info), "jethook v1.2.3 (commit abc123, 2026-12-01T10:00:00Z, modified) "+runtime.Version(); got != want {
		t.Errorf("version = %q, want %q", got, want)
	}
	if got, want := version(nil), "jethook (devel) "+runtime.Version(); got != want {
		t.Errorf("version without build info = %q, want %q", got, want)
	}
}
