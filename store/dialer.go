package store

import (
	"net"
	"sync"
	"time"
)

// dialer dials an external NATS server for nats.go and keeps the
// connection, so that the health monitor can close it under the client
// when it stalls. nats.go writes to the socket while holding its
// connection's lock, with a deadline of nats.FlusherTimeout: against a
// frozen server every publish, ack and ping queues behind that write, and
// a write that timed out having sent nothing leaves the connection open
// for the next one to block on. Closing the socket fails them all at once
// and starts a reconnect.
type dialer struct {
	net.Dialer

	mu   sync.Mutex
	conn net.Conn
}

func newDialer(timeout time.Duration) *dialer {
	return &dialer{Dialer: net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}}
}

// Dial is nats.CustomDialer's.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	c, err := d.Dialer.Dial(network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conn = c
	d.mu.Unlock()
	return c, nil
}

// breakConn closes the connection last dialed; it reports whether there
// was one (never with the embedded server, which is not dialed).
func (d *dialer) breakConn() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	c := d.conn
	d.conn = nil
	d.mu.Unlock()
	if c == nil {
		return false
	}
	_ = c.Close()
	return true
}
