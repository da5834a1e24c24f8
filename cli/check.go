package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/jethook/jethook/policy"
)

func runCheck(_ context.Context, args []string, out io.Writer) error {
	fs := flags("check", out)
	file := fs.String("config", configDefault(), "policies file")
	if err := parse(fs, args); err != nil {
		return err
	}
	// The same settings and rules as serve: a file check passes, serve
	// starts with.
	s, err := loadSettings(nil)
	if err != nil {
		return err
	}
	s.Config = *file
	if err := applyMemoryLimit(s, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	cfg, err := loadConfig(s.resolved())
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tPATH\tMETHODS\tPROVIDER\tDESTINATION\tURL\tRETRY")
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Path, strings.Join(r.Methods, ","),
				r.Provider, d.Name, d.URL, retrySummary(r.Retry))
		}
	}
	tw.Flush()
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(out, "warning:", w)
	}
	fmt.Fprintf(out, "%s: ok, %d routes\n", cfg.File, len(cfg.Routes))
	return nil
}

func retrySummary(r policy.Retry) string {
	return fmt.Sprintf("%s/%s, %d attempts, max age %s", r.Kind, r.Jitter, r.MaxAttempts, r.MaxAge)
}

// configDefault is JETHOOK_CONFIG or policies.yaml.
func configDefault() string {
	if v := os.Getenv("JETHOOK_CONFIG"); v != "" {
		return v
	}
	return "policies.yaml"
}
