// Package transform owns destination transformations: JavaScript scripts,
// written like Hookdeck's (addHandler('transform', (request, context) =>
// request)), that reshape a webhook's request for one destination at
// delivery. It compiles a script once, runs it in a pool of goja virtual
// machines with no network, file or clock beyond what the context gives,
// under a time limit, a memory limit and a call-depth limit, and turns
// what the handler returns into the request to send, bounded in size.
package transform

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"

	"github.com/jethook/jethook/payload"
)

// Defaults and bounds of a script and of one run.
const (
	// DefaultTimeout bounds one run when Limits.Timeout is 0.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultMemory bounds what one run may allocate when Limits.Memory
	// is 0.
	DefaultMemory = 64 << 20
	// DefaultMaxBody bounds the body a run may return when
	// Limits.MaxBody is 0.
	DefaultMaxBody = 5 << 20
	// MaxScript is the largest script accepted, in bytes.
	MaxScript = 1 << 20
	// MaxCallDepth is how deeply JavaScript calls may nest: a recursion
	// past it stops with a RangeError.
	MaxCallDepth = 1000
	// MaxDepth is how deeply the returned body's arrays and objects may
	// nest, as for the bodies jethook reads.
	MaxDepth = payload.MaxDepth
)

// Limits bound every run of a script. The zero value takes the defaults.
type Limits struct {
	// Timeout is the longest one run may take, top-level code excluded
	// (it runs once per virtual machine).
	Timeout time.Duration
	// Memory bounds the bytes allocated while one run is in progress.
	// jethook cannot tell one goroutine's allocations from another's, so
	// it counts everything the process allocates meanwhile: keep it well
	// above what a run needs.
	Memory int64
	// MaxBody is the largest body a run may return, in bytes: the
	// route's max_body.
	MaxBody int64
	// Pool is how many idle virtual machines are kept for reuse (default
	// the number of CPUs); more are made when runs overlap.
	Pool int
}

func (l Limits) withDefaults() Limits {
	l.Timeout = cmp.Or(l.Timeout, DefaultTimeout)
	l.Memory = cmp.Or(l.Memory, DefaultMemory)
	l.MaxBody = cmp.Or(l.MaxBody, DefaultMaxBody)
	l.Pool = cmp.Or(l.Pool, runtime.GOMAXPROCS(0))
	return l
}

// Request is what a run reads and returns: the request jethook would send
// to the destination.
type Request struct {
	Method string
	// Path is the URL path, escaped as it goes on the wire ("/a%20b").
	Path string
	// Query is the raw query string, without "?".
	Query  string
	Header http.Header
	// Body is read where it is, not copied: it must not change once
	// given to Run, as what a script keeps of one run (a global holding
	// request.body) may go on reading it.
	Body []byte
	// JSON says Body is known to be JSON that nests no deeper than
	// MaxDepth (filter.IsJSON), as the ingress found and recorded it: Run
	// then does not check it again. False means not known: Run checks.
	JSON bool
}

// Context is what the script's handler gets as its second argument, and
// the clock it sees.
type Context struct {
	Route       string
	Destination string
	EventID     string
	Attempt     int
	ReceivedAt  time.Time
	// Now is what Date.now() and new Date() give inside the run; zero
	// means the real time when the run starts.
	Now time.Time
	// Console gets what console.log and its kin print, one line each;
	// nil discards it.
	Console io.Writer
}

// Error kinds, in Error.Kind: the ways a run can fail.
const (
	KindThrew   = "threw"     // the script threw an exception
	KindFailed  = "failed"    // the script called $transform.fail(message)
	KindTimeout = "timeout"   // the run took longer than Limits.Timeout
	KindMemory  = "memory"    // the run allocated more than Limits.Memory
	KindStack   = "stack"     // calls nested deeper than MaxCallDepth
	KindInvalid = "invalid"   // the handler returned something that is not a request
	KindTooBig  = "too large" // the returned body is larger than Limits.MaxBody
	// KindEngine is a run the JavaScript engine itself failed in (a Go
	// panic inside goja that the script ran into): the machine is thrown
	// away and jethook goes on.
	KindEngine = "engine"
	// KindCrashed is a webhook that jethook died on, several times, while
	// a run was in progress: it is not run again. Run never returns it;
	// the forwarder, which counts the deaths, does.
	KindCrashed = "crashed"
)

// Kinds lists every Error.Kind.
var Kinds = []string{KindThrew, KindFailed, KindTimeout, KindMemory, KindStack, KindInvalid, KindTooBig, KindEngine, KindCrashed}

// Error is a run that produced no request. Its text starts with
// "transform_error: ", then the kind and a message; Msg may quote what the
// script threw, so logs record Kind and At, never Msg.
type Error struct {
	Kind string
	Msg  string
	At   string // script:line:column where it happened, when known
}

func (e *Error) Error() string {
	s := "transform_error: " + e.Kind
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.At != "" {
		s += " (at " + e.At + ")"
	}
	return s
}

// Script is a compiled transformation. It is safe for concurrent use.
type Script struct {
	name   string
	digest string
	prg    *goja.Program
	limits Limits
	env    map[string]string
	pool   chan *machine
	// pinUntil is when its runs start unpinned again (Unix nanoseconds),
	// 0 once that is past (pinned): see Run.
	pinUntil atomic.Int64
}

