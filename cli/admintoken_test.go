package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jethook/jethook/internal/testkit"
)

// With no JETHOOK_ADMIN_TOKEN, serve keeps a token in its data dir that
// only its user may read; the CLI on the same machine uses it, the API
// still refuses a request without it, and a remote admin URL never gets it.
func TestTheLocalCLIReadsTheTokenServeKeepsInItsDataDir(t *testing.T) {
	t.Parallel()
	adminAddr := testkit.FreeAddr(t)
	dataDir := t.TempDir()
	serveForTest(t, func(s *Settings) { s.AdminListen = adminAddr; s.DataDir = dataDir; s.AdminToken = "" })

	info, err := os.Stat(filepath.Join(dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", info.Mode().Perm())
	}
	resp, err := http.Get("http://" + adminAddr + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/status without a token: %d, want 401", resp.StatusCode)
	}

	env := map[string]string{"JETHOOK_ADMIN_URL": "http://" + adminAddr, "JETHOOK_DATA_DIR": dataDir}
	var out strings.Builder
	if err := status(context.Background(), adminFromEnv(func(k string) string { return env[k] }), nil, &out); err != nil {
		t.Fatalf("jethook status with the data dir: %v", err)
	}
	if !strings.Contains(out.String(), "example") {
		t.Errorf("jethook status:\n%s", out.String())
	}

	env["JETHOOK_ADMIN_URL"] = "http://192.0.2.1:8081"
	if c := adminFromEnv(func(k string) string { return env[k] }); c.token != "" {
		t.Error("the local token would be sent to a remote admin URL")
	}
}

func TestATokenFileOthersCanReadIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, path, err := localAdminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := localAdminToken(dir)
	if err != nil || again != first {
		t.Fatalf("second start: %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := localAdminToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v, want one saying chmod 600", err)
	}
}

// The token file is the admin API's key: serve takes it only as a regular
// file of its own, never through a symlink another local user could point
// at a file of their choosing or at one of serve's own.
func TestATokenFileThatIsASymlinkIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		target func(dir string) string
	}{
		{"a symlink to a file holding a token", func(dir string) string {
			other := filepath.Join(dir, "elsewhere")
			if err := os.WriteFile(other, []byte(strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return other
		}},
		{"a symlink to nothing", func(dir string) string { return filepath.Join(dir, "missing") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.Symlink(tc.target(t.TempDir()), filepath.Join(dir, adminTokenFile)); err != nil {
				t.Fatal(err)
			}
			if token, _, err := localAdminToken(dir); err == nil || !strings.Contains(err.Error(), "is a symlink") {
				t.Fatalf("localAdminToken = %q, %v; want an error saying it is a symlink", token, err)
			}
			if token, err := readAdminToken(filepath.Join(dir, adminTokenFile)); err == nil || !strings.Contains(err.Error(), "is a symlink") {
				t.Fatalf("readAdminToken = %q, %v; want an error saying it is a symlink", token, err)
			}
		})
	}
}

// A start that fails while it writes a new token file (here: the disk is
// full) leaves no file without a token behind, so the next start makes one.
func TestAFailedWriteLeavesNoEmptyTokenFile(t *testing.T) {
	t.Parallel()
	dir := testkit.Tmpfs(t, "1m")
	filler := testkit.FillDisk(t, dir, 0)
	if _, _, err := localAdminToken(dir); err == nil {
		t.Fatal("writing the token on a full disk did not fail")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	token, path, err := localAdminToken(dir)
	if err != nil || len(token) != 64 {
		t.Fatalf("the next start: %q, %v; want a new token", token, err)
	}
	if again, err := readAdminToken(path); err != nil || again != token {
		t.Fatalf("read back: %q, %v", again, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the data dir holds %d entries, want only %s", len(entries), adminTokenFile)
	}
}
