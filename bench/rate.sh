#!/usr/bin/env bash
# bench/rate.sh: the ack latency of jethook's ingress at a constant rate,
# with delivery running, measured by vegeta (an open-loop load generator:
# requests go out on schedule whatever the answers, so a stall shows in
# the tail instead of slowing the load down, as with wrk). Each binary
# named in BINARIES runs `jethook serve` on the embedded store with one
# route (provider none) whose destination is a bare net/http handler on
# loopback; vegeta posts unique 1 KiB JSON bodies at each rate in RATES
# for DURATION. Runs alternate between the binaries, REPEAT times, so a
# before/after comparison shares the machine's state. Prints each run's
# p50, p99 and max ack latency, the share of 2xx, jethook's CPU per
# webhook, the share of its publishes the stream acked within 5 and 10 ms
# as jethook saw them (jethook_store_publish_seconds: the wait inside
# jethook, without the sender's side of the connection), how busy the
# machine's CPUs were, how long jethook's threads waited for a CPU for
# each second they ran (the kernel's run delay), and the load average
# before the run.
#
#   bench/rate.sh                                   # this tree, 1000, 2000 and 5000/s, 10 s each
#   BINARIES="/tmp/jethook-before /tmp/jethook-after" RATES=5000 REPEAT=3 bench/rate.sh
#   PROFILE=prof RATES=3000 bench/rate.sh           # also where jethook's CPU went
#
# PROFILE=DIR takes a CPU profile of jethook from the admin API
# (/debug/pprof/profile) from the second second of each run to the one
# before its last, keeps it in DIR, and prints where that CPU went per
# webhook (bench/breakdown.py), counting rate × seconds profiled webhooks:
# the breakdown is of ingress and delivery only while delivery keeps up.
# TRACE=DIR takes a runtime trace of jethook (/debug/pprof/trace) for 3 s
# from the second second of each run into DIR, and prints, from its
# scheduler-latency profile, where goroutines waited to run: the time each
# was runnable but had no CPU, by what it was about to do; then, from
# bench/acktrace, how long requests were blocked waiting for their acks and
# runnable after them, and what held the CPU during the longest waits.
# PAUSED=1 pauses the destination before each run, so that the ack latency
# is the ingress's alone, with nothing delivered beside it.
# CONCURRENCY sets the destination's concurrency (8, a destination's default).
# KEEP=PREFIX keeps each run's vegeta results and jethook log under PREFIX.
# WORKERS bounds vegeta's concurrent requests (2000).
#
# vegeta is installed with `go install` (from the Go module proxy) when it
# is missing; python3 writes the targets.
set -euo pipefail

RATES=${RATES:-1000 2000 5000}
DURATION=${DURATION:-10s}
REPEAT=${REPEAT:-1}
BODY=${BODY:-1024}
BARE_ADDR=${BARE_ADDR:-127.0.0.1:18180}
JETHOOK_ADDR=${JETHOOK_ADDR:-127.0.0.1:18190}
ADMIN_ADDR=${ADMIN_ADDR:-127.0.0.1:18191}
VEGETA_VERSION=${VEGETA_VERSION:-v12.13.0}

NAME=rate
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh" "$BARE_ADDR" "$JETHOOK_ADDR" "$ADMIN_ADDR"

vegeta=$(command -v vegeta || true)
if [ -z "$vegeta" ]; then
	gobin=$(go env GOPATH)/bin
	if [ ! -x "$gobin/vegeta" ]; then
		echo "installing vegeta $VEGETA_VERSION with go install" >&2
		go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
	fi
	vegeta=$gobin/vegeta
fi

if [ -z "${BINARIES:-}" ]; then
	echo "building jethook" >&2
	(cd "$root" && go build -o "$tmp/jethook" .)
	BINARIES=$tmp/jethook
fi
first=${BINARIES%% *}


"$first" bench -serve-bare "$BARE_ADDR" >"$tmp/bare.log" 2>&1 &
pids+=($!)
wait_http "http://$BARE_ADDR/"

cat >"$tmp/policies.yaml" <<EOF
routes:
  - name: rate
    path: /hooks/rate
    provider: none
    retry: {max_age: 1h}
    destinations:
      - {name: sink, url: "http://$BARE_ADDR/sink", concurrency: ${CONCURRENCY:-8}}
EOF

# targets N RUN: N vegeta JSON targets, each a POST of a unique body.
targets() {
	python3 - "$1" "$2" "$BODY" "http://$JETHOOK_ADDR/hooks/rate" <<'PY'
import base64, json, sys
n, run, size, url = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
out = sys.stdout
for i in range(n):
    head = '{"id":"evt_%s_%d","type":"bench.event","pad":"' % (run, i)
    body = head + "x" * max(size - len(head) - 2, 0) + '"}'
    out.write(json.dumps({"method": "POST", "url": url, "header": {"Content-Type": ["application/json"]},
                          "body": base64.b64encode(body.encode()).decode()}) + "\n")
PY
}

