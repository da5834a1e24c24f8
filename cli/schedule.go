package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jethook/jethook/policy"
)

func runSchedule(_ context.Context, args []string, out io.Writer) error {
	fs := flags("schedule", out)
	file := fs.String("config", configDefault(), "policies file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one route name: jethook schedule ROUTE", errUsage)
	}
	cfg, err := policy.Load(*file)
	if err != nil {
		return err
	}
	r, ok := cfg.Route(fs.Arg(0))
	if !ok {
		return fmt.Errorf("%w: %s has no route %q", errUsage, cfg.File, fs.Arg(0))
	}
	printSchedule(out, r)
	return nil
}

func printSchedule(out io.Writer, r *policy.Route) {
	rt := r.Retry
	fmt.Fprintf(out, "route %s: %s backoff, %s jitter, at most %d attempts within %s\n\n",
		r.Name, rt.Kind, rt.Jitter, rt.MaxAttempts, short(rt.MaxAge))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ATTEMPT\tWAIT BEFORE IT\tSINCE RECEIVED\t")
	fmt.Fprintln(tw, "1\t0s\t0s\t")
	steps := rt.Schedule()
	for _, s := range steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t\n", s.Attempt+1, span(s.Min, s.Max), span(s.CumMin, s.CumMax))
	}
	tw.Flush()
	last := 1
	if len(steps) > 0 {
		last = steps[len(steps)-1].Attempt + 1
	}
	reason := "max_attempts"
	if last < rt.MaxAttempts {
		reason = "max_age"
	}
	fmt.Fprintf(out, "\nAfter attempt %d fails, the event is dead-lettered (%s).\n", last, reason)
}

func span(lo, hi time.Duration) string {
	if lo == hi {
		return short(lo)
	}
	return short(lo) + " – " + short(hi)
}

// short prints a duration rounded for people: 1.5s, 4m16s, 2h8m, 3d4h.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 24*time.Hour:
		s := d.Round(time.Second).String()
		return trimZero(s)
	default:
		days := d / (24 * time.Hour)
		rest := (d % (24 * time.Hour)).Round(time.Minute)
		if rest == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%s", days, trimZero(rest.String()))
	}
}

func trimZero(s string) string {
	for _, suf := range []string{"m0s", "h0m"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			s = s[:len(s)-len(suf)+1]
		}
	}
	return s
}
