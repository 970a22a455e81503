-- wrk's script for benchmarks/speed/serve_load.py: POST each body of a file in turn (one JSON body a line), and time
-- each answer by its status. Run with one connection a thread (wrk -t N -c N), so that request() and response() of a
-- thread alternate and the time between them is one request's latency; wrk's own histogram mixes every status, and
-- a fast 503 would hide a slow 200 in it.
--   wrk -t C -c C -d 20s --timeout 120s -s serve_load.lua URL -- PATH BODIES [API_KEY]
-- done() prints one JSON line: the served (200) latencies, the 503s' latencies and how many carried Retry-After, the
-- other statuses, wrk's socket errors and the run's duration.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } sentune_timespec;
  int clock_gettime(int clock, sentune_timespec *now);
]]
local clock = ffi.new("sentune_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, clock) -- CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads, count = {}, 0
function setup(thread)
  thread:set("number", count)
  count = count + 1
  table.insert(threads, thread)
end

function init(args)
  path = args[1]
  bodies = {}
  for line in io.lines(args[2]) do
    bodies[#bodies + 1] = line
  end
  headers = { ["Content-Type"] = "application/json" }
  if args[3] and args[3] ~= "" then
    headers["Authorization"] = "Bearer " .. args[3]
  end
  turn = (number * 97) % #bodies -- each connection starts elsewhere in the texts
  served, shed, other = {}, {}, {}
  retry_after = 0
end

function request()
  turn = turn % #bodies + 1
  started = now_ms()
  return wrk.format("POST", path, headers, bodies[turn])
end

function response(status, response_headers, body)
  local ms = now_ms() - started
  if status == 200 then
    served[#served + 1] = ms
  elseif status == 503 then
    shed[#shed + 1] = ms
    if response_headers["retry-after"] or response_headers["Retry-After"] then
      retry_after = retry_after + 1
    end
  else
    local key = tostring(status)
    other[key] = (other[key] or 0) + 1
  end
end

local function numbers(values)
  local parts = {}
  for i, v in ipairs(values) do
    parts[i] = string.format("%.3f", v)
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

function done(summary, latency, requests)
  local all_served, all_shed, all_other, with_retry = {}, {}, {}, 0
  for _, thread in ipairs(threads) do
    for _, v in ipairs(thread:get("served")) do all_served[#all_served + 1] = v end
    for _, v in ipairs(thread:get("shed")) do all_shed[#all_shed + 1] = v end
    for k, v in pairs(thread:get("other")) do all_other[k] = (all_other[k] or 0) + v end
    with_retry = with_retry + thread:get("retry_after")
  end
  local statuses = {}
  for k, v in pairs(all_other) do
    statuses[#statuses + 1] = string.format('"%s": %d', k, v)
  end
  local e = summary.errors
  io.write(string.format(
    '{"duration_us": %d, "served_ms": %s, "shed_ms": %s, "shed_with_retry_after": %d, "other_statuses": {%s}, ' ..
    '"socket_errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d}}\n',
    summary.duration, numbers(all_served), numbers(all_shed), with_retry, table.concat(statuses, ", "),
    e.connect, e.read, e.write, e.timeout))
end
