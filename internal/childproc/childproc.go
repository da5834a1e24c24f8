// Package childproc runs a program, usually the jethook binary, as a child
// process for the e2e suite and `jethook bench`: started again and again
// with the same arguments and environment, as a supervisor restarts it,
// killed with SIGKILL or stopped with SIGTERM, and every run appending to
// one log file whose tail a failure shows.
package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one program run as a child, restarted on demand.
type Process struct {
	Bin     string
	Args    []string
	Env     []string // the whole environment; Environ makes one
	LogPath string   // where every run's output goes, appended

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
	killed bool          // the current run was ended on purpose
	starts int
}

// Environ is this process's environment without its JETHOOK_* variables,
// so that the caller's own settings do not leak into the child, plus
// settings, in the order of their names.
func Environ(settings map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETHOOK_") {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+settings[k])
	}
	return env
}

// Start launches a run and returns at once, with a channel closed when
// that run has ended.
func (p *Process) Start() (exited <-chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	p.Mark(fmt.Sprintf("start %d", p.starts))
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.Bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.exited, p.killed = cmd, done, false
	return done, nil
}

// Starts counts the runs started so far.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Pid is the current run's process id, 0 before the first.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitedOnItsOwn reports whether the current run has ended without Kill
// or Stop, and how.
func (p *Process) ExitedOnItsOwn() (bool, *os.ProcessState) {
	p.mu.Lock()
	cmd, exited, killed := p.cmd, p.exited, p.killed
	p.mu.Unlock()
	if cmd == nil || killed {
		return false, nil
	}
	select {
	case <-exited:
		return true, cmd.ProcessState
	default:
		return false, nil
	}
}

// Kill sends SIGKILL to the current run, if it is running, and waits
// until it is gone.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killed = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Kill()
	<-exited
	p.Mark("killed -9")
}

// Stop sends SIGTERM and waits for the run to end, killing it after
// timeout; it returns how long the exit took.
func (p *Process) Stop(timeout time.Duration) (time.Duration, error) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.killed = true
	p.mu.Unlock()
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("SIGTERM %s: %w", p.Bin, err)
	}
	select {
	case <-exited:
		return time.Since(t0), nil
	case <-time.After(timeout):
		p.Kill()
		return 0, fmt.Errorf("%s still running %s after SIGTERM; killed; log tail:\n%s", p.Bin, timeout, p.LogTail(20))
	}
}

// Mark writes a line of the caller's own into the log, so that what it
// did shows between what the child wrote.
func (p *Process) Mark(what string) {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== %s at %s\n", what, time.Now().Format(time.RFC3339Nano))
}

// LogTail is the last n lines of the log, across all runs.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
