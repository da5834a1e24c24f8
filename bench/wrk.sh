#!/usr/bin/env bash
# bench/wrk.sh: wrk against (a) a bare net/http handler that reads the body
# and answers 200 and (b) jethook's ingress on a route with provider none,
# each a separate process on loopback, with the same wrk settings and 1 KiB
# JSON bodies unique per request (bench/wrk.lua). The route's destination
# is paused, so (b) measures ingress and store, as `jethook bench`'s ingest
# case does. Prints req/s, p50, p99, the servers' CPU per request and the
# ratio jethook ÷ bare. It builds jethook, installs wrk from Debian if it
# is missing, and stops everything it started on exit.
#
#   bench/wrk.sh                        # wrk -t2 -c64 -d30s
#   DURATION=10s CONNS=16 bench/wrk.sh
set -euo pipefail

DURATION=${DURATION:-30s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
BODY=${BODY:-1024}
BARE_ADDR=${BARE_ADDR:-127.0.0.1:18080}
JETHOOK_ADDR=${JETHOOK_ADDR:-127.0.0.1:18090}
ADMIN_ADDR=${ADMIN_ADDR:-127.0.0.1:18091}
export BODY

for a in "$BARE_ADDR" "$JETHOOK_ADDR" "$ADMIN_ADDR"; do
	case $a in
	127.*:* | localhost:*) ;;
	*) echo "wrk.sh: $a is not a loopback address" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jethook-wrk-XXXXXX")
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

if ! command -v wrk >/dev/null; then
	echo "installing wrk from Debian" >&2
	apt-get install -y wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi

echo "building jethook" >&2
(cd "$root" && go build -o "$tmp/jethook" .)

# wait_http URL: until URL answers at all, for up to 30 s.
wait_http() {
	for _ in $(seq 300); do
		if curl -s -o /dev/null "$1"; then return 0; fi
		sleep 0.1
	done
	echo "wrk.sh: nothing answers at $1" >&2
	exit 1
}

# cpu_ticks PID: user plus system clock ticks the process has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME URL PID: one wrk run against URL served by process PID; sets
# rps, p50_ms, p99_ms and requests, and prints a row with the server's CPU
# per request (wrk's own not counted) and the load average before the run.
run() {
	local name=$1 url=$2 pid=$3 out c0 c1 load
	load=$(cut -d' ' -f1 /proc/loadavg)
	c0=$(cpu_ticks "$pid")
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$here/wrk.lua" "$url")
	c1=$(cpu_ticks "$pid")
	echo "$out" | grep -q '^RESULT' || { echo "$out" >&2; exit 1; }
	eval "$(echo "$out" | grep '^RESULT' | sed 's/^RESULT //')"
	if [ "$non2xx" != 0 ] || [ "$errors" != 0 ]; then
		echo "wrk.sh: $name: $non2xx answers other than 2xx, $errors socket errors" >&2
		exit 1
	fi
	cpu_us=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN{printf "%.0f", t / hz * 1e6 / n}')
	printf '%-22s %9s %9s %9s %11s %9s\n' "$name" "$rps" "${p50_ms}ms" "${p99_ms}ms" "${cpu_us}µs" "$load"
}

"$tmp/jethook" bench -serve-bare "$BARE_ADDR" >"$tmp/bare.log" 2>&1 &
pids+=($!)
bare_pid=$!

cat >"$tmp/policies.yaml" <<EOF
routes:
  - name: wrk
    path: /hooks/wrk
    provider: none
    retry: {max_age: 1h}
    destinations:
      - {name: sink, url: "http://$BARE_ADDR/sink", concurrency: 64}
EOF
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
JETHOOK_LISTEN=$JETHOOK_ADDR JETHOOK_ADMIN_LISTEN=$ADMIN_ADDR JETHOOK_ADMIN_TOKEN=$token \
	JETHOOK_CONFIG=$tmp/policies.yaml JETHOOK_DATA_DIR=$tmp/data JETHOOK_LOG_LEVEL=warn \
	"$tmp/jethook" serve >"$tmp/jethook.log" 2>&1 &
pids+=($!)
jethook_pid=$!

wait_http "http://$BARE_ADDR/"
wait_http "http://$ADMIN_ADDR/readyz"
curl -sf -o /dev/null -X POST -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/destinations/wrk/sink/pause"

echo "wrk -t$THREADS -c$CONNS -d$DURATION, $BODY-byte JSON bodies unique per request, loopback; $(nproc) CPUs"
printf '%-22s %9s %9s %9s %11s %9s\n' TARGET REQ/S P50 P99 "SERVER CPU" "LOAD"
run "bare net/http" "http://$BARE_ADDR/hooks/wrk" "$bare_pid"
bare_rps=$rps
run "jethook ingress" "http://$JETHOOK_ADDR/hooks/wrk" "$jethook_pid"
jethook_requests=$requests
awk -v a="$rps" -v b="$bare_rps" 'BEGIN{printf "jethook ÷ bare          %.2f\n", a / b}'

# Every 200 must be a stored webhook, not a duplicate answered from dedup:
# the paused destination's backlog counts what the stream holds for it. wrk
# counts the answers within its run; up to CONNS more were in flight.
pending=$(curl -sf -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/status" |
	tr -d ' \n' | sed -n 's/.*"pending":\([0-9]*\).*/\1/p')
echo "stored $pending webhooks for the paused destination; wrk counted $jethook_requests answers"
if [ -z "$pending" ] || [ "$pending" -lt "$jethook_requests" ] || [ "$pending" -gt $((jethook_requests + CONNS)) ]; then
	echo "wrk.sh: stored count does not match the answers: duplicates or losses" >&2
	exit 1
fi
echo "done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
