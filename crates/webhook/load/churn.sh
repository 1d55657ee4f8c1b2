#!/bin/sh
# Churn under load: `sartor serve` answering the same Pod (make-load.py's
# review.json) while its mutator file is rewritten every 100 ms and its
# certificate every 3 s, against the same server without churn.
#
#   crates/webhook/load/churn.sh [DURATION] [CONNECTIONS]    (defaults: 20s 16)
#   SOAK=MINUTES crates/webhook/load/churn.sh                 (the soak)
#
# The mutator file cycles through: the typical set (100 mutators), the heavy
# set (100 others), a broken file (the last good set stays), the typical set
# with two mutators in schema conflict. Every answer is checked by
# check.lua: 200, and byte for byte the typical or the heavy set's answer,
# never a mix. The certificate is replaced by another leaf of the same CA
# (openssl), key first then certificate, each by a rename. Prints a table:
# requests, failures, answers of neither set, wrk's socket errors, p50, p99.
#
# With SOAK=MINUTES: one run of that many minutes at a moderate rate (2
# connections, 2 ms between requests), the mutator file rewritten every
# second and the certificate every minute, sampling the server's RSS and
# open file descriptors every minute; prints them as a table.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
duration=${1:-20s}
connections=${2:-16}
cd "$root"
cargo build --release -q -p sartor
bin=${CARGO_TARGET_DIR:-$root/target}/release/sartor
work=$(mktemp -d)
echo "work: $work"
server=
churn=
trap 'kill $server $churn 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work" >/dev/null
mkdir -p "$work/certs" "$work/watched" "$work/variants"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=churn-ca -keyout "$work/certs/ca.key" -out "$work/certs/ca.crt" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/certs/san"
for i in 0 1 2 3; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
        -keyout "$work/certs/leaf$i.key" -out "$work/certs/leaf$i.csr" 2>/dev/null
    openssl x509 -req -days 2 -in "$work/certs/leaf$i.csr" -CA "$work/certs/ca.crt" \
        -CAkey "$work/certs/ca.key" -CAcreateserial -extfile "$work/certs/san" \
        -out "$work/certs/leaf$i.crt" 2>/dev/null
done
cp "$work/certs/leaf0.crt" "$work/certs/tls.crt"
cp "$work/certs/leaf0.key" "$work/certs/tls.key"
cp "$work/typical/100.yaml" "$work/variants/0"
cp "$work/heavy/100.yaml" "$work/variants/1"
printf 'apiVersion: mutations.sartor.dev/v1\nkind: Assign\nmetadata: [broken\n' >"$work/variants/2"
{ cat "$work/typical/100.yaml"; cat <<'YAML'
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: volume-by-name}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.volumes[name: data].emptyDir.medium"
  parameters: {assign: {value: Memory}}
---
apiVersion: mutations.sartor.dev/v1
kind: Assign
metadata: {name: volume-by-path}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: 'spec.volumes[path: "/data"].emptyDir.medium'
  parameters: {assign: {value: Memory}}
YAML
} >"$work/variants/3"
start() { # SET_FILE
    cp "$1" "$work/watched/set.yaml"
    "$bin" serve --mutators "$work/watched" --tls-cert-file "$work/certs/tls.crt" \
        --tls-key-file "$work/certs/tls.key" --addr 127.0.0.1:18443 \
        --metrics-addr 127.0.0.1:18888 --poll-interval-ms 50 2>>"$work/serve.log" &
    server=$!
    until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
}
stop() {
    kill -TERM $server
    wait $server || true
    server=
}
answer() { # SET_FILE OUT
    start "$1"
    curl -s --cacert "$work/certs/ca.crt" https://localhost:18443/v1/mutate \
        --data-binary @"$work/review.json" >"$2"
    stop
}
answer "$work/variants/0" "$work/typical.answer"
answer "$work/variants/1" "$work/heavy.answer"
load() { # NAME
    REVIEW="$work/review.json" ALLOWED="$work/typical.answer:$work/heavy.answer" \
        wrk -t1 -c"$connections" -d"$duration" --latency -s "$here/check.lua" \
        https://127.0.0.1:18443/v1/mutate | tee "$work/wrk.out"
    requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
    failed=$(awk '/^checked:/ {print $6}' "$work/wrk.out")
    other=$(awk '/^checked:/ {print $9}' "$work/wrk.out")
    sockets=$(awk '/Socket errors/ {print $4 $6 $8 $10}' "$work/wrk.out")
    p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.out")
    p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.out")
    reloads=$(curl -s http://127.0.0.1:18888/metrics |
        awk '/^sartor_mutator_reloads_total|^sartor_tls_certificate_reloads_total/ {printf "%s=%s ", $1, $2}')
    echo "$1|$requests|$failed|$other|${sockets:-none}|$p50|$p99" >>"$work/results"
    echo "== $1: $reloads"
}
churn() { # SECONDS_BETWEEN_FILES FILES_BETWEEN_CERTIFICATES
    turn=0
    while true; do
        turn=$((turn + 1))
        cp "$work/variants/$((turn % 4))" "$work/watched/.set.yaml"
        mv "$work/watched/.set.yaml" "$work/watched/set.yaml"
        if [ $((turn % $2)) -eq 0 ]; then
            leaf=$(((turn / $2) % 4))
            cp "$work/certs/leaf$leaf.key" "$work/certs/.tls.key"
            mv "$work/certs/.tls.key" "$work/certs/tls.key"
            cp "$work/certs/leaf$leaf.crt" "$work/certs/.tls.crt"
            mv "$work/certs/.tls.crt" "$work/certs/tls.crt"
        fi
        sleep "$1"
    done
}
if [ -n "${SOAK:-}" ]; then
    start "$work/variants/0"
    churn 1 60 &
    churn=$!
    REVIEW="$work/review.json" ALLOWED="$work/typical.answer:$work/heavy.answer" DELAY_MS=2 \
        wrk -t1 -c2 -d"${SOAK}m" --latency -s "$here/check.lua" \
        https://127.0.0.1:18443/v1/mutate >"$work/wrk.out" &
    load=$!
    echo "| minute | RSS | open file descriptors |"
    echo "|---:|---:|---:|"
    minute=0
    while [ "$minute" -le "$SOAK" ]; do
        rss=$(awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$server/status")
        fds=$(ls "/proc/$server/fd" | wc -l)
        echo "| $minute | $rss | $fds |"
        minute=$((minute + 1))
        [ "$minute" -le "$SOAK" ] && sleep 60
    done
    wait $load || true
    kill $churn; churn=
    grep -E "requests in|checked:|Socket errors|^ +(50|99)%" "$work/wrk.out"
    curl -s http://127.0.0.1:18888/metrics |
        awk '/^sartor_mutator_reloads_total|^sartor_tls_certificate_reloads_total/ {printf "%s=%s\n", $1, $2}'
    stop
    exit 0
fi
echo "== steady: the typical set, nothing changes"
start "$work/variants/0"
load steady
stop
echo "== churn: a mutator file every 100 ms, a certificate every 3 s"
start "$work/variants/0"
churn 0.1 30 &
churn=$!
load churn
kill $churn; churn=
stop
echo
echo "| run | requests | not 200 | neither set's answer | socket errors | p50 | p99 |"
echo "|---|---:|---:|---:|---|---:|---:|"
awk -F'|' '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7}' "$work/results"
