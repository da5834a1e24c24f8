package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// build is the jethook binary, built once per test run.
var build struct {
	dir  string
	once sync.Once
	path string
	err  error
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

// binary builds github.com/jethook/jethook the first time a test needs it.
// It is built without -race even under `go test -race`, so the process
// starts fast and a kill loop spends its time on jethook, not the detector.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		path := filepath.Join(build.dir, "jethook")
		out, err := exec.Command("go", "build", "-o", path, "github.com/jethook/jethook").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}
