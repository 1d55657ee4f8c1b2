#!/bin/sh
# External data latency: the typical load set (make-load.py) plus one
# externalData mutator (Gatekeeper's docs' AssignMetadata: the requesting
# user's owner annotation from a provider), against a local HTTPS provider
# (the tests' tag-to-digest provider, tests/examples/provider.rs) on
# 127.0.0.1, with and without sartor's answer cache; the typical set alone
# first, as the reference.
#
#   crates/webhook/load/external.sh [DURATION] [CONNECTIONS]   (defaults: 20s 16)
#
# Prints a table: requests/s, p50, p99, and the provider calls made.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
duration=${1:-20s}
connections=${2:-16}
cd "$root"
cargo build --release -q -p sartor
cargo build --release -q -p sartor-tests --example provider
target=${CARGO_TARGET_DIR:-$root/target}/release
work=$(mktemp -d)
server=
provider=
trap 'kill $server $provider 2>/dev/null || true; rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work"
mkdir -p "$work/external"
cp "$work/typical/"* "$work/external/"
cp "$here/annotate-owner.yaml" "$work/external/"
# One certificate for every run, so the provider trusts the client throughout.
"$target/sartor" serve --mutators "$work/typical" --self-signed --cert-dir "$work/certs" \
    --addr 127.0.0.1:18443 --metrics-addr 127.0.0.1:18888 2>/dev/null &
server=$!
until [ -s "$work/certs/tls.key" ]; do sleep 0.1; done
kill $server; wait $server || true; server=
"$target/examples/provider" my-provider "$work/certs/ca.crt" "$work/external/provider.yaml" \
    2>"$work/provider.log" &
provider=$!
until [ -s "$work/external/provider.yaml" ]; do sleep 0.1; done
run() { # NAME SET FLAGS...
    name=$1 set=$2
    shift 2
    "$target/sartor" serve --mutators "$work/$set" --tls-cert-file "$work/certs/tls.crt" \
        --tls-key-file "$work/certs/tls.key" --addr 127.0.0.1:18443 \
        --metrics-addr 127.0.0.1:18888 "$@" 2>"$work/$name.log" &
    server=$!
    until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
    echo "== $name: $(curl -s --cacert "$work/certs/ca.crt" https://localhost:18443/v1/mutate \
        --data-binary @"$work/review.json" | python3 -c 'import base64, json, sys
response = json.load(sys.stdin)["response"]
ops = json.loads(base64.b64decode(response.get("patch", "W10=")))
print(response["allowed"], len(ops), "patch operations; the owner annotation:",
      [op["value"] for op in ops if op["path"].endswith("owner")] or
      [op["value"].get("owner") for op in ops if op["path"] == "/metadata/annotations"])')"
    REVIEW="$work/review.json" wrk -t1 -c"$connections" -d"$duration" --latency \
        -s "$here/post.lua" https://127.0.0.1:18443/v1/mutate | tee "$work/wrk.out"
    calls=$(curl -s http://127.0.0.1:18888/metrics |
        awk '/^sartor_provider_requests_total/ {n += $2} END {print n + 0}')
    rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out")
    p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.out")
    p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.out")
    echo "$name $rps $p50 $p99 $calls" >>"$work/results"
    kill -TERM $server
    wait $server || true
    server=
}
run typical typical
run external-cached external
run external-uncached external --provider-cache-ttl 0
echo
echo "| run | requests/s | p50 | p99 | provider calls |"
echo "|---|---:|---:|---:|---:|"
awk '{printf "| %s | %.0f | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$work/results"
