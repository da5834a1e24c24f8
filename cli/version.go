package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func runVersion(_ context.Context, args []string, out io.Writer) error {
	fs := flags("version", out)
	if err := parse(fs, args); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(out, version(info))
	return nil
}

// version is "jethook VERSION (commit C, TIME[, modified]) GOVERSION" from
// the build information the Go toolchain stamps into the binary: the
// module version for `go install …@v1.2.3`, the VCS commit for a build
// from a checkout. A field the build did not record is left out.
func version(info *debug.BuildInfo) string {
	v := "(devel)"
	var commit, at, modified string
	if info != nil {
		if info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	line := "jethook " + v
	if commit != "" {
		line += " (commit " + commit
		if at != "" {
			line += ", " + at
		}
		if modified == "true" {
			line += ", modified"
		}
		line += ")"
	}
	return line + " " + runtime.Version()
}

// buildVersion is the module version the binary was built as, "(devel)"
// for a build from a checkout: the service.version of its traces.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}
