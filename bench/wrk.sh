#!/usr/bin/env bash
# bench/wrk.sh: wrk against (a) a bare net/http handler that reads the body
# and answers 200 and (b) jethook's ingress on a route with provider none,
# each a separate process on loopback, with the same wrk settings and 1 KiB
# JSON bodies unique per request (bench/wrk.lua). The route's destination
# is paused, so (b) measures ingress and store, as `jethook bench`'s ingest
# case does. Prints req/s, p50, p99, the servers' CPU per request and the
# ratio jethook ÷ bare. Then end to end, with (a) as the backend: the drain
# of the stored backlog, and a second wrk run posting while jethook
# delivers, in deliveries per second. It builds jethook, installs wrk from
# Debian if it is missing, and stops everything it started on exit.
#
#   bench/wrk.sh                        # wrk -t2 -c64 -d30s
#   DURATION=10s CONNS=16 bench/wrk.sh
#   JETHOOK=/tmp/jethook-before bench/wrk.sh   # a binary built before, instead of this tree
#   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:18080 OTEL_TRACES_SAMPLER=always_on bench/wrk.sh
#       # tracing on, every webhook sampled, exported over OTLP/HTTP to the
#       # bare handler, which reads each export and discards it
#   PROFILE=dir bench/wrk.sh            # also CPU profiles of jethook: dir/ingest.pprof
#       # (the ingress run, from its second second to its last; DURATION
#       # in seconds, e.g. 10s) and
#       # dir/drain.pprof (the drain's first 5 s), for go tool pprof
set -euo pipefail

