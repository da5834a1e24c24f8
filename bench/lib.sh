# bench/lib.sh: what bench/wrk.sh and bench/rate.sh share. Source it after
# setting NAME (the script's name, for messages) and the addresses; it
# refuses any that is not on loopback, makes $tmp, stops the processes
# listed in pids and removes $tmp on exit, and defines wait_http and
# cpu_ticks.

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

for a in "$@"; do
	case $a in
	127.*:* | localhost:*) ;;
	*) echo "$NAME: $a is not a loopback address" >&2; exit 2 ;;
	esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/jethook-$NAME-XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_http URL: until URL answers at all, for up to 30 s.
wait_http() {
	for _ in $(seq 300); do
		if curl -s -o /dev/null "$1"; then return 0; fi
		sleep 0.1
	done
	echo "$NAME: nothing answers at $1" >&2
	exit 1
}

# cpu_ticks PID: user plus system clock ticks the process has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# machine_ticks: the clock ticks all CPUs were busy, then all ticks.
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

# cpu_wait_ns PID: nanoseconds the process's threads have been runnable
# without a CPU (the kernel's schedstat run delay), summed.
cpu_wait_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{w += $2} END {printf "%d", w}'; }
