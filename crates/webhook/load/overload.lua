-- wrk script for overload.sh: POST the AdmissionReview in $REVIEW, and at the
-- end print how many answers (of any status) came back inside $DEADLINE_MS.
local f = assert(io.open(os.getenv("REVIEW") or "review.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
   local deadline_us = tonumber(os.getenv("DEADLINE_MS") or "1000") * 1000
   -- The share of answers faster than the deadline: all when the slowest
   -- was; else the percentile where latency crosses it (bisected).
   local share = 100
   if latency.max >= deadline_us then
      local low, high = 0, 100
      for _ = 1, 30 do
         local mid = (low + high) / 2
         if latency:percentile(mid) < deadline_us then low = mid else high = mid end
      end
      share = low
   end
   local within = math.floor(summary.requests * share / 100 + 0.5)
   local timeouts = summary.errors.timeout
   local asked = summary.requests + timeouts
   io.write(string.format("answers: %d, not 2xx: %d, timed out (no answer): %d\n",
      summary.requests, summary.errors.status, timeouts))
   io.write(string.format("inside the deadline (%d ms): %d of %d (%.2f%%)\n",
      deadline_us / 1000, within, asked, 100 * within / math.max(asked, 1)))
end
