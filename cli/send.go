package cli

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
)

// sendTimeout bounds one request of `jethook send`, answer included.
const sendTimeout = 30 * time.Second

// maxAnswer is the most of jethook's answer `send` prints.
const maxAnswer = 1 << 20

func runSend(ctx context.Context, args []string, out io.Writer) error {
	return send(ctx, args, os.Stdin, out)
}

// send signs a payload as a route's provider would and posts it to a
// running jethook, like `stripe trigger`. The payload comes from -file, or
// from stdin when -file is "-" (the default).
func send(ctx context.Context, args []string, stdin io.Reader, out io.Writer) error {
	fs := flags("send", out)
	file := fs.String("file", "-", "payload file; - reads stdin")
	base := fs.String("url", listenURL(os.Getenv("JETHOOK_LISTEN")), "jethook's base URL; the route's path is appended")
	config := fs.String("config", configDefault(), "policies file")
	secret := fs.String("secret", "", "sign with this secret instead of the route's first one")
	event := fs.String("event", "", "the event header's value where the sender has one: github X-GitHub-Event (default ping), shopify X-Shopify-Topic (default orders/create), gitlab X-Gitlab-Event, …")
	var extra headerList
	fs.Var(&extra, "header", "extra request header `Name: value`, repeatable; an id header set here is kept")
	names, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return fmt.Errorf("%w: want one route name: jethook send ROUTE [-file payload.json]", errUsage)
	}
	target, err := url.Parse(*base)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return fmt.Errorf("%w: -url %q is not an http or https URL", errUsage, *base)
	}
	cfg, err := policy.Load(*config)
	if err != nil {
		return err
	}
	r, ok := cfg.Route(names[0])
	if !ok {
		return fmt.Errorf("%w: %s has no route %q", errUsage, cfg.File, names[0])
	}

	info, _ := provider.Lookup(cmp.Or(r.Provider, provider.NameNone))
	if *event != "" && info.Sample.EventHeader == "" {
		return fmt.Errorf("%w: -event applies to routes whose sender names its event in a header (%s); route %q is %s",
			errUsage, strings.Join(eventPresets(), ", "), r.Name, r.Provider)
	}
	h := http.Header{}
	for _, kv := range extra {
		h.Add(kv[0], kv[1])
	}

	var body []byte
	if *file == "-" {
		body, err = io.ReadAll(stdin)
	} else {
		body, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	method := http.MethodPost
	if !slices.Contains(r.Methods, method) {
		method = r.Methods[0]
	}
	preq, err := info.Sample.Request(method, r.Path, body, *event, h)
	if err != nil {
		return fmt.Errorf("%w: route %q: %w", errUsage, r.Name, err)
	}
	if err := sign(preq, r, *secret); err != nil {
		return fmt.Errorf("route %q: %w", r.Name, err)
	}
	body = preq.Body
	to := strings.TrimRight(target.String(), "/") + r.Path
	if preq.URL.RawQuery != "" {
		to += "?" + preq.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, to, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = preq.Header
	resp, err := (&http.Client{Timeout: sendTimeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, to, err)
	}
	fmt.Fprintf(out, "%s %s: %s\n", method, to, resp.Status)
	if len(answer) > 0 {
		out.Write(answer)
		if answer[len(answer)-1] != '\n' {
			fmt.Fprintln(out)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &shownError{fmt.Errorf("%s %s: %s", method, to, resp.Status)} // printed above
	}
	return nil
}

// sign sets the headers r's provider would send for req's body (and
// rewrites the body of senders that sign inside it), signed with secret or
// else the route's first secret, at the current time.
func sign(req *provider.Request, r *policy.Route, secret string) error {
	if secret == "" && len(r.Secrets) > 0 {
		secret = r.Secrets[0]
	}
	if secret == "" && r.Provider != provider.NameNone {
		return fmt.Errorf("%w: provider %s needs a secret and the route has none; pass -secret", errUsage, r.Provider)
	}
	p, err := provider.New(r.ProviderConfig())
	if err != nil {
		return err
	}
	if err := p.Sign(req, secret, time.Now()); err != nil {
		if errors.Is(err, provider.ErrNoSigning) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	return nil
}

// eventPresets are the presets whose sender names its event in a header.
func eventPresets() []string {
	var out []string
	for _, p := range provider.Presets() {
		if p.Sample.EventHeader != "" {
			out = append(out, p.Name)
		}
	}
	return out
}

// listenURL is the base URL of a jethook listening on listen (JETHOOK_LISTEN,
// default ":8080"): its host when it names one, else 127.0.0.1.
func listenURL(listen string) string {
	if listen == "" {
		listen = ":8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://127.0.0.1:8080"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// headerList collects repeated -header 'Name: value' flags.
type headerList [][2]string

func (l *headerList) String() string { return fmt.Sprint([][2]string(*l)) }

func (l *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return errors.New("want 'Name: value'")
	}
	*l = append(*l, [2]string{name, strings.TrimSpace(value)})
	return nil
}
