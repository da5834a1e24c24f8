package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/jethook/jethook/admin"
)

// eventsSearch runs "events search [EXPRESSION]": the events a CEL
// expression, a route, a time window, a type and a state select, printed
// as the admin API finds them, newest first, with its progress on stderr.
func eventsSearch(ctx context.Context, c *adminClient, args []string, out io.Writer) error {
	fs := flags("events search", out)
	var s admin.Search
	fs.StringVar(&s.Route, "route", "", "only events of this route")
	fs.StringVar(&s.Destination, "destination", "", "show, and filter -state on, this destination only (needs -route)")
	fs.StringVar(&s.State, "state", "", "only events in this state (at -destination, or at any destination): delivered, waiting, pending, in_flight, in_backoff (attempting: either), dead_lettered or filtered")
	fs.StringVar(&s.Type, "type", "", "only events of this type (push, invoice.paid, orders/create); invoice.* for a prefix")
	fs.StringVar(&s.Since, "since", "", "received at or after: RFC 3339 time or a duration ago (24h)")
	fs.StringVar(&s.Until, "until", "", "received before: RFC 3339 time or a duration ago")
	fs.BoolVar(&s.Oldest, "oldest", false, "oldest first (default newest first)")
	fs.IntVar(&s.Limit, "limit", 50, "events per page (1 to 1000)")
	fs.StringVar(&s.Cursor, "cursor", "", "go on from a previous page (its more: line)")
	fs.Int64Var(&s.MaxBytes, "max-bytes", 0, "bytes one page may read (default 2 GiB)")
	asJSON := fs.Bool("json", false, "print the API's lines as they come (NDJSON)")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: want: jethook events search [flags] ['EXPRESSION'] (quote the expression)", errUsage)
	}
	if len(pos) == 1 {
		s.Expr = pos[0]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/events?"+s.Values().Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	found := 0
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		if *asJSON {
			fmt.Fprintln(out, lines.Text())
		}
		var l struct {
			Event    *admin.EventSummary
			Progress *admin.SearchProgress
			End      *admin.SearchEnd
			Error    *struct{ Message string }
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			return fmt.Errorf("admin API answer: %w", err)
		}
		switch {
		case l.Error != nil:
			return fmt.Errorf("admin API: search stopped: %s", l.Error.Message)
		case l.Progress != nil:
			if c.stderr != nil {
				fmt.Fprintf(c.stderr, "searching: %s\n", scanned(*l.Progress))
			}
		case l.Event != nil && !*asJSON:
			if found == 0 {
				fmt.Fprintf(out, "%-20s  %-10s  %-24s  %-40s  %8s  %s\n", "RECEIVED", "ROUTE", "TYPE", "EVENT ID", "SIZE", "STATES")
			}
			e := l.Event
			var states []string
			for _, d := range e.Destinations {
				states = append(states, d.Destination+"="+d.State)
			}
			fmt.Fprintf(out, "%-20s  %-10s  %-24s  %-40s  %8s  %s\n", stamp(e.ReceivedAt), e.Route, dash(clip(e.Type, 24)),
				e.EventID, byteSize(int64(e.Size)), strings.Join(states, " "))
			found++
		case l.Event != nil:
			found++
		case l.End != nil:
			if *asJSON {
				return nil
			}
			if found == 0 {
				fmt.Fprintln(out, "no events found")
			}
			fmt.Fprintf(out, "%d found; %s\n", found, scanned(l.End.SearchProgress))
			switch l.End.Stopped {
			case "max_bytes":
				fmt.Fprintln(out, "stopped at the page's byte bound (-max-bytes)")
			case "deadline":
				fmt.Fprintln(out, "stopped at the page's time bound")
			}
			if l.End.NextCursor != "" {
				fmt.Fprintf(out, "more: jethook events search -cursor %s (same flags and expression)\n", l.End.NextCursor)
			}
			return nil
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	return fmt.Errorf("admin API: the search ended without its last line")
}

// scanned says how far a search has read.
func scanned(p admin.SearchProgress) string {
	s := fmt.Sprintf("scanned %d webhooks (%s)", p.Scanned, byteSize(p.Bytes))
	if p.Skipped > 0 {
		s += fmt.Sprintf(", passed over %d unread", p.Skipped)
	}
	if p.Reached != nil {
		s += ", reached " + stamp(p.Reached)
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// byteSize prints n bytes for a table: 812 B, 4.2 KiB, 1.5 GiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
