package proxy

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimit bounds the open connections of a listener served by an
// http.Server, and keeps idle keep-alive connections from locking new ones
// out. A connection that arrives at the bound takes the place of the
// connection that has been idle (between two requests) the longest, which
// is closed, as nginx reuses its keep-alive connections when it runs out
// of free ones. Until one closes, the new connection waits, accepted but
// not yet read; connections past that one wait in the kernel's accept
// queue.
//
// Without this, a burst of senders (or a client opening connections and
// leaving them idle) fills the bound with idle connections, and every new
// sender waits for the server's IdleTimeout.
//
// Only a connection idle for minIdle or more is closed: a client is
// unlikely to be sending on it at that moment (the connection would be
// reset under its request), and a busy client's pool, whose connections
// are idle for milliseconds between requests, is not churned into new
// connections as it grows past the bound.
//
// Set the server's ConnState to ConnState and serve Listen's listener.
type ConnLimit struct {
	max int

	open atomic.Int64 // changed under mu

	mu    sync.Mutex
	idle  map[*limitedConn]time.Time // connections between requests, since when
	freed chan struct{}              // a token when a connection closes
}

// NewConnLimit returns a limit of n open connections (at least 1).
func NewConnLimit(n int) *ConnLimit {
	return &ConnLimit{max: max(n, 1), idle: make(map[*limitedConn]time.Time), freed: make(chan struct{}, 1)}
}

// Listen returns ln under the limit.
func (l *ConnLimit) Listen(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l, done: make(chan struct{})}
}

// ConnState is the http.Server's ConnState hook: it follows which
// connections are idle.
func (l *ConnLimit) ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle && !lc.closed {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

// Open is the number of connections open now.
func (l *ConnLimit) Open() int { return int(l.open.Load()) }

// minIdle is how long a connection must have been idle to be closed for a
// new one.
const minIdle = time.Second

// admit makes room for one more connection: it reports true when there is
// room, else closes the longest idle connection if it has been idle for
// minIdle, and reports false.
func (l *ConnLimit) admit() bool {
	l.mu.Lock()
	if l.open.Load() < int64(l.max) {
		l.open.Add(1)
		l.mu.Unlock()
		return true
	}
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil && time.Since(since) >= minIdle {
		delete(l.idle, oldest)
	} else {
		oldest = nil
	}
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
	}
	return false
}

func (l *ConnLimit) release(c *limitedConn) {
	l.mu.Lock()
	delete(l.idle, c)
	c.closed = true
	l.open.Add(-1)
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

type limitedListener struct {
	net.Listener
	l    *ConnLimit
	once sync.Once
	done chan struct{}
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for !ln.l.admit() {
		// A connection closes, or one becomes idle long enough.
		wait := time.NewTimer(minIdle / 10)
		select {
		case <-ln.l.freed:
		case <-wait.C:
		case <-ln.done:
			wait.Stop()
			_ = c.Close()
			return nil, net.ErrClosed
		}
		wait.Stop()
	}
	return &limitedConn{Conn: c, l: ln.l}, nil
}

func (ln *limitedListener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

type limitedConn struct {
	net.Conn
	l      *ConnLimit
	once   sync.Once
	closed bool // guarded by l.mu
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
