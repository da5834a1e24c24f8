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
// of free ones. Only when every connection is in a request does the new
// one wait, accepted but not yet read, until one closes; connections past
// that one wait in the kernel's accept queue.
//
// Without this, a burst of senders (or a client opening connections and
// leaving them idle) fills the bound with idle connections, and every new
// sender waits for the server's IdleTimeout.
//
// Near the bound, answers ask their clients to close their connections
// (Connection: close, Close), so that room is made without cutting a
// connection a client may be reusing at that moment.
//
// Set the server's ConnState to ConnState, serve Listen's listener, and
// wrap the handler with Close.
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

// Close wraps h: while seven eighths of the limit or more are open, each
// answer closes its connection.
func (l *ConnLimit) Close(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.crowded() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

func (l *ConnLimit) crowded() bool { return l.open.Load() >= int64(l.max-l.max/8) }

// Open is the number of connections open now.
func (l *ConnLimit) Open() int { return int(l.open.Load()) }

// admit makes room for one more connection: it reports true when there is
// room, else closes the longest idle connection, if any, and reports false.
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
	if oldest != nil {
		delete(l.idle, oldest)
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
		select {
		case <-ln.l.freed:
		case <-ln.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
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
