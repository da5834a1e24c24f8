package cli

import (
	"bytes"
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
	"github.com/jethook/jethook/proxy/provider"
)

// Headers a provider sends besides its signature, which `send` fills from
// -event so the backend sees a realistic request.
const (
	headerGitHubEvent  = "X-GitHub-Event"
	headerShopifyTopic = "X-Shopify-Topic"
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
	event := fs.String("event", "", "github: X-GitHub-Event (default ping); shopify: X-Shopify-Topic (default orders/create)")
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

	h := http.Header{}
	for _, kv := range extra {
		h.Add(kv[0], kv[1])
	}
	switch r.Provider {
	case provider.NameGitHub:
		setEvent(h, headerGitHubEvent, *event, "ping")
	case provider.NameShopify:
		setEvent(h, headerShopifyTopic, *event, "orders/create")
	default:
		if *event != "" {
			return fmt.Errorf("%w: -event applies to github and shopify routes; route %q is %s", errUsage, r.Name, r.Provider)
		}
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
	if err := sign(h, r, body, *secret); err != nil {
		return fmt.Errorf("route %q: %w", r.Name, err)
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", contentType(r.Provider, body))
	}

	method := http.MethodPost
	if !slices.Contains(r.Methods, method) {
		method = r.Methods[0]
	}
	to := strings.TrimRight(target.String(), "/") + r.Path
	req, err := http.NewRequestWithContext(ctx, method, to, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
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

// sign sets the headers r's provider would send for body, signed with
// secret or else the route's first secret, at the current time.
func sign(h http.Header, r *policy.Route, body []byte, secret string) error {
	if secret == "" && len(r.Secrets) > 0 {
		secret = r.Secrets[0]
	}
	if secret == "" && r.Provider != provider.NameNone {
		return fmt.Errorf("%w: provider %s needs a secret and the route has none; pass -secret", errUsage, r.Provider)
	}
	p, err := provider.New(provider.Config{Name: r.Provider, Secrets: []string{secret}, HMAC: provider.HMAC(r.HMAC)})
	if err != nil {
		return err
	}
	return p.Sign(h, body, secret, time.Now())
}

// setEvent sets header to event, or to def when neither event nor an
// earlier -header gave it a value.
func setEvent(h http.Header, header, event, def string) {
	switch {
	case event != "":
		h.Set(header, event)
	case h.Get(header) == "":
		h.Set(header, def)
	}
}

// contentType is JSON, except for a Slack body that is not a JSON object:
// slash commands and interactivity payloads are form-encoded.
func contentType(providerName string, body []byte) string {
	if providerName == provider.NameSlack && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return "application/x-www-form-urlencoded"
	}
	return "application/json"
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