seconds=$(awk -v d="$DURATION" 'BEGIN{sub(/s$/, "", d); print d + 0}')
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
delivery="delivery running"
[ "${PAUSED:-}" = 1 ] && delivery="the destination paused"
echo "vegeta at a constant rate for $DURATION, $BODY-byte JSON bodies unique per request, $delivery, loopback; $(nproc) CPUs"
printf '%-40s %6s %9s %9s %9s %7s %11s %7s %7s %6s %7s %7s\n' BINARY RATE P50 P99 MAX 2XX "CPU/WEBHOOK" "ACK≤5ms" "≤10ms" BUSY WAIT/RUN LOAD
run=0
for _ in $(seq "$REPEAT"); do
	for rate in $RATES; do
		for bin in $BINARIES; do
			run=$((run + 1))
			data=$tmp/data-$run
			JETHOOK_LISTEN=$JETHOOK_ADDR JETHOOK_ADMIN_LISTEN=$ADMIN_ADDR JETHOOK_ADMIN_TOKEN=$token \
				JETHOOK_CONFIG=$tmp/policies.yaml JETHOOK_DATA_DIR=$data JETHOOK_LOG_LEVEL=warn \
				"$bin" serve >"$tmp/jethook-$run.log" 2>&1 &
			jpid=$!
			pids+=($jpid)
			wait_http "http://$ADMIN_ADDR/readyz"
			if [ "${PAUSED:-}" = 1 ]; then
				curl -sf -X POST -H "Authorization: Bearer $token" -o /dev/null "http://$ADMIN_ADDR/v1/destinations/rate/sink/pause"
			fi
			n=$(awk -v r="$rate" -v s="$seconds" 'BEGIN{printf "%d", r * s + r}')
			targets "$n" "$run" >"$tmp/targets"
			load=$(cut -d' ' -f1 /proc/loadavg)
			c0=$(cpu_ticks "$jpid")
			w0=$(cpu_wait_ns "$jpid")
			read -r b0 t0 < <(machine_ticks)
			prof=
			if [ -n "${PROFILE:-}" ] && [ "$seconds" -gt 3 ]; then
				mkdir -p "$PROFILE"
				prof=$PROFILE/run-$run-$rate.pprof
				(sleep 1 && curl -s -H "Authorization: Bearer $token" -o "$prof" \
					"http://$ADMIN_ADDR/debug/pprof/profile?seconds=$((seconds - 2))") &
				ppid=$!
			fi
			trc=
			if [ -n "${TRACE:-}" ] && [ "$seconds" -gt 4 ]; then
				mkdir -p "$TRACE"
				trc=$TRACE/run-$run-$rate.trace
				(sleep 1 && curl -s -H "Authorization: Bearer $token" -o "$trc" \
					"http://$ADMIN_ADDR/debug/pprof/trace?seconds=3") &
				tpid=$!
			fi
			"$vegeta" attack -format=json -targets="$tmp/targets" -rate="$rate/s" -duration="$DURATION" \
				-timeout=10s -max-workers=${WORKERS:-2000} >"$tmp/results.bin"
			c1=$(cpu_ticks "$jpid")
			w1=$(cpu_wait_ns "$jpid")
			read -r b1 t1 < <(machine_ticks)
			curl -s -H "Authorization: Bearer $token" -o "$tmp/metrics" "http://$ADMIN_ADDR/metrics" || : >"$tmp/metrics"
			"$vegeta" report -type=json <"$tmp/results.bin" >"$tmp/report.json"
			[ -n "${KEEP:-}" ] && cp "$tmp/results.bin" "$KEEP-$run.bin" && cp "$tmp/jethook-$run.log" "$KEEP-$run.log"
			python3 - "$tmp/report.json" "$bin" "$rate" "$((c1 - c0))" "$(getconf CLK_TCK)" "$load" \
				"$((b1 - b0))" "$((t1 - t0))" "$((w1 - w0))" "$tmp/metrics" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
# The share of publishes acked within 5 and 10 ms, from jethook's histogram.
bucket = {}
for line in open(sys.argv[10]):
    m = re.match(r'jethook_store_publish_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
    if m:
        bucket[m.group(1)] = float(m.group(2))
share = lambda le: "%6.1f%%" % (100 * bucket[le] / bucket["+Inf"]) if bucket.get("+Inf") else "-"
bin, rate, ticks, hz, load = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
busy, all_, wait_ns = int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
lat = r["latencies"]
ms = lambda ns: "%.2fms" % (ns / 1e6)
cpu = ticks / hz * 1e6 / max(r["requests"], 1)
print("%-40s %6s %9s %9s %9s %6.1f%% %10.0fµs %7s %7s %5.0f%% %7.2f %7s" % (bin[-40:], rate, ms(lat["50th"]), ms(lat["99th"]), ms(lat["max"]),
      100 * r["success"], cpu, share("0.005"), share("0.01"), 100 * busy / max(all_, 1), wait_ns / 1e9 / max(ticks / hz, 1e-9), load))
codes = {k: v for k, v in r["status_codes"].items() if not k.startswith("2")}
if codes:
    print("  answers other than 2xx: %s" % codes, file=sys.stderr)
PY
			if [ -n "$prof" ]; then
				wait "$ppid"
				python3 "$here/breakdown.py" "$prof" "$((rate * (seconds - 2)))"
			fi
			if [ -n "$trc" ]; then
				wait "$tpid"
				go tool trace -pprof=sched "$trc" >"$trc.sched.pprof"
				echo "waiting to run, by what the goroutine was about to do (3 s of trace):"
				go tool pprof -top -nodecount=25 "$trc.sched.pprof" 2>/dev/null | sed -n '/flat%/,$p'
				(cd "$root" && go run ./bench/acktrace "$trc")
			fi
			kill "$jpid"
			wait "$jpid" 2>/dev/null || true
			rm -rf "$data"
		done
	done
done
echo "(CPU/WEBHOOK: jethook's CPU during the attack, ingress and delivery, per request sent; the backend's is not counted."
echo " ACK≤5ms, ≤10ms: the share of publishes the stream acked within 5 and 10 ms, timed inside jethook, over the whole run."
echo " BUSY: the share of all CPUs busy during the attack, vegeta and the backend included. WAIT/RUN: the time jethook's"
echo " threads were runnable but had no CPU, divided by the time they ran; above 0 when the machine has more work than CPUs)"
echo "done; load average $(cut -d' ' -f1-3 /proc/loadavg)"
