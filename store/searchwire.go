package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// wire is a link to the embedded server that speaks the few lines of the
// NATS client protocol a search needs (https://docs.nats.io/reference/reference-protocols/nats-protocol)
// over an in-process connection, and leaves each message's headers as
// sent until the scan asks for them. nats.go decodes every message's
// headers into a map and copies it on arrival; a search reads hundreds of
// thousands of messages and, for most, three headers: this halves what
// the client side of a scan costs.
type wire struct {
	conn  net.Conn
	in    *arrivals
	r     *bufio.Reader // of in
	sid   int           // the inbox's subscription
	inbox string
	line  []byte // the last control line, copied
	buf   []byte // the last message's headers and data
	m     scanMsg
	stop  func() bool // ends the watch on the search's context
}

// wireTimeout bounds the handshake.
const wireTimeout = 5 * time.Second

// dialWire connects to srv in process, with token if the server wants
// one. A read blocked when ctx ends fails at once.
func dialWire(ctx context.Context, srv *server.Server, token string) (*wire, error) {
	conn, err := srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	w := &wire{conn: conn, in: arrive(conn), r: readers.Get().(*bufio.Reader)}
	w.r.Reset(w.in)
	w.stop = context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	err = w.handshake(token)
	if err == nil {
		err = ctx.Err() // the handshake cleared a deadline set for it
	}
	if err != nil {
		w.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return w, nil
}

func (w *wire) handshake(token string) error {
	_ = w.conn.SetDeadline(time.Now().Add(wireTimeout))
	line, err := w.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("INFO ")) {
		return fmt.Errorf("the server began with %.20q, not INFO", line)
	}
	connect, err := json.Marshal(struct {
		Verbose      bool   `json:"verbose"`
		Pedantic     bool   `json:"pedantic"`
		Headers      bool   `json:"headers"`
		NoResponders bool   `json:"no_responders"`
		Protocol     int    `json:"protocol"`
		Name         string `json:"name"`
		Lang         string `json:"lang"`
		Token        string `json:"auth_token,omitempty"`
	}{Headers: true, NoResponders: true, Protocol: 1, Name: "jethook search", Lang: "go", Token: token})
	if err != nil {
		return err
	}
	if _, err := w.conn.Write(append(append([]byte("CONNECT "), connect...), "\r\nPING\r\n"...)); err != nil {
		return err
	}
	for {
		line, err := w.r.ReadSlice('\n')
		switch {
		case err != nil:
			return err
		case bytes.HasPrefix(line, []byte("PONG")):
			return w.conn.SetDeadline(time.Time{})
		case bytes.HasPrefix(line, []byte("-ERR")):
			return fmt.Errorf("the server refused the connection: %s", bytes.TrimSpace(line[4:]))
		}
	}
}

func (w *wire) listen() (string, error) {
	if w.sid > 0 {
		if _, err := fmt.Fprintf(w.conn, "UNSUB %d\r\n", w.sid); err != nil {
			return "", err
		}
	}
	w.sid++
	w.inbox = nats.NewInbox()
	if _, err := fmt.Fprintf(w.conn, "SUB %s %d\r\n", w.inbox, w.sid); err != nil {
		return "", err
	}
	return w.inbox, nil
}

func (w *wire) publish(subject, reply string, data []byte) error {
	b := make([]byte, 0, len(subject)+len(reply)+len(data)+32)
	b = append(append(append(append(b, "PUB "...), subject...), ' '), reply...)
	b = append(strconv.AppendInt(append(b, ' '), int64(len(data)), 10), "\r\n"...)
	b = append(append(b, data...), "\r\n"...)
	_, err := w.conn.Write(b)
	return err
}

// next reads until a message to the current inbox, answering the
// server's pings on the way.
func (w *wire) next(ctx context.Context) (*scanMsg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // what is buffered is not read
	}
	for {
		line, err := w.r.ReadSlice('\n')
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("HMSG ")), bytes.HasPrefix(line, []byte("MSG ")):
			ok, err := w.message(line)
			if err != nil {
				return nil, err
			}
			if ok {
				return &w.m, nil
			}
		case bytes.HasPrefix(line, []byte("PING")):
			if _, err := w.conn.Write([]byte("PONG\r\n")); err != nil {
				return nil, err
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			return nil, fmt.Errorf("the server sent an error: %s", bytes.TrimSpace(line[4:]))
		}
		// +OK, PONG and INFO need nothing.
	}
}

