package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// phaseProf profiles one phase of the search scenario when
// JETHOOK_SEARCH_PROF names a directory: CPU, a trace of its first
// seconds, and the cumulative mutex and block profiles at its end.
type phaseProf struct {
	dir, name string
	cpu, tr   *os.File
	stopTrace *time.Timer
}

func profStart(name string) *phaseProf {
	dir := os.Getenv("JETHOOK_SEARCH_PROF")
	if dir == "" {
		return nil
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(10000)
	p := &phaseProf{dir: dir, name: name}
	p.cpu, _ = os.Create(filepath.Join(dir, name+".cpu"))
	_ = pprof.StartCPUProfile(p.cpu)
	p.tr, _ = os.Create(filepath.Join(dir, name+".trace"))
	if err := trace.Start(p.tr); err == nil {
		p.stopTrace = time.AfterFunc(3*time.Second, trace.Stop)
	}
	return p
}

func (p *phaseProf) stop() {
	if p == nil {
		return
	}
	pprof.StopCPUProfile()
	p.cpu.Close()
	if p.stopTrace.Stop() {
		trace.Stop()
	}
	p.tr.Close()
	for _, k := range []string{"mutex", "block"} {
		f, _ := os.Create(filepath.Join(p.dir, p.name+"."+k))
		_ = pprof.Lookup(k).WriteTo(f, 0)
		f.Close()
	}
}

var expSink []byte

// stallExp runs one step of the experiment JETHOOK_STALL_EXP names in
// place of a search, and reports whether it did.
func stallExp(int) bool {
	exp := os.Getenv("JETHOOK_STALL_EXP")
	if exp == "" {
		return false
	}
	end := time.Now().Add(10 * time.Millisecond)
	switch exp {
	case "sleep":
		time.Sleep(10 * time.Millisecond)
	case "spin":
		for time.Now().Before(end) {
		}
	case "spin-gosched":
		for time.Now().Before(end) {
			for range 1000 {
				expSink = expSink[:0]
			}
			runtime.Gosched()
		}
	case "spin-half":
		for time.Now().Before(end) {
		}
		time.Sleep(10 * time.Millisecond)
	case "alloc":
		for time.Now().Before(end) {
			expSink = make([]byte, 32<<10)
		}
	}
	return true
}
