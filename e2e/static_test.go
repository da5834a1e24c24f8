package e2e

import (
	"debug/elf"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestTheBinaryIsStatic checks that jethook built as the README and the
// Dockerfile build it (CGO_ENABLED=0) needs no dynamic loader and no
// shared library: with cgo, Pebble's zstd and the system resolver would
// link libc, and the distroless static image could not run it.
func TestTheBinaryIsStatic(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("checks an ELF binary")
	}
	for _, doc := range []string{"../README.md", "../Dockerfile", "../docs/scale.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range regexp.MustCompile(`(?m)^.*go (install|build) .*$`).FindAllString(string(b), -1) {
			if !strings.Contains(cmd, "CGO_ENABLED=0") {
				t.Errorf("%s builds jethook with cgo as the toolchain defaults: %s", doc, strings.TrimSpace(cmd))
			}
		}
	}
	f, err := elf.Open(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP)")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	if f.Section(".dynamic") != nil {
		t.Error("the binary has a dynamic section")
	}
}