// message reads the message whose control line is line, HMSG <subject>
// <sid> [reply] <header bytes> <total bytes> or MSG <subject> <sid>
// [reply] <bytes>, and keeps it if it is to the current inbox.
func (w *wire) message(line []byte) (bool, error) {
	w.line = append(w.line[:0], bytes.TrimRight(line, "\r\n")...)
	hmsg := w.line[0] == 'H'
	var f [6][]byte
	n := 0
	for rest := w.line; len(rest) > 0 && n < len(f); n++ {
		var tok []byte
		tok, rest, _ = bytes.Cut(rest, []byte(" "))
		f[n] = tok
	}
	var subject, sid, reply, hlen, total []byte
	switch {
	case hmsg && n == 6:
		subject, sid, reply, hlen, total = f[1], f[2], f[3], f[4], f[5]
	case hmsg && n == 5:
		subject, sid, hlen, total = f[1], f[2], f[3], f[4]
	case !hmsg && n == 5:
		subject, sid, reply, total = f[1], f[2], f[3], f[4]
	case !hmsg && n == 4:
		subject, sid, total = f[1], f[2], f[3]
	default:
		return false, fmt.Errorf("the server sent %.40q", w.line)
	}
	size, err1 := strconv.Atoi(string(total))
	hsize := 0
	var err2 error
	if hmsg {
		hsize, err2 = strconv.Atoi(string(hlen))
	}
	if err1 != nil || err2 != nil || size < hsize || hsize < 0 {
		return false, fmt.Errorf("the server sent %.40q", w.line)
	}
	if cap(w.buf) < size+2 {
		w.buf = make([]byte, size+2)
	}
	w.buf = w.buf[:size+2]
	if _, err := io.ReadFull(w.r, w.buf); err != nil {
		return false, err
	}
	if id, err := strconv.Atoi(string(sid)); err != nil || id != w.sid {
		return false, nil // to an inbox the scan has left
	}
	if w.m.subject != string(subject) {
		w.m.subject = string(subject)
	}
	// The reply is read in place: it is valid, as the message is, until
	// the next call (link.next).
	w.m.reply = unsafe.String(unsafe.SliceData(reply), len(reply))
	w.m.data, w.m.raw, w.m.h = w.buf[hsize:size], nil, nil
	if hsize > 0 {
		w.m.raw = w.buf[:hsize]
	}
	w.m.size = size + len(subject) + len(reply)
	return true, nil
}

func (w *wire) close() {
	w.stop()
	_ = w.conn.Close()
	close(w.in.done)
	w.r.Reset(nil)
	readers.Put(w.r)
	w.r = nil
}

// arrivals is what the server sends, read as it comes by a goroutine of
// its own: an in-process connection has no buffer, and the server closes
// a connection it cannot write to within its write deadline, while a
// scan may take its time over a batch (an expression can cost up to a
// tenth of a second per webhook). It holds no more than the server sends:
// what the scan asked for, two batches at most, and its pings. The
// goroutine reads into the rest of a large buffer until little is left,
// and a buffer whose chunks are all read goes back to chunkPool, which
// every search shares, so that reading a stream, or searching again and
// again, allocates next to nothing.
type arrivals struct {
	c    chan chunk
	done chan struct{} // closed when the wire is
	err  error         // why the connection ended, once c is closed
	cur  chunk         // what is left to read of the last chunk
}

// chunk is what one read of the connection took: data, in buf.
type chunk struct{ data, buf []byte }

// A buffer takes reads until less than chunkMin of its chunkSize is left.
// While a scan rests beside ingest, the server's next batch arrives
// whole: two batches of 256 webhooks of 1 KiB fill about 10 buffers.
const (
	chunkSize = 64 << 10
	chunkMin  = 8 << 10
)

// chunkPool holds the buffers of chunks read, and readers the readers of
// wires closed, for the searches to come: a search that passes over most
// of the stream takes a few milliseconds, and one made a new buffer for
// every 64 KiB it read (and a reader), as many bytes of garbage as it
// read.
var (
	chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
)

func arrive(conn net.Conn) *arrivals {
	a := &arrivals{c: make(chan chunk, 4*scanBatch), done: make(chan struct{})}
	go func() {
		defer close(a.c)
		var buf []byte
		off := chunkSize
		for {
			if chunkSize-off < chunkMin {
				buf = chunkPool.Get().(*[chunkSize]byte)[:]
				off = 0
			}
			n, err := conn.Read(buf[off:])
			if n > 0 {
				select {
				case a.c <- chunk{data: buf[off : off+n : off+n], buf: buf}:
				case <-a.done:
					return
				}
				off += n
			}
			if err != nil {
				a.err = err
				return
			}
		}
	}()
	return a
}

func (a *arrivals) Read(p []byte) (int, error) {
	for len(a.cur.data) == 0 {
		c, ok := <-a.c
		if !ok {
			return 0, a.err
		}
		if a.cur.buf != nil && unsafe.SliceData(c.buf) != unsafe.SliceData(a.cur.buf) {
			// The goroutine reads into another buffer now: this one is read.
			chunkPool.Put((*[chunkSize]byte)(a.cur.buf))
		}
		a.cur = c
	}
	n := copy(p, a.cur.data)
	a.cur.data = a.cur.data[n:]
	return n, nil
}
