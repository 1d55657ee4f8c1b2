-- wrk script: POST the AdmissionReview in $REVIEW, and check every answer:
-- 200, and byte for byte one of the bodies in the files $ALLOWED lists
-- (colon-separated). Prints the counts when the run ends.
local f = assert(io.open(os.getenv("REVIEW") or "review.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

-- $DELAY_MS: a pause before each request, for a moderate rate (the soak).
if os.getenv("DELAY_MS") then
    local pause = tonumber(os.getenv("DELAY_MS"))
    function delay()
        return pause
    end
end

local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    allowed = {}
    for path in string.gmatch(os.getenv("ALLOWED") or "", "[^:]+") do
        local g = assert(io.open(path, "rb"))
        allowed[g:read("*a")] = true
        g:close()
    end
    answered, failed, other = 0, 0, 0
end

function response(status, headers, body)
    if status ~= 200 then
        failed = failed + 1
    elseif allowed[body] then
        answered = answered + 1
    else
        other = other + 1
    end
end

function done(summary, latency, requests)
    local a, f, o = 0, 0, 0
    for _, thread in ipairs(threads) do
        a = a + thread:get("answered")
        f = f + thread:get("failed")
        o = o + thread:get("other")
    end
    io.write(string.format("checked: %d one set's answer, %d not 200, %d neither set's answer\n", a, f, o))
end
