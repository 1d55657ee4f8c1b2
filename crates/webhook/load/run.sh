#!/bin/sh
# Load test of `sartor serve` over TLS with keep-alive, with wrk (Debian: apt-get install wrk).
#
#   crates/webhook/load/run.sh [DURATION] [CONNECTIONS]     (defaults: 20s 16)
#
# Runs the same server on 127.0.0.1 three times: with no mutators (the floor:
# TLS, HTTP, JSON parse, skip rules, encode) and with each set of 100 mutators
# from make-load.py (typical: 11 of them change the Pod; heavy: 66 do), each
# time POSTing the same realistic Pod AdmissionReview, and prints a table:
# requests/s, the share of the floor's, p50 and p99.
#
# It also reads the server's own CPU time (user + system, /proc/PID/stat)
# around each wrk run and prints it per request: what the server spends,
# without the load generator's share of the two cores (on a busy machine it
# moves between rounds about as much as requests/s does).
#
# And it reads what else the machine did meanwhile: the CPU time of all
# processes (/proc/stat, steal from other VMs included) minus the server's
# and wrk's, as a share of the cores. On a quiet machine it reads 0-2%
# (the script's own probes); more means something else took CPU from the
# run, whose figures then say less (the table marks such rows "busy").
#
# BINS="before=/path/to/sartor after=/other/sartor" compares binaries in one
# run (each set runs once per binary, in turn; each binary's floor is its own);
# by default the binary is built from this checkout. ROUNDS=N repeats the
# whole cycle N times (default 1) and adds the median of each binary and set.
set -eu
# `times` and awk read and write decimal points.
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
duration=${1:-20s}
connections=${2:-16}
cd "$root"
if [ -z "${BINS:-}" ]; then
    cargo build --release -q -p sartor
    BINS="sartor=${CARGO_TARGET_DIR:-$root/target}/release/sartor"
fi
work=$(mktemp -d)
server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
python3 "$here/make-load.py" "$work"
echo "binaries: $BINS"
rounds=${ROUNDS:-1}
# Others' share of the cores above which a row is marked busy, in per cent.
busy=${BUSY:-10}
ticks=$(getconf CLK_TCK)
# The server's CPU time so far, in clock ticks (utime + stime).
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# All cores' busy and total time so far, in clock ticks.
machine() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
# The CPU time of this shell's finished children so far, in clock ticks, from
# what `times` wrote to $1 (`times` must run in this shell, not in $(...)).
children() { awk -v t="$ticks" 'NR == 2 {
    gsub(/s/, "", $1); gsub(/s/, "", $2); split($1, u, "m"); split($2, s, "m")
    printf "%.0f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * t}' "$1"; }
round=1
while [ "$round" -le "$rounds" ]; do
    for set in ${SETS:-empty typical heavy}; do
        for named in $BINS; do
            name=${named%%=*}
            bin=${named#*=}
            "$bin" serve --mutators "$work/$set" --self-signed --cert-dir "$work/certs" \
                --addr 127.0.0.1:18443 --metrics-addr 127.0.0.1:18888 --log-format json \
                2>"$work/$set.log" &
            server=$!
            until curl -sf http://127.0.0.1:18888/readyz >/dev/null; do sleep 0.1; done
            echo "== round $round, $set, $name: $(curl -s --cacert "$work/certs/ca.crt" \
                https://localhost:18443/v1/mutate --data-binary @"$work/review.json" | head -c 120)..."
            before=$(cpu $server)
            machine_before=$(machine)
            times >"$work/times.before"
            REVIEW="$work/review.json" wrk -t1 -c"$connections" -d"$duration" --latency \
                -s "$here/post.lua" https://127.0.0.1:18443/v1/mutate | tee "$work/wrk.out"
            after=$(cpu $server)
            machine_after=$(machine)
            times >"$work/times.after"
            # Others' share of the cores: busy time minus the server's and
            # the children's finished between the two `times` (wrk and tee,
            # and this script's probes, whose time is the run's own too).
            children_after=$(children "$work/times.after")
            children_before=$(children "$work/times.before")
            others=$(echo "$machine_before $machine_after" | awk -v s=$((after - before)) \
                -v w=$((${children_after:-0} - ${children_before:-0})) \
                '{printf "%.0f", 100 * ($3 - $1 - s - w) / ($4 - $2)}')
            curl -s http://127.0.0.1:18888/metrics | grep '^sartor_admission_requests_total'
            rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out")
            p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.out")
            p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.out")
            requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
            cpu_us=$(awk -v b="$before" -v a="$after" -v t="$ticks" -v n="$requests" \
                'BEGIN {printf "%.1f", (a - b) * 1000000 / t / n}')
            echo "$round $set $name $rps $p50 $p99 $cpu_us $others" >>"$work/results"
            kill -TERM $server
            wait $server || true
            server=
        done
    done
    round=$((round + 1))
done
echo
echo "| round | binary | mutators | requests/s | vs its floor | p50 | p99 | server CPU/request | floor's vs this | others' CPU |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
awk '$2 == "empty" {floor[$1 " " $3] = $4; cpu[$1 " " $3] = $7}
     {mark = ""; if ($8 + 0 > busy + 0) mark = " busy"
      printf "| %s | %s | %s | %.0f | %.0f%% | %s | %s | %s µs | %.0f%% | %s%%%s |\n", $1, $3, $2, $4,
             100 * $4 / floor[$1 " " $3], $5, $6, $7, 100 * cpu[$1 " " $3] / $7, $8, mark}' \
    busy="$busy" "$work/results"
# With several rounds, the median of each binary and set: a round's share of
# its floor pairs two runs that minutes of a shared machine's noise apart can
# move by a tenth.
if [ "$rounds" -gt 1 ]; then
    echo
    echo "| binary | mutators | median requests/s | median share of its floor | shares | median p99 | median server CPU/request | floor's CPU/request vs this | most others' CPU |"
    echo "|---|---|---:|---:|---|---:|---:|---:|---:|"
    python3 - "$work/results" <<'PY'
import re, statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
floor = {(r[0], r[2]): float(r[3]) for r in rows if r[1] == "empty"}
floor_cpu = {(r[0], r[2]): float(r[6]) for r in rows if r[1] == "empty"}
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
def ms(text):  # wrk writes 612.00us, 1.30ms, 1.20s, 1.50m
    number, unit = re.fullmatch(r"([0-9.]+)([a-z]+)", text).groups()
    return float(number) * UNITS[unit]
seen = {}
for r in rows:
    seen.setdefault((r[2], r[1]), []).append(
        (float(r[3]), 100 * float(r[3]) / floor[(r[0], r[2])], ms(r[5]),
         float(r[6]), 100 * floor_cpu[(r[0], r[2])] / float(r[6]), int(r[7])))
for (binary, mutators), runs in seen.items():
    shares = ", ".join("%.0f%%" % run[1] for run in runs)
    print("| %s | %s | %.0f | %.0f%% | %s | %.2f ms | %.1f µs | %.0f%% | %d%% |" % (
        binary, mutators, statistics.median(run[0] for run in runs),
        statistics.median(run[1] for run in runs), shares,
        statistics.median(run[2] for run in runs),
        statistics.median(run[3] for run in runs),
        statistics.median(run[4] for run in runs),
        max(run[5] for run in runs)))
PY
fi
