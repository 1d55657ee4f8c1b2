#!/usr/bin/env bash
# sartor beside Gatekeeper v3.23.1, on the same machine, in one interleaved run.
#
# What runs:
# - Gatekeeper's own mutation benchmarks, unmodified, from its module at the
#   version pinned in go/go.mod (pkg/mutation/system_benchmark_test.go and
#   pkg/mutation/mutators/{assign,assignimage,assignmeta,modifyset}/
#   *_benchmark_test.go). go/go.sum carries their test dependencies, so
#   `go test` builds them straight from the module cache; nothing of
#   Gatekeeper's is copied here. (Do not `go mod tidy` in go/: it would drop
#   the test dependencies of Gatekeeper's packages.)
# - our own Go benchmarks (go/shapes/shapes_test.go) driving Gatekeeper's
#   library the way its webhook does (mutation.NewSystem, mutators.MutatorFor*
#   on decoded mutators, System.Upsert, System.Mutate on a types.Mutable with
#   the Namespace, Source Original, CREATE), with the shapes of sartor's
#   benches/scale.rs: a 3-container Pod through N mutators of which 10 match,
#   a 500-entry ConfigMap through N matching Assigns, the webhook load test's
#   Pod through its typical and heavy sets of 100 mutators (written by
#   crates/webhook/load/make-load.py into OUT/load; each mutator's spec is
#   read by both, Gatekeeper's under its own apiVersion), and the "empty
#   Pod, Assign applies" row of benches/gatekeeper.rs. Gatekeeper mutates in
#   place, so its object is deep-copied outside the timer; sartor's
#   System::mutate reads the object and makes its one copy inside the timer.
# - sartor's criterion benches of the same shapes (benches/gatekeeper.rs,
#   benches/scale.rs).
#
# Before timing, the script checks that both ends make the same object of
# every realistic shape (sartor's scale bench and the Go test TestDumpResults
# write them; they are compared as JSON).
#
# Then, ROUNDS times, for each group of shapes: the Go benchmarks of the group,
# then sartor's criterion group, so both see the same machine load. Reported:
# per shape, the median over rounds of sartor's criterion median, the median
# over rounds x GO_COUNT of Go's ns/op, the median of the per-round ratios
# (Gatekeeper / sartor, each from the two runs of one round, so "3.0x" means
# sartor took a third of the time), and the lowest and highest per-round
# ratio. Go runs with its default GOMAXPROCS, all cores (its garbage collector
# works beside the benchmark when a core is free; GOMAXPROCS=1 in the
# environment pins it to one); sartor's benches are single-threaded.
#
# Usage: crates/engine/benches/gatekeeper/compare.sh [micro|scale|load|all]
#          (scale includes load: the load test's sets alone)
#        OUT=dir crates/engine/benches/gatekeeper/compare.sh table
#          (the table again from a finished run's raw outputs in dir)
#   env: ROUNDS (3), GO_BENCHTIME (300ms), GO_COUNT (2),
#        CRITERION_ARGS ("--warm-up-time 1 --measurement-time 2"),
#        OUT (a new temporary directory: raw outputs and table.md)
# Needs: go (1.26; Gatekeeper's module and its dependencies are fetched
# through the Go module proxy on first use), cargo, python3.
# Takes: about 12 minutes with the defaults on a 2-core VM, plus the first
# build (about 6 minutes for Gatekeeper's test binaries, 5 for the benches).
set -euo pipefail

what=${1:-all}
if [[ $what == table && -z ${OUT:-} ]]; then
  echo "table: set OUT to a finished run's directory" >&2
  exit 2
fi
ROUNDS=${ROUNDS:-3}
GO_BENCHTIME=${GO_BENCHTIME:-300ms}
GO_COUNT=${GO_COUNT:-2}
CRITERION_ARGS=${CRITERION_ARGS:---warm-up-time 1 --measurement-time 2}
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d -t sartor-vs-gatekeeper.XXXXXX)}
mkdir -p "$OUT/bin" "$OUT/dump-sartor" "$OUT/dump-gatekeeper"
export GOFLAGS="${GOFLAGS:-} -modcacherw -buildvcs=false"
gk=github.com/open-policy-agent/gatekeeper/v3/pkg/mutation
echo "raw outputs in $OUT" >&2

