#!/usr/bin/env python3
"""bench/breakdown.py PROFILE WEBHOOKS: where jethook's CPU went, per webhook.

Reads a CPU profile of `jethook serve` (from the admin API's
/debug/pprof/profile, as bench/rate.sh PROFILE=DIR takes it) with
`go tool pprof -traces`, assigns each sample to the part of jethook its
stack belongs to, and prints each part's CPU time in total and per webhook
(WEBHOOKS: how many webhooks came in and were delivered while it ran).
A sample goes to the first part whose pattern its stack matches, top to
bottom of the table; the embedded server labels its stream goroutines, so
their samples say which stream they write.
"""
import collections
import re
import subprocess
import sys

PARTS = [
    # (part, what it is, pattern over the sample's labels and stack)
    ("ingress: jethook's handler", "verify, dedup, publish, wait for the ack",
     r"proxy\.\(\*Handler\)\.ServeHTTP"),
    ("ingress: net/http server", "read the request, write the answer",
     r"net/http\.\(\*conn\)\.serve"),
    ("store: WEBHOOKS writes", "the embedded server stores each webhook",
     r"stream:  WEBHOOKS\n"),
    ("store: attempt records", "the embedded server stores each attempt record",
     r"stream:  WEBHOOKS_ATTEMPTS"),
    ("store: other streams", "dead letters, parked retries",
     r"stream:  "),
    ("delivery: jethook's attempt", "decode, build the request, classify, ack, log",
     r"forward\.\(\*destination\)\.(start|attempt|try)"),
    ("delivery: fetch", "pull requests to the consumer",
     r"forward\.\(\*destination\)\.(run|fetch)|pullConsumer"),
    ("delivery: net/http client", "the transport's connection goroutines",
     r"persistConn|net/http\.\(\*Transport\)"),
    ("index: tail and writer", "attempt records read back, webhooks indexed",
     r"store\.\(\*tailer\)|store\.\(\*writer\)|store\.\(\*index\)|pebble"),
    ("NATS server: client connections", "parse publishes, acks and fetches; deliver messages",
     r"nats-server/v2/server\.\(\*client\)"),
    ("NATS server: other", "consumers, timers, housekeeping",
     r"nats-server"),
    ("NATS client", "nats.go's read loop, acks, publish futures",
     r"nats-io/nats\.go"),
    ("Go runtime: GC", "garbage collection",
     r"gcBgMarkWorker|gcDrain|bgsweep|bgscavenge|gcAssist"),
    ("Go runtime: scheduler", "finding work, parking, waking",
     r"runtime\.(mcall|schedule|findRunnable|park_m|goexit0|mstart)"),
]


def samples(profile):
    out = subprocess.run(["go", "tool", "pprof", "-traces", profile],
                         capture_output=True, text=True, check=True).stdout
    for block in out.split("-----------+-------------------------------------------------------"):
        lines = [l for l in block.strip().splitlines() if l.strip()]
        for l in lines:
            m = re.match(r"\s*([\d.]+)(ms|s)\s", l)
            if m:
                ms = float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
                yield ms, "\n".join(lines) + "\n"
                break


def main():
    profile, webhooks = sys.argv[1], int(sys.argv[2])
    parts = collections.OrderedDict((p[0], 0.0) for p in PARTS)
    parts["other"] = 0.0
    total = 0.0
    for ms, stack in samples(profile):
        total += ms
        for name, _, pattern in PARTS:
            if re.search(pattern, stack):
                parts[name] += ms
                break
        else:
            parts["other"] += ms
    what = {p[0]: p[1] for p in PARTS}
    print("%-34s %9s %6s %12s  %s" % ("PART", "CPU", "SHARE", "PER WEBHOOK", "WHAT"))
    for name, ms in parts.items():
        print("%-34s %7.0fms %5.1f%% %10.1fµs  %s" % (name, ms, 100 * ms / max(total, 1), ms * 1000 / max(webhooks, 1), what.get(name, "")))
    print("%-34s %7.0fms %5.1f%% %10.1fµs" % ("total", total, 100.0, total * 1000 / max(webhooks, 1)))


if __name__ == "__main__":
    main()
