// Package cli holds jethook's subcommands, one per file. It reads process
// settings from the environment, checks the configuration, runs the
// listeners around the application internal/app assembles, and prints;
// the logic it runs lives in the other packages.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// errUsage marks a command-line mistake; Main exits 2 for it.
var errUsage = errors.New("usage")

// shownError is a failure the command has already printed: Main exits 1
// without printing it again.
type shownError struct{ err error }

func (e *shownError) Error() string { return e.err.Error() }
func (e *shownError) Unwrap() error { return e.err }

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, out io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the proxy (the default)", runServe},
		{"check", "validate policies.yaml and list its routes", runCheck},
		{"schedule", "print the retry schedule of a route", runSchedule},
		{"simulate", "replay an outage against a route's retry policy and limits", runSimulate},
		{"send", "sign a payload as a route's provider would and post it to jethook", runSend},
		{"status", "show each destination's backlog, dead letters and breaker (admin API)", runStatus},
		{"probe", "exit 0 if the jethook beside it is ready (or live): for exec probes and HEALTHCHECK", runProbe},
		{"events", "find events and where they are, and resend them: events show ID|search|resend ID (admin API)", runEvents},
		{"dlq", "list, show, replay or purge dead letters: dlq ls|show|replay|purge (admin API)", runDLQ},
		{"transform", "try a destination's transform on a stored event or a file: transform test", runTransform},
		{"listen", "deliver the webhooks of a remote jethook's pull destination to a local URL", runListen},
		{"echo", "run a backend that prints what it receives (for trying jethook out)", runEcho},
		{"bench", "measure ingest and delivery against a bare baseline", runBench},
		{"version", "print jethook's version, commit and Go version", runVersion},
	}
}

// synopses are the arguments each command and subcommand takes besides
// its flags, for its -h.
var synopses = map[string]string{
	"schedule":       "ROUTE",
	"send":           "ROUTE [-file payload.json]",
	"probe":          "[ready|live]",
	"events show":    "EVENT_ID",
	"events search":  "['EXPRESSION']",
	"events resend":  "EVENT_ID",
	"dlq show":       "SEQ",
	"transform test": "ROUTE DESTINATION (EVENT_ID | -file payload.json)",
	"listen":         "ROUTE -from URL -to URL -destination NAME",
}

// summaries say what the subcommands of dlq and events do; commands()
// says it for the others.
var summaries = map[string]string{
	"dlq ls":         "list dead letters, a page at a time",
	"dlq show":       "show one dead letter: its request, headers, body and why it failed",
	"dlq replay":     "deliver dead letters again, by -seq or every one a query selects",
	"dlq purge":      "delete dead letters, by -seq or every one a query selects",
	"events show":    "show when an event came in and where it stands at each destination",
	"events search":  "find events by a CEL expression over headers and body, route, time, type and state",
	"events resend":  "deliver an event again now, to one destination or all of its route, or retry it now if it waits in backoff",
	"transform test": "print the request a destination's transform makes of a stored event (admin API) or a payload file",
}

// Main runs the subcommand named by args[0] (serve when there is none) and
// returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	tuneGC()
	name := "serve"
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		name = "help" // `jethook -h` lists the commands; `jethook serve -h` shows serve's flags
	case len(args) == 1 && (args[0] == "-version" || args[0] == "--version"):
		name, args = "version", nil
	case len(args) > 0 && args[0] != "" && args[0][0] != '-':
		name, args = args[0], args[1:]
	}
	if name == "help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args, stdout)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, new(*shownError)):
			return 1
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "jethook %s: %v\n", name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "jethook %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "jethook: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// gcPercent is jethook's GOGC unless the environment sets one. Every
// webhook allocates its body and headers a few times over; a larger heap
// target cut CPU per webhook by 10–15 % in `jethook bench`, and the live
// heap is small (payloads live in JetStream, not in memory). GOMEMLIMIT
// still caps it.
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: jethook [command] [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\n`jethook COMMAND -h` shows a command's flags. Settings come from JETHOOK_*")
	fmt.Fprintln(w, "environment variables: `jethook serve -h` lists them.")
}

// flags returns a flag set whose errors go to out and whose parse errors
// are usage errors. Its -h says what the command does, its arguments and
// its flags.
func flags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("jethook "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { commandUsage(fs, name) }
	return fs
}

func commandUsage(fs *flag.FlagSet, name string) {
	w := fs.Output()
	line := "Usage: jethook " + name
	if a := synopses[name]; a != "" {
		line += " " + a
	}
	nflags := 0
	fs.VisitAll(func(*flag.Flag) { nflags++ })
	if nflags > 0 {
		line += " [flags]"
	}
	fmt.Fprintln(w, line)
	summary := summaries[name]
	for _, c := range commands() {
		if c.name == name {
			summary = c.usage
		}
	}
	if summary != "" {
		fmt.Fprintf(w, "\n%s%s.\n", strings.ToUpper(summary[:1]), summary[1:])
	}
	if nflags > 0 {
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// parseAll parses flags placed before, between or after positional
// arguments (jethook send ROUTE -file x), and returns the positional ones.
func parseAll(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
