#!/bin/sh
# Load test of `sartor serve` over TLS with keep-alive, with wrk (Debian: apt-get install wrk).
#
#   crates/webhook/load/run.sh [DURATION] [CONNECTIONS]     (defaults: 20s 16)
#
# Runs the same server on 127.0.0.1 three times: with no mutators (the floor:
# TLS, HTTP, JSON parse, skip rules, encode) and with each set of 100 mutators
# from make-load.py (typical: 11 of them change the Pod; heavy: 66 do), each
# time POSTing the same realistic Pod AdmissionReview.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
duration=${1:-20s}
connections=${2:-16}
cd "$root"
cargo build --release -q -p sartor
bin=${CARGO_TARGET_DIR:-$root/target}/release/sartor
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work"
for set in ${SETS:-empty typical heavy}; do
    "$bin" serve --mutators "$work/$set" --self-signed --cert-dir "$work/certs" \
        --addr 127.0.0.1:18443 --metrics-addr 127.0.0.1:18888 --log-format json \
        2>"$work/$set.log" &
    server=$!
    until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
    echo "== $set: $(curl -s --cacert "$work/certs/ca.crt" https://localhost:18443/v1/mutate \
        --data-binary @"$work/review.json" | head -c 160)..."
    REVIEW="$work/review.json" wrk -t1 -c"$connections" -d"$duration" --latency \
        -s "$here/post.lua" https://127.0.0.1:18443/v1/mutate
    curl -s http://127.0.0.1:18888/metrics | grep '^sartor_admission_requests_total'
    kill -TERM $server
    wait $server
done
