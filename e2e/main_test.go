package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// build holds the binaries the tests run, each built once per test run
// into dir.
var build struct {
	dir     string
	jethook binaryBuild
	natsSrv binaryBuild
}

// binaryBuild is one `go build`, done the first time a test needs it.
type binaryBuild struct {
	once sync.Once
	path string
	err  error
}

// get builds pkg as dir/name once and returns its path. It is built
// without -race even under `go test -race`, so processes start fast and a
// kill loop spends its time on them, not the detector; and without cgo,
// as the README and the Dockerfile build it, so the tests run the static
// binary that ships.
func (b *binaryBuild) get(t *testing.T, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		path := filepath.Join(build.dir, name)
		cmd := exec.Command("go", "build", "-o", path, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jethook-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	build.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary is the jethook binary.
func binary(t *testing.T) string {
	t.Helper()
	return build.jethook.get(t, "jethook", "github.com/jethook/jethook")
}
