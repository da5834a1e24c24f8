package forward

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/policy"
)

// newTransport is the transport attempts go through: every connection it
// dials is checked against rules (egress.Rules.Control) once its address
// is resolved, so a destination's name cannot lead jethook to a refused
// address, however its DNS answers change. A nil resolver is the
// system's.
func newTransport(rules *egress.Rules, resolver *net.Resolver) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := rules.Dialer()
	d.Resolver = resolver
	t.DialContext = d.DialContext
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 1024
	// Forward the provider's Accept-Encoding (or none), not Go's own.
	t.DisableCompression = true
	return t
}

// tlsCheckEvery is how often a destination with auth.tls looks whether its
// certificate, key or CA files changed.
const tlsCheckEvery = time.Second

// tlsTransport sends a destination's attempts with its client
// certificate and CA (policy.TLS), and picks up new files within
// tlsCheckEvery of their change: a renewed certificate needs no reload.
// Files that fail to load (a certificate written before its key) leave
// the previous ones in use until they load.
type tlsTransport struct {
	base  *http.Transport
	files policy.TLS

	mu      sync.Mutex
	rt      *http.Transport
	stamps  []stamp
	checked time.Time
}

// stamp is what tells that a file changed.
type stamp struct {
	mod  time.Time
	size int64
}

// newTLSTransport loads files over base; the error names the file at
// fault.
func newTLSTransport(base *http.Transport, files policy.TLS) (*tlsTransport, error) {
	t := &tlsTransport{base: base, files: files}
	stamps, err := t.stat()
	if err != nil {
		return nil, err
	}
	if t.rt, err = t.load(); err != nil {
		return nil, err
	}
	t.stamps, t.checked = stamps, time.Now()
	return t, nil
}

// CheckTLS loads the files of every destination's auth.tls, as serve
// would, and returns what it cannot load: jethook check, serve and reload
// refuse a configuration whose certificates do not load.
func CheckTLS(cfg *policy.Config) error {
	var errs []error
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			if d.Auth == nil || d.Auth.TLS == nil {
				continue
			}
			if _, err := newTLSTransport(newTransport(nil, nil), *d.Auth.TLS); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: route %q destination %q: auth.tls: %w", cfg.File, r.Line, r.Name, d.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RoundTrip sends req with the current certificate.
func (t *tlsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.current().RoundTrip(req)
}

// current returns the transport of the latest files that loaded.
func (t *tlsTransport) current() *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < tlsCheckEvery {
		return t.rt
	}
	t.checked = time.Now()
	stamps, err := t.stat()
	if err != nil || sameStamps(stamps, t.stamps) {
		return t.rt
	}
	rt, err := t.load()
	if err != nil {
		return t.rt
	}
	t.rt.CloseIdleConnections()
	t.rt, t.stamps = rt, stamps
	return rt
}

func (t *tlsTransport) paths() []string {
	var out []string
	for _, p := range []string{t.files.Cert, t.files.Key, t.files.CA} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (t *tlsTransport) stat() ([]stamp, error) {
	var out []stamp
	for _, p := range t.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out = append(out, stamp{fi.ModTime(), fi.Size()})
	}
	return out, nil
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// load builds a transport over base with the files' certificate and CA.
func (t *tlsTransport) load() (*http.Transport, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.base.TLSClientConfig != nil {
		cfg = t.base.TLSClientConfig.Clone()
	}
	if t.files.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", t.files.Cert, t.files.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if t.files.CA != "" {
		pem, err := os.ReadFile(t.files.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no PEM certificate in it", t.files.CA)
		}
		cfg.RootCAs = pool
	}
	rt := t.base.Clone()
	rt.TLSClientConfig = cfg
	return rt, nil
}

// egressRefused is the outcome of an attempt the egress rules refused: permanent,
// since the same address will be refused again, and saying nothing of the
// backend, which was not reached.
func egressRefused(err error) (Outcome, bool) {
	re, ok := errors.AsType[*egress.RefusedError](err)
	if !ok {
		return Outcome{}, false
	}
	return Outcome{Kind: Permanent, Err: re, Reason: "egress refused", Unsent: true}, true
}
