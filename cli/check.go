package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
)

func runCheck(ctx context.Context, args []string, out io.Writer) error {
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
	rules, err := s.egress()
	if err != nil {
		return err
	}
	if err := checkResolved(ctx, rules, cfg); err != nil {
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

// resolveWait bounds the lookups of checkResolved, all names together.
const resolveWait = 3 * time.Second

// checkResolved resolves the host name of every destination URL once and
// refuses a name that resolves to an address the egress rules refuse.
// serve checks each connection's address instead, so this only tells
// early: a name that does not resolve now is not an error here.
func checkResolved(ctx context.Context, rules *egress.Rules, cfg *policy.Config) error {
	ctx, cancel := context.WithTimeout(ctx, resolveWait)
	defer cancel()
	type lookup struct {
		at   string
		key  string
		host string
		err  error
	}
	var lookups []*lookup
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			for key, raw := range d.URLs() {
				u, err := url.Parse(raw)
				if err != nil || u.Hostname() == "" {
					continue
				}
				if _, err := netip.ParseAddr(u.Hostname()); err == nil {
					continue // checked by app.Check
				}
				lookups = append(lookups, &lookup{at: fmt.Sprintf("%s:%d: route %q destination %q", cfg.File, r.Line, r.Name, d.Name), key: key, host: u.Hostname()})
			}
		}
	}
	var wg sync.WaitGroup
	for _, l := range lookups {
		wg.Go(func() {
			addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", l.host)
			if err != nil {
				return
			}
			for _, a := range addrs {
				if err := rules.Check(a); err != nil {
					l.err = fmt.Errorf("%s: %s: %s resolves to %s: %w", l.at, l.key, l.host, a, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var errs []error
	for _, l := range lookups {
		if l.err != nil {
			errs = append(errs, l.err)
		}
	}
	return errors.Join(errs...)
}
