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
	"github.com/jethook/jethook/proxy/provider"
)

func runCheck(_ context.Context, args []string, out io.Writer) error {
	fs := flags("check", out)
	file := fs.String("config", configDefault(), "policies file")
	list := fs.Bool("providers", false, "list the providers jethook verifies, and exit")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *list {
		listProviders(out)
		return nil
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
			url := policy.RedactURL(d.URL)
			if d.Pull != nil {
				url = "(pull: POST /v1/pull/" + r.Name + "/" + d.Name + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Path, strings.Join(r.Methods, ","),
				r.Provider, d.Name, url, retrySummary(r.Retry))
		}
	}
	tw.Flush()
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(out, "warning:", w)
	}
	fmt.Fprintf(out, "%s: ok, %d routes\n", cfg.File, len(cfg.Routes))
	return nil
}

// listProviders prints every provider preset: what it verifies, the event
// id it dedups on, its handshake, and the keys it needs besides a secret.
func listProviders(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tDEDUPS ON\tHANDSHAKE\tTOLERANCE\tNEEDS\tVERIFIES")
	for _, p := range provider.Presets() {
		var needs []string
		if p.Name != provider.NameNone {
			needs = append(needs, "secret")
		}
		if p.PublicURL {
			needs = append(needs, "public_url")
		}
		if p.VerifyToken {
			needs = append(needs, "verify_token")
		}
		tol := "-"
		if p.Tolerance > 0 {
			tol = p.Tolerance.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, orDash(p.ID), orDash(p.Handshake), tol, orDash(strings.Join(needs, ", ")), p.Verifies)
	}
	tw.Flush()
	fmt.Fprintf(out, "%d providers; see docs/providers.md\n", len(provider.Presets()))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func retrySummary(r policy.Retry) string {
	return fmt.Sprintf("%s/%s, %d attempts, max age %s", r.Kind, r.Jitter, r.MaxAttempts, brief(r.MaxAge))
}

// configDefault is JETHOOK_CONFIG or policies.yaml.
func configDefault() string {
	if v := os.Getenv("JETHOOK_CONFIG"); v != "" {
		return v
	}
	return "policies.yaml"
}
