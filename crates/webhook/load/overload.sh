#!/bin/sh
# Overload: `sartor serve` (file mode, the typical set of make-load.py) on
# one core (taskset -c 0), wrk 4.1 on the other (taskset -c 1, one thread,
# keep-alive TLS, HTTP/1.1), POSTing the realistic Pod to
# /v1/mutate?timeout=$TIMEOUT so every request carries the API server's
# deadline. wrk is closed-loop: each connection has one request out at a
# time, so load is set by the connection count, not by a request rate.
#
#   crates/webhook/load/overload.sh [DURATION] [CONNECTIONS...]
#       (defaults: 15s, then 8 16 32 64: the search for one core's capacity)
#
# Each connection count gets a fresh server, and prints: wrk's output
# (requests/s, p50/p99 of every answer, shed ones included), the answers
# inside the deadline (overload.lua), the server's shed and request counters
# (/metrics), its peak RSS (VmHWM) and whether it was still running.
#
# TIMEOUT (default 1s: the install's timeoutSeconds) is the ?timeout= sent;
# FLAGS adds `sartor serve` flags (--max-in-flight 16, say); BIN is the
# binary (default: built from this checkout).
#
# EXTERNAL=1 adds the external.sh mutator (Gatekeeper's docs' annotate-owner,
# the owner annotation from a provider) with --provider-cache-ttl 0, against
# the tests' provider (tests/examples/provider.rs) on wrk's core: every
# admission then waits on an HTTPS call, so requests hold their slots while
# they wait, the way slow external data makes them pile up. Without it the
# handler is CPU alone and never waits: one core works on one request at a
# time, and what waits, waits in the runtime before its headers are read.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
duration=${1:-15s}
[ $# -gt 0 ] && shift
connections=${*:-8 16 32 64}
timeout=${TIMEOUT:-1s}
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}/release
if [ -z "${BIN:-}" ]; then
    cargo build --release -q -p sartor
    BIN=$target/sartor
fi
work=$(mktemp -d)
server=
provider=
trap 'kill $server $provider 2>/dev/null || true; rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work" >/dev/null
# One certificate for every run (the provider trusts its CA for clients).
"$BIN" serve --mutators "$work/empty" --self-signed --cert-dir "$work/certs" \
    --addr 127.0.0.1:18443 --metrics-addr 127.0.0.1:18888 2>/dev/null &
server=$!
until [ -s "$work/certs/tls.key" ]; do sleep 0.1; done
kill $server; wait $server || true; server=
set=typical
extra=
if [ "${EXTERNAL:-0}" = 1 ]; then
    [ -x "$target/examples/provider" ] || cargo build --release -q -p sartor-tests --example provider
    set=external
    mkdir -p "$work/external"
    cp "$work/typical/"* "$work/external/"
    cp "$here/annotate-owner.yaml" "$work/external/"
    taskset -c 1 "$target/examples/provider" my-provider "$work/certs/ca.crt" \
        "$work/external/provider.yaml" 2>"$work/provider.log" &
    provider=$!
    until [ -s "$work/external/provider.yaml" ]; do sleep 0.1; done
    extra="--provider-cache-ttl 0"
fi
deadline_ms=$(python3 -c "
import re, sys
t = sys.argv[1]
units = {'ms': 1, 's': 1000, 'm': 60000}
print(sum(float(n) * units[u] for n, u in re.findall(r'([0-9.]+)(ms|s|m)', t)))" "$timeout")
echo "binary: $BIN; mutators: $set; flags: ${FLAGS:-(none)} $extra; ?timeout=$timeout; $duration per point"
for c in $connections; do
    # shellcheck disable=SC2086 # FLAGS and extra are lists of flags
    taskset -c 0 "$BIN" serve --mutators "$work/$set" --tls-cert-file "$work/certs/tls.crt" \
        --tls-key-file "$work/certs/tls.key" --addr 127.0.0.1:18443 \
        --metrics-addr 127.0.0.1:18888 --log-format json ${FLAGS:-} $extra 2>"$work/server.log" &
    server=$!
    until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
    echo
    echo "== $c connections; $(grep -o '"max_\(in_flight\|queued\)":[0-9]*' "$work/server.log" | tr '\n' ' ')"
    REVIEW="$work/review.json" DEADLINE_MS=$deadline_ms taskset -c 1 wrk -t1 -c"$c" -d"$duration" \
        --timeout 5s --latency -s "$here/overload.lua" \
        "https://127.0.0.1:18443/v1/mutate?timeout=$timeout" | tee "$work/wrk.out"
    curl -s http://127.0.0.1:18888/metrics |
        grep -E '^sartor_(admission_(shed_total|requests_total|queue_wait_seconds_(count|sum))|provider_requests_total)' || true
    echo "peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$server/status")"
    if kill -0 "$server" 2>/dev/null; then echo "server: running"; else echo "server: GONE"; fi
    echo "shedding warnings logged: $(grep -c 'shedding admission requests' "$work/server.log" || true)"
    kill -TERM "$server"
    wait "$server" || true
    server=
done
