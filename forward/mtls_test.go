package forward_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/apptest"
	"github.com/jethook/jethook/store"
)

// authority is a CA made for one test.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for cn and its key, PEM; a server
// certificate is for 127.0.0.1.
func (a *authority) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A backend that requires a client certificate from its own CA, with a
// server certificate from another CA that the system does not trust.
func TestMutualTLSPresentsTheClientCertificateAndPicksUpARenewedOne(t *testing.T) {
	t.Parallel()
	clientCA, serverCA := newAuthority(t), newAuthority(t)
	srvCert, srvKey := serverCA.issue(t, "backend", true)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	var mu sync.Mutex
	var names []string // the client certificate's name, by delivery
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names = append(names, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
	}))
	b.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes of nocert
	b.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	b.StartTLS()
	t.Cleanup(b.Close)
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}

	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"), filepath.Join(dir, "ca.pem")
	c, k := clientCA.issue(t, "jethook-1", false)
	writeFile(t, certFile, c)
	writeFile(t, keyFile, k)
	writeFile(t, caFile, serverCA.pem)
	yaml := fastRetry + `      - {name: nocert, url: "${BACKEND}/hook", auth: {tls: {ca: "${CA}"}}}
`
	yaml = edit(t, yaml, `{name: app, url: "${BACKEND}/hook"}`, `{name: app, url: "${BACKEND}/hook", auth: {tls: {cert: "${CERT}", key: "${KEY}", ca: "${CA}"}}}`)
	env := map[string]string{"BACKEND": b.URL, "CERT": certFile, "KEY": keyFile, "CA": caFile}
	r := newRig(t, apptest.Config(t, yaml, env), store.Options{})

	id := r.send(nil, `{"n":1}`)
	eventually(t, "a delivery", func() bool { return len(delivered()) == 1 })
	if got := delivered()[0]; got != "jethook-1" {
		t.Errorf("client certificate %q", got)
	}
	// Without a client certificate the same backend refuses: the test
	// sees the certificate make the difference.
	eventually(t, "the nocert attempt logged", func() bool {
		for _, a := range r.attemptLog(id) {
			if a.Destination == "nocert" {
				return true
			}
		}
		return false
	})
	for _, a := range r.attemptLog(id) {
		if a.Destination == "nocert" && (a.Outcome != "transient" || !strings.Contains(a.Error, "certificate")) {
			t.Errorf("nocert attempt: outcome %q, error %q", a.Outcome, a.Error)
		}
	}

	// The certificate is renewed on disk: new attempts present it, with
	// no reload.
	c, k = clientCA.issue(t, "jethook-2", false)
	writeFile(t, keyFile, k)
	writeFile(t, certFile, c)
	sent := 1
	eventually(t, "a delivery with the renewed certificate", func() bool {
		got := delivered()
		if len(got) < sent {
			return false
		}
		if got[len(got)-1] == "jethook-2" {
			return true
		}
		sent++
		r.send(nil, fmt.Sprintf(`{"n":%d}`, sent))
		return false
	})
}
