#!/bin/sh
# Memory of `sartor serve` with many mutators loaded, idle and under load.
#
#   crates/webhook/load/rss.sh [N...]      (default: 1000 10000)
#
# For each N, make-load.py writes N mutators (the typical set, then copies
# aimed at other kinds: the Pod meets the same 11 mutators whatever N is).
# The server loads them from files; RSS (VmRSS from /proc) is read once it is
# ready and idle, then after 10 s of wrk driving the typical Pod (16
# connections), with the peak (VmHWM).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
cargo build --release -q -p sartor
bin=${CARGO_TARGET_DIR:-$root/target}/release/sartor
work=$(mktemp -d)
server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
counts=${*:-1000 10000}
python3 "$here/make-load.py" "$work" $counts >/dev/null
kib() { awk -v key="$1:" '$1 == key {print $2}' "/proc/$server/status"; }
printf '%-9s %-10s %-14s %-14s %s\n' mutators "load (s)" "idle RSS MiB" "load RSS MiB" "peak MiB"
for n in $counts; do
    started=$(date +%s.%N)
    "$bin" serve --mutators "$work/scaled-$n" --self-signed --cert-dir "$work/certs" \
        --addr 127.0.0.1:18443 --metrics-addr 127.0.0.1:18888 --log-format json \
        2>"$work/$n.log" &
    server=$!
    until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
    loaded=$(echo "$(date +%s.%N) - $started" | bc)
    sleep 2
    idle=$(kib VmRSS)
    REVIEW="$work/review.json" wrk -t1 -c16 -d10s -s "$here/post.lua" \
        https://127.0.0.1:18443/v1/mutate >/dev/null
    busy=$(kib VmRSS)
    peak=$(kib VmHWM)
    printf '%-9s %-10.1f %-14.1f %-14.1f %.1f\n' "$n" "$loaded" \
        "$(echo "$idle / 1024" | bc -l)" "$(echo "$busy / 1024" | bc -l)" "$(echo "$peak / 1024" | bc -l)"
    kill -TERM $server
    wait $server || true
    server=
done