if [[ $what != table ]]; then
# --- build ------------------------------------------------------------------
echo "building Gatekeeper's benchmark binaries..." >&2
(
  cd "$here/go"
  go test -c -o "$OUT/bin/system.test" "$gk"
  for p in assign assignimage assignmeta modifyset; do
    go test -c -o "$OUT/bin/$p.test" "$gk/mutators/$p"
  done
  go test -c -o "$OUT/bin/shapes.test" ./shapes
)
echo "building sartor's benches..." >&2
cd "$here" && cargo bench -p sartor-engine --bench gatekeeper --bench scale --no-run \
  --message-format=json >"$OUT/cargo.json"
bench_bin() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[2] and m.get("executable"):
        print(m["executable"])' "$OUT/cargo.json" "$1"
}
sartor_gatekeeper=$(bench_bin gatekeeper)
sartor_scale=$(bench_bin scale)

# The load test's Pod and sets, for both ends.
python3 "$here/../../../webhook/load/make-load.py" "$OUT/load"
export SARTOR_LOAD_DIR="$OUT/load"

# --- same results -----------------------------------------------------------
echo "checking that both make the same objects..." >&2
SARTOR_BENCH_DUMP="$OUT/dump-sartor" CRITERION_HOME="$OUT/criterion-dump" \
  "$sartor_scale" --bench 'no benchmark has this name' >/dev/null
(cd "$OUT" && SARTOR_GK_DUMP="$OUT/dump-gatekeeper" "$OUT/bin/shapes.test" \
  -test.run '^TestDumpResults$' >/dev/null)
python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
names = sorted(os.listdir(os.path.join(out, "dump-gatekeeper")))
assert names, "Gatekeeper wrote no results"
for name in names:
    with open(os.path.join(out, "dump-sartor", name)) as f:
        s = json.load(f)
    with open(os.path.join(out, "dump-gatekeeper", name)) as f:
        g = json.load(f)
    if s != g:
        sys.exit(f"{name}: sartor and Gatekeeper end with different objects")
print(f"same objects: {', '.join(n[:-5] for n in names)}", file=sys.stderr)
EOF

# --- interleaved rounds -----------------------------------------------------
# group | Go binary | Go -bench regexp | sartor bench binary | criterion filter
groups=()
if [[ $what == micro || $what == all ]]; then
  groups+=(
    "system|system.test|^BenchmarkSystem_Mutate$|$sartor_gatekeeper|^System_Mutate/empty object"
    "system-pod|shapes.test|^BenchmarkSystemMutateEmptyPod$|$sartor_gatekeeper|^System_Mutate/empty Pod"
    "assign|assign.test|^BenchmarkAssignMutator_Mutate$|$sartor_gatekeeper|^AssignMutator_Mutate/"
    "assignimage|assignimage.test|^BenchmarkAssignImageMutator_Mutate$|$sartor_gatekeeper|^AssignImageMutator_Mutate/"
    "modifyset|modifyset.test|^BenchmarkModifySetMutator_Mutate$|$sartor_gatekeeper|^ModifySetMutator_Mutate/"
    "assignmeta|assignmeta.test|^BenchmarkAssignMetadataMutator_|$sartor_gatekeeper|^AssignMetadataMutator_Mutate/"
  )
fi
if [[ $what == scale || $what == all ]]; then
  groups+=(
    "pod|shapes.test|^BenchmarkPodThroughN$|$sartor_scale|^pod through N mutators"
    "configmap|shapes.test|^BenchmarkConfigMapThroughN$|$sartor_scale|^configmap with 500 entries"
  )
fi
if [[ $what == scale || $what == load || $what == all ]]; then
  groups+=("load|shapes.test|^BenchmarkLoadSets$|$sartor_scale|^load test's Pod through a set of 100")