// pinnedFor is how long a script's runs start pinned once one of them was
// run again pinned (Run): on a machine so busy that a run waits past its
// share of its time limit, running again on a fresh virtual machine
// (about half a millisecond of CPU) costs more than a hundred pinned runs.
const pinnedFor = time.Second

// Compile compiles src, named name in errors and stack traces, and runs its
// top-level code once to check that it registers a transform handler. env
// is what the script reads as process.env. A syntax error names
// name:line:column.
func Compile(name, src string, env map[string]string, l Limits) (*Script, error) {
	if len(src) > MaxScript {
		return nil, fmt.Errorf("%s: the script is %d bytes; at most %d", name, len(src), MaxScript)
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("%s: the script is empty", name)
	}
	ast, err := parser.ParseFile(nil, name, src, 0)
	if err != nil {
		return nil, compileError(name, err)
	}
	prg, err := goja.CompileAST(ast, false)
	if err != nil {
		return nil, compileError(name, err)
	}
	l = l.withDefaults()
	keepClock()
	sum := sha256.Sum256([]byte(src))
	s := &Script{name: name, digest: "sha256:" + hex.EncodeToString(sum[:8]), prg: prg, limits: l, env: env, pool: make(chan *machine, l.Pool)}
	m, err := s.newMachine()
	if err != nil {
		return nil, err
	}
	s.put(m)
	return s, nil
}

// Name is the name the script was compiled under.
func (s *Script) Name() string { return s.name }

// Digest identifies the script's source: "sha256:" and the first 16 hex
// digits of its SHA-256. An edited script has another.
func (s *Script) Digest() string { return s.digest }

// SyntaxError is a script that does not compile, with where.
type SyntaxError struct {
	Name         string
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: SyntaxError: %s", e.Name, e.Line, e.Column, e.Msg)
}

func compileError(name string, err error) error {
	var pe *parser.Error
	if errors.As(err, &pe) {
		return &SyntaxError{Name: name, Line: pe.Position.Line, Column: pe.Position.Column, Msg: pe.Message}
	}
	var pl parser.ErrorList
	if errors.As(err, &pl) && len(pl) > 0 {
		return &SyntaxError{Name: name, Line: pl[0].Position.Line, Column: pl[0].Position.Column, Msg: pl[0].Message}
	}
	var se *goja.CompilerSyntaxError
	if errors.As(err, &se) && se.File != nil {
		p := se.File.Position(se.Offset)
		return &SyntaxError{Name: name, Line: p.Line, Column: p.Column, Msg: se.Message}
	}
	return fmt.Errorf("%s: %v", name, err)
}

// running holds a slot per run in progress, all scripts together: runs
// are CPU work, and more at once than there are CPUs only share them, each
// taking longer by the wall clock its time limit reads. A run waits for a
// slot before its time starts.
var running = make(chan struct{}, runtime.GOMAXPROCS(0))

// Run runs the script's handler on req. It returns the request to send,
// or nil when the handler returned null: the event is not for this
// destination. req is not changed. An error is an *Error. A goroutine
// started for the run calls GrowStack first.
func (s *Script) Run(req *Request, c Context) (*Request, error) {
	running <- struct{}{}
	defer func() { <-running }()
	// A run is not pinned to its thread (watch) unless its console output
	// would be written twice if it ran again, or a run of the script was
	// run again less than pinnedFor ago.
	pin := !threadClocks || c.Console != nil || s.pinned()
	for {
		m, err := s.get()
		if err != nil {
			return nil, err
		}
		out, keep, err := m.run(req, c, pin)
		if keep {
			s.put(m)
		}
		if err == errUnpinned {
			pin = true
			s.pinUntil.Store(time.Now().Add(pinnedFor).UnixNano())
			continue
		}
		return out, err
	}
}

func (s *Script) get() (*machine, error) {
	select {
	case m := <-s.pool:
		return m, nil
	default:
		return s.newMachine()
	}
}

func (s *Script) put(m *machine) {
	select {
	case s.pool <- m:
	default:
	}
}

// pinned reports whether a run of the script was run again, pinned, less
// than pinnedFor ago. Most scripts never were: then it reads no clock.
func (s *Script) pinned() bool {
	until := s.pinUntil.Load()
	if until == 0 {
		return false
	}
	if time.Now().UnixNano() < until {
		return true
	}
	s.pinUntil.CompareAndSwap(until, 0)
	return false
}

// runStack is about as much stack as a run takes: the engine's calls nest
// deep, and their frames are large.
const runStack = 16 << 10

// GrowStack makes the calling goroutine's stack hold runStack more bytes.
// A goroutine that will run a script calls it first thing, while its stack
// holds almost nothing to copy (the forwarder's workers do, once each): a
// goroutine begins with a small stack and would otherwise grow it deep
// inside the engine, one doubling at a time, each copying and adjusting
// every frame above it.
//
//go:noinline
func GrowStack() {
	var b [runStack]byte
	touch(b[:])
}

//go:noinline
func touch([]byte) {}
