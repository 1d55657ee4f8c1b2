-- wrk script: POST the AdmissionReview in $REVIEW (default review.json) to the path given on the command line.
local f = assert(io.open(os.getenv("REVIEW") or "review.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