fi
[[ ${#groups[@]} -gt 0 ]] || { echo "usage: $0 [micro|scale|load|all]" >&2; exit 2; }

collect_criterion() { # round, criterion home
  python3 - "$1" "$2" >>"$OUT/sartor.tsv" <<'EOF'
import json, os, sys
rnd, home = sys.argv[1], sys.argv[2]
for root, dirs, files in os.walk(home):
    if os.path.basename(root) == "new" and "benchmark.json" in files:
        with open(os.path.join(root, "benchmark.json")) as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(root, "estimates.json")) as f:
            median = json.load(f)["median"]["point_estimate"]
        print(f"{rnd}\t{full_id}\t{median}")
EOF
}

: >"$OUT/sartor.tsv"
: >"$OUT/go.txt"
start=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
  for g in "${groups[@]}"; do
    IFS='|' read -r name gobin goregex sbin sfilter <<<"$g"
    echo "round $round/$ROUNDS: $name ($(($(date +%s) - start)) s)" >&2
    echo "round $round" >>"$OUT/go.txt"
    (cd "$OUT" && "$OUT/bin/$gobin" -test.run '^$' -test.bench "$goregex" \
      -test.benchtime "$GO_BENCHTIME" -test.count "$GO_COUNT") >>"$OUT/go.txt"
    home="$OUT/criterion-$round-$name"
    # shellcheck disable=SC2086 # CRITERION_ARGS is a list of flags
    CRITERION_HOME="$home" "$sbin" --bench --noplot $CRITERION_ARGS "$sfilter" \
      >>"$OUT/criterion.txt" 2>&1
    collect_criterion "$round" "$home"
  done
done
echo "timed rounds took $(($(date +%s) - start)) s" >&2
fi

# --- table ------------------------------------------------------------------
python3 - "$OUT" <<'EOF' | tee "$OUT/table.md"
import re, statistics, sys
out = sys.argv[1]
sartor = {}  # full_id -> {round: ns}
for line in open(f"{out}/sartor.tsv"):
    rnd, full_id, ns = line.rstrip("\n").split("\t")
    sartor.setdefault(full_id, {})[int(rnd)] = float(ns)
gatekeeper = {}  # name -> {round: [ns]}
rnd = 0
for line in open(f"{out}/go.txt"):
    if line.startswith("round "):
        rnd = int(line.split()[1])
        continue
    m = re.match(r"^(Benchmark\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
    if m:
        gatekeeper.setdefault(m.group(1), {}).setdefault(rnd, []).append(float(m.group(3)))

depths = [1, 2, 5, 10, 20]
rows = [
    ("System.Mutate, one Assign, empty object (no kind: nothing applies)",
     "System_Mutate/empty object, no kind", "BenchmarkSystem_Mutate"),
    ("System.Mutate, one Assign at `spec`, empty Pod (applies; ours on Gatekeeper's library)",
     "System_Mutate/empty Pod, Assign applies", "BenchmarkSystemMutateEmptyPod"),
]
for kind, go in [("Assign", "AssignMutator_Mutate"), ("AssignImage", "AssignImageMutator_Mutate"),
                 ("ModifySet", "ModifySetMutator_Mutate")]:
    for mode in ["always mutate", "never mutate"]:
        for d in depths:
            rows.append((f"{kind} {mode}, depth {d}", f"{go}/{mode}/{d}-depth",
                         f"Benchmark{go}/{mode.replace(' ', '_')}_{d}-depth"))
rows += [
    ("AssignMetadata always (adds a label to an empty object)",
     "AssignMetadataMutator_Mutate/always", "BenchmarkAssignMetadataMutator_Always"),
    ("AssignMetadata never (label already there)",
     "AssignMetadataMutator_Mutate/never", "BenchmarkAssignMetadataMutator_Never"),
]
for n in [10, 100, 1000, 10000]:
    rows.append((f"3-container Pod through {n:,} mutators, 10 matching",
                 f"pod through N mutators, 10 matching/{n}", f"BenchmarkPodThroughN/{n}"))
for n in [1, 10, 100, 1000]:
    rows.append((f"ConfigMap, 500 entries, through {n:,} matching Assigns",
                 f"configmap with 500 entries, N matching Assigns/{n}", f"BenchmarkConfigMapThroughN/{n}"))

for name, changing in [("typical", "11 change it"), ("heavy", "66 change it")]:
    rows.append((f"The webhook load test's Pod through its {name} set of 100 mutators ({changing})",
                 f"load test's Pod through a set of 100/{name}", f"BenchmarkLoadSets/{name}"))

def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"

print("| shape | sartor | Gatekeeper | ratio | per-round ratios |")
print("|---|---:|---:|---:|---:|")
for label, sid, gid in rows:
    s, g = sartor.get(sid), gatekeeper.get(gid)
    if not s or not g:
        continue
    s_med = statistics.median(s.values())
    g_med = statistics.median(v for vs in g.values() for v in vs)
    per_round = [statistics.median(g[r]) / s[r] for r in s if r in g]
    print(f"| {label} | {fmt(s_med)} | {fmt(g_med)} | {statistics.median(per_round):.1f}x | "
          f"{min(per_round):.1f}x – {max(per_round):.1f}x |")
EOF
