-- wrk script for bench/wrk.sh: POSTs a JSON body of exactly BODY bytes
-- (default 1024), unique per request. jethook's ingress takes an id-less
-- webhook's event id from a SHA-256 of route and body (provider none), so
-- a repeated body would be answered as a duplicate without being stored;
-- RUN keeps the bodies of two runs against one jethook apart.
-- Prints one RESULT line for the script to read.

local size = tonumber(os.getenv("BODY") or "1024")
local run = os.getenv("RUN") or "a" -- one per wrk run against the same jethook
local pad = string.rep("x", size)
local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local head = '{"id":"evt_' .. run .. '_' .. tid .. '_' .. counter .. '","type":"bench.event","pad":"'
  local body = head .. string.sub(pad, 1, math.max(size - #head - 2, 0)) .. '"}'
  return wrk.format(nil, nil, nil, body)
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format("RESULT requests=%d rps=%.0f p50_ms=%.2f p99_ms=%.2f non2xx=%d errors=%d\n",
    summary.requests, summary.requests / secs, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
