// Package e2e is jethook's crash and fault suite. Its tests build the real
// binary, run `jethook serve` as a subprocess against real HTTP backends and
// a real NATS server, kill it with SIGKILL, take its store away, fill its
// disk (a tmpfs: run as root, as CI does, or those tests skip), freeze its
// NATS server with SIGSTOP or hold it to a small store limit, and check
// that every webhook jethook acknowledged reaches the backend at least once
// and that it recovers without a restart.
//
// The package holds tests only. `go test ./e2e/` runs the suite; -short
// keeps only the quick restart test. JETHOOK_CRASH_N and
// JETHOOK_CRASH_KILLS scale the kill -9 loop up (see TestKillNineLosesNothing).
package e2e