DURATION=${DURATION:-30s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
BODY=${BODY:-1024}
BARE_ADDR=${BARE_ADDR:-127.0.0.1:18080}
JETHOOK_ADDR=${JETHOOK_ADDR:-127.0.0.1:18090}
ADMIN_ADDR=${ADMIN_ADDR:-127.0.0.1:18091}
export BODY

NAME=wrk
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh" "$BARE_ADDR" "$JETHOOK_ADDR" "$ADMIN_ADDR"

if ! command -v wrk >/dev/null; then
	echo "installing wrk from Debian" >&2
	apt-get install -y wrk >/dev/null || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi

if [ -n "${JETHOOK:-}" ]; then
	cp "$JETHOOK" "$tmp/jethook"
else
	echo "building jethook" >&2
	(cd "$root" && go build -o "$tmp/jethook" .)
fi



# profile NAME SECONDS: in the background, after a second, a CPU profile of
# jethook for SECONDS into $PROFILE/NAME.pprof, when PROFILE is set.
profile() {
	[ -n "${PROFILE:-}" ] || return 0
	mkdir -p "$PROFILE"
	(sleep 1 && curl -s -H "Authorization: Bearer $token" -o "$PROFILE/$1.pprof" \
		"http://$ADMIN_ADDR/debug/pprof/profile?seconds=$2") &
}

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
profile ingest "$((${DURATION%s} - 2))"
run "jethook ingress" "http://$JETHOOK_ADDR/hooks/wrk" "$jethook_pid"
jethook_requests=$requests
awk -v a="$rps" -v b="$bare_rps" 'BEGIN{printf "jethook ÷ bare          %.2f\n", a / b}'

# Every 200 must be a stored webhook, not a duplicate answered from dedup:
# the paused destination's backlog counts what the stream holds for it:
# pending, and what a fetch open before the pause took (in flight, or
# waiting for the pause to end). wrk counts the answers within its run;
# up to CONNS more were in flight.
status=$(curl -sf -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/status" | tr -d ' \n')
field() { echo "$status" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
pending=$(field pending)
out=$(($(field in_flight) + $(field in_backoff)))
[ -n "$pending" ] && pending=$((pending + out))
echo "stored $pending webhooks for the paused destination ($out of them taken by a fetch); wrk counted $jethook_requests answers"
if [ -z "$pending" ] || [ "$pending" -lt "$jethook_requests" ] || [ "$pending" -gt $((jethook_requests + CONNS)) ]; then
	echo "wrk.sh: stored count does not match the answers: duplicates or losses" >&2
	exit 1
fi

# End to end, still separate processes: the bare handler is now the backend
# (the destination posts to it at /sink). (c) drain: resume the destination
# and time until the stored backlog is delivered. (d) sustained: wrk posts
# new webhooks while the destination delivers, timed from wrk's start to the
# last delivery. Deliveries are counted by jethook_delivered_total, which
# counts 2xx answers from the backend; the last one's time is the
# destination's last_success_at in /v1/status, so polling every 0.5 s (and
# its CPU) does not add to the elapsed time.
now() { date +%s.%N; }
last_success() {
	date -d "$(curl -sf -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/status" |
		tr -d ' \n' | sed -n 's/.*"last_success_at":"\([^"]*\)".*/\1/p')" +%s.%N
}
delivered() {
	curl -sf -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/metrics" |
		awk '/^jethook_delivered_total/ {s += $NF} END {printf "%d", s}'
}
# settle WANT: until jethook_delivered_total reaches WANT, for up to 10 min.
settle() {
	local deadline=$((SECONDS + 600))
	while [ "$(delivered)" -lt "$1" ]; do
		if [ $SECONDS -gt $deadline ]; then
			echo "wrk.sh: $(delivered) of $1 delivered after 10 min" >&2
			exit 1
		fi
		sleep 0.5
	done
}
# e2e_row NAME EVENTS T0 T1 C0 C1: deliveries/s over T1 − T0, ratio to the
# bare handler's req/s, and the CPU per delivery of jethook plus the backend.
e2e_row() {
	awk -v name="$1" -v n="$2" -v t0="$3" -v t1="$4" -v ticks=$(($6 - $5)) -v hz="$(getconf CLK_TCK)" -v bare="$bare_rps" \
		'BEGIN{printf "%-22s %9d %9.0f %8.2fs %9.2f %11.0fµs\n", name, n, n / (t1 - t0), t1 - t0, n / (t1 - t0) / bare, ticks / hz * 1e6 / n}'
}
both_ticks() { echo $(($(cpu_ticks "$jethook_pid") + $(cpu_ticks "$bare_pid"))); }

echo
echo "End to end: the destination delivers to the bare handler at concurrency 64"
printf '%-22s %9s %9s %9s %9s %11s\n' PHASE EVENTS EVENTS/S ELAPSED "÷ BARE" "CPU/EVENT"
d0=$(delivered)
c0=$(both_ticks)
t0=$(now)
curl -sf -o /dev/null -X POST -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/destinations/wrk/sink/resume"
profile drain 5
settle $((d0 + pending))
t1=$(last_success)
e2e_row "drain (backlog above)" "$pending" "$t0" "$t1" "$c0" "$(both_ticks)"

d0=$(delivered)
c0=$(both_ticks)
t0=$(now)
out=$(RUN=b wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$here/wrk.lua" "http://$JETHOOK_ADDR/hooks/wrk")
echo "$out" | grep -q '^RESULT' || { echo "$out" >&2; exit 1; }
eval "$(echo "$out" | grep '^RESULT' | sed 's/^RESULT //')"
if [ "$non2xx" != 0 ] || [ "$errors" != 0 ]; then
	echo "wrk.sh: sustained: $non2xx answers other than 2xx, $errors socket errors" >&2
	exit 1
fi
settle $((d0 + requests))
# Up to CONNS more were stored while wrk stopped, uncounted by wrk.
for _ in $(seq 20); do
	curl -sf -H "Authorization: Bearer $token" "http://$ADMIN_ADDR/v1/status" | tr -d ' \n' |
		grep -q '"pending":0,"ack_pending":0' && break
	sleep 0.5
done
t1=$(last_success)
e2e_row "sustained (wrk + drain)" $(($(delivered) - d0)) "$t0" "$t1" "$c0" "$(both_ticks)"
echo "(sustained: wrk posted at $rps req/s, p99 ${p99_ms}ms, for $DURATION; elapsed is wrk's start to the last delivery;"
echo " CPU is jethook's and the backend's, wrk's not counted)"
echo "done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
