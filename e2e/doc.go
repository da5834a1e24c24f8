// Package e2e is jethook's crash and fault suite. Its tests build the real
// binary, run `jethook serve` as a subprocess against real HTTP backends and
// a real NATS server, kill it with SIGKILL or take its store away, and check
// that every webhook jethook acknowledged reaches the backend at least once.
//
// The package holds tests only. `go test ./e2e/` runs the suite; -short
// keeps only the quick restart test. JETHOOK_CRASH_N and
// JETHOOK_CRASH_KILLS scale the kill -9 loop up (see TestKillNineLosesNothing).
package e2e
