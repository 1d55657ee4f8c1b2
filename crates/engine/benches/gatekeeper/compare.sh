#!/usr/bin/env bash
# sartor beside Gatekeeper v3.23.1 and beside Gatekeeper's unreleased
# performance branch, on the same machine, in one interleaved run.
#
# What runs:
# - Gatekeeper's own mutation benchmarks, unmodified, from its module at the
#   version pinned in go/go.mod (pkg/mutation/system_benchmark_test.go and
#   pkg/mutation/mutators/{assign,assignimage,assignmeta,modifyset}/
#   *_benchmark_test.go). go/go.sum carries their test dependencies, so
#   `go test` builds them straight from the module cache; nothing of
#   Gatekeeper's is copied here. (Do not `go mod tidy` in go/: it would drop
#   the test dependencies of Gatekeeper's packages.)
# - the same benchmarks of Gatekeeper's performance branch
#   (agent/perf-bottleneck-followups, GK_PERF_COMMIT of GK_PERF_GIT), built
#   the same way from a copy of go/ in OUT/go-perf whose go.mod replaces
#   Gatekeeper's module with the branch's tree, extracted into
#   OUT/gatekeeper-perf (`git archive`; from a URL, a shallow fetch of the
#   commit first). Module versions the branch needs beyond go/go.sum come
#   through the Go module proxy (-mod=mod, in the copy only). Also the
#   system benchmarks the branch adds to system_benchmark_test.go
#   (BenchmarkSystem_Mutate{NonMatchingMutatorsLargeObject,
#   NonMatchingMutatorScale,MatchingMutatorsLargeObject,
#   SkipsPlaceholderScanWithoutTerminatingMutators,SelectorMatchingScale,
#   CandidateIndexScale}), which v3.23.1 lacks: for v3.23.1,
#   go/shapes/system_shapes_test.go runs a copy of them.
#   If the branch's source cannot be had or built, the script says so and
#   runs v3.23.1 only; GK_PERF=0 leaves the branch out deliberately.
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
#   Both Gatekeeper builds run them.
# - sartor's criterion benches of the same shapes (benches/gatekeeper.rs,
#   benches/scale.rs); the twins of the branch's new system benchmarks are in
#   benches/gatekeeper.rs (group System_Mutate<name>, the same sub-benchmark
#   names), each treating its object as the Go benchmark does.
#
# Before timing, the script checks that sartor and each Gatekeeper build make
# the same object of every realistic shape and of each of the branch's new
# system shapes (sartor's benches and the Go test TestDumpResults write them;
# they are compared as JSON).
#
# Then, ROUNDS times, for each group of shapes: v3.23.1's Go benchmarks of the
# group, the branch's, then sartor's criterion group, so all see the same
# machine load. Reported, per shape: the median over rounds of sartor's
# criterion median and, for each Gatekeeper, the median over rounds x GO_COUNT
# of Go's ns/op, the median of the per-round ratios (Gatekeeper / sartor, each
# from the two runs of one round, so "3.0x" means sartor took a third of the
# time), and the lowest and highest per-round ratio; "–" where that Gatekeeper
# has no such benchmark or was not run. Go runs with its default GOMAXPROCS,
# all cores (its garbage collector works beside the benchmark when a core is
# free; GOMAXPROCS=1 in the environment pins it to one); sartor's benches are
# single-threaded.
#
# Usage: crates/engine/benches/gatekeeper/compare.sh [micro|scale|load|perf|all]
#          (scale includes load: the load test's sets alone; perf: the
#          system benchmarks the performance branch adds)
#        OUT=dir crates/engine/benches/gatekeeper/compare.sh table
#          (the table again from a finished run's raw outputs in dir)
#   env: ROUNDS (3), GO_BENCHTIME (300ms), GO_COUNT (2),
#        CRITERION_ARGS ("--warm-up-time 1 --measurement-time 2"),
#        OUT (a new temporary directory: raw outputs and table.md),
#        GK_PERF (1; 0 leaves the performance branch out),
#        GK_PERF_GIT (https://github.com/open-policy-agent/gatekeeper.git: a
#          git directory, bare or not, or a URL, that holds the commit),
#        GK_PERF_COMMIT (f04df1581a37cc6801e15c0590f7d52dc2f5c4ff)
# Needs: go (1.26; Gatekeeper's module and its dependencies are fetched
# through the Go module proxy on first use), git, cargo, python3.
# Takes: about 22 minutes with the defaults on a 2-core VM (an estimate from
# shorter runs; the groups other than perf took about 12 before the branch
# was added), plus the first build (about 6 minutes for v3.23.1's test
# binaries, 2 more for the branch's, 5 for the benches).
set -euo pipefail

what=${1:-all}
case $what in
  micro | scale | load | perf | all | table) ;;
  *) echo "usage: $0 [micro|scale|load|perf|all|table]" >&2; exit 2 ;;
esac
if [[ $what == table && -z ${OUT:-} ]]; then
  echo "table: set OUT to a finished run's directory" >&2
  exit 2
fi
ROUNDS=${ROUNDS:-3}
GO_BENCHTIME=${GO_BENCHTIME:-300ms}
GO_COUNT=${GO_COUNT:-2}
CRITERION_ARGS=${CRITERION_ARGS:---warm-up-time 1 --measurement-time 2}
GK_PERF=${GK_PERF:-1}
GK_PERF_GIT=${GK_PERF_GIT:-https://github.com/open-policy-agent/gatekeeper.git}
GK_PERF_COMMIT=${GK_PERF_COMMIT:-f04df1581a37cc6801e15c0590f7d52dc2f5c4ff}
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$(mktemp -d -t sartor-vs-gatekeeper.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export GOFLAGS="${GOFLAGS:-} -modcacherw -buildvcs=false"
gk=github.com/open-policy-agent/gatekeeper/v3/pkg/mutation
echo "raw outputs in $OUT" >&2

# --- the performance branch's source ------------------------------------------
# Says why, in OUT/perf-skipped (the table repeats it), when it is left out.
perf_skip() {
  rm -f "$OUT/perf-commit"
  echo "Gatekeeper perf branch not run: $1" | tee "$OUT/perf-skipped" >&2
}

# Extracts GK_PERF_COMMIT's tree from the git directory $1 into
# OUT/gatekeeper-perf. A mirror that lacks some blobs (a snapshot without its
# largest files) cannot archive the whole tree: then every file it has is
# extracted, and the missing ones named (none of them is Go source, or the
# build fails).
perf_archive() {
  local gitdir=$1 dest=$OUT/gatekeeper-perf missing
  rm -rf "$dest" && mkdir -p "$dest" || return 1
  git -C "$gitdir" archive "$GK_PERF_COMMIT" 2>"$OUT/perf-archive.log" |
    tar -x -C "$dest" 2>>"$OUT/perf-archive.log" && return 0
  missing=$(git -C "$gitdir" ls-tree -r --full-tree "$GK_PERF_COMMIT" | awk '$2 == "blob" {print $3}' |
    git -C "$gitdir" cat-file --batch-check | awk '$2 == "missing" {print $1}') || return 1
  if [[ -z $missing ]]; then
    cat "$OUT/perf-archive.log" >&2
    return 1
  fi
  local -a keep
  mapfile -d '' -t keep < <(git -C "$gitdir" ls-tree -r -z --full-tree "$GK_PERF_COMMIT" |
    python3 -c '
import sys
missing = set(sys.argv[1].split())
for entry in sys.stdin.buffer.read().split(b"\0"):
    if entry:
        meta, path = entry.split(b"\t", 1)
        if meta.split()[2].decode() in missing:
            print("  left out, not in the git directory:", path.decode(errors="replace"), file=sys.stderr)
        else:
            sys.stdout.buffer.write(path + b"\0")' "$missing")
  rm -rf "$dest" && mkdir -p "$dest" || return 1
  # (git still complains of the missing blobs it does not archive.)
  git -C "$gitdir" --literal-pathspecs archive "$GK_PERF_COMMIT" -- "${keep[@]}" 2>>"$OUT/perf-archive.log" |
    tar -x -C "$dest" 2>>"$OUT/perf-archive.log" || {
    cat "$OUT/perf-archive.log" >&2
    return 1
  }
}

# The branch's tree into OUT/gatekeeper-perf, from a git directory or a URL.
perf_source() {
  local gitdir=$GK_PERF_GIT
  if [[ ! -d $gitdir ]]; then
    gitdir=$OUT/gatekeeper-perf.git
    echo "fetching Gatekeeper $GK_PERF_COMMIT from $GK_PERF_GIT..." >&2
    rm -rf "$gitdir"
    git init -q --bare "$gitdir" &&
      git -C "$gitdir" fetch -q --depth 1 "$GK_PERF_GIT" "$GK_PERF_COMMIT" || return 1
  fi
  git -C "$gitdir" cat-file -e "$GK_PERF_COMMIT^{commit}" 2>/dev/null || {
    echo "$GK_PERF_GIT has no commit $GK_PERF_COMMIT" >&2
    return 1
  }
  echo "extracting Gatekeeper $GK_PERF_COMMIT into $OUT/gatekeeper-perf..." >&2
  perf_archive "$gitdir" || return 1
  if [[ $gitdir != "$GK_PERF_GIT" ]]; then
    rm -rf "$gitdir"
  fi
  echo "$GK_PERF_COMMIT from $GK_PERF_GIT" >"$OUT/perf-commit"
}

# The branch's benchmark binaries into OUT/bin-perf, from a copy of go/ whose
# go.mod replaces Gatekeeper's module with OUT/gatekeeper-perf.
perf_build() {
  echo "building the perf branch's benchmark binaries..." >&2
  rm -rf "$OUT/go-perf" && cp -R "$here/go" "$OUT/go-perf" && cd "$OUT/go-perf" &&
    go mod edit -replace "github.com/open-policy-agent/gatekeeper/v3=$OUT/gatekeeper-perf" || return 1
  local -x GOFLAGS="$GOFLAGS -mod=mod"
  local p
  go test -c -o "$OUT/bin-perf/system.test" "$gk" || return 1
  for p in assign assignimage assignmeta modifyset; do
    go test -c -o "$OUT/bin-perf/$p.test" "$gk/mutators/$p" || return 1
  done
  go test -c -o "$OUT/bin-perf/shapes.test" ./shapes
}

if [[ $what != table ]]; then
rm -f "$OUT/perf-skipped" "$OUT/perf-commit"
mkdir -p "$OUT/bin" "$OUT/dump-sartor" "$OUT/dump-gatekeeper"
perf=0
if [[ $GK_PERF == 0 ]]; then
  perf_skip "GK_PERF=0"
elif ! perf_source; then
  perf_skip "no source: commit $GK_PERF_COMMIT could not be had from $GK_PERF_GIT"
else
  perf=1
fi

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
if [[ $perf == 1 ]] && ! (perf_build); then
  perf=0
  perf_skip "its benchmarks did not build"
fi
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
echo "checking that all make the same objects..." >&2
for sbin in "$sartor_scale" "$sartor_gatekeeper"; do
  SARTOR_BENCH_DUMP="$OUT/dump-sartor" CRITERION_HOME="$OUT/criterion-dump" \
    "$sbin" --bench 'no benchmark has this name' >/dev/null
done
dumps=("$OUT/dump-gatekeeper")
(cd "$OUT" && SARTOR_GK_DUMP="$OUT/dump-gatekeeper" "$OUT/bin/shapes.test" \
  -test.run '^TestDumpResults$' >/dev/null)
if [[ $perf == 1 ]]; then
  mkdir -p "$OUT/dump-gatekeeper-perf"
  dumps+=("$OUT/dump-gatekeeper-perf")
  (cd "$OUT" && SARTOR_GK_DUMP="$OUT/dump-gatekeeper-perf" "$OUT/bin-perf/shapes.test" \
    -test.run '^TestDumpResults$' >/dev/null)
fi
python3 - "$OUT/dump-sartor" "${dumps[@]}" <<'EOF'
import json, os, sys
sartor, builds = sys.argv[1], sys.argv[2:]
for build in builds:
    names = sorted(os.listdir(build))
    assert names, f"{build}: Gatekeeper wrote no results"
    for name in names:
        if not os.path.exists(os.path.join(sartor, name)):
            sys.exit(f"{name}: sartor wrote no result")
        with open(os.path.join(sartor, name)) as f:
            s = json.load(f)
        with open(os.path.join(build, name)) as f:
            g = json.load(f)
        if s != g:
            sys.exit(f"{name}: sartor and Gatekeeper ({os.path.basename(build)}) end with different objects")
    print(f"same objects ({os.path.basename(build)}): {', '.join(n[:-5] for n in names)}",
          file=sys.stderr)
EOF

# --- interleaved rounds -----------------------------------------------------
# group | v3.23.1's Go binary | the branch's | Go -bench regexp | sartor bench
# binary | criterion filter
groups=()
if [[ $what == micro || $what == all ]]; then
  groups+=(
    "system|system.test|system.test|^BenchmarkSystem_Mutate$|$sartor_gatekeeper|^System_Mutate/empty object"
    "system-pod|shapes.test|shapes.test|^BenchmarkSystemMutateEmptyPod$|$sartor_gatekeeper|^System_Mutate/empty Pod"
    "assign|assign.test|assign.test|^BenchmarkAssignMutator_Mutate$|$sartor_gatekeeper|^AssignMutator_Mutate/"
    "assignimage|assignimage.test|assignimage.test|^BenchmarkAssignImageMutator_Mutate$|$sartor_gatekeeper|^AssignImageMutator_Mutate/"
    "modifyset|modifyset.test|modifyset.test|^BenchmarkModifySetMutator_Mutate$|$sartor_gatekeeper|^ModifySetMutator_Mutate/"
    "assignmeta|assignmeta.test|assignmeta.test|^BenchmarkAssignMetadataMutator_|$sartor_gatekeeper|^AssignMetadataMutator_Mutate/"
  )
fi
if [[ $what == perf || $what == all ]]; then
  # v3.23.1 runs go/shapes' copies of these (shapes.test), the branch its own.
  for b in NonMatchingMutatorsLargeObject NonMatchingMutatorScale MatchingMutatorsLargeObject \
    SkipsPlaceholderScanWithoutTerminatingMutators SelectorMatchingScale CandidateIndexScale; do
    groups+=("$b|shapes.test|system.test|^BenchmarkSystem_Mutate$b\$|$sartor_gatekeeper|^System_Mutate$b(/.*)?\$")
  done
fi
if [[ $what == scale || $what == all ]]; then
  groups+=(
    "pod|shapes.test|shapes.test|^BenchmarkPodThroughN$|$sartor_scale|^pod through N mutators"
    "configmap|shapes.test|shapes.test|^BenchmarkConfigMapThroughN$|$sartor_scale|^configmap with 500 entries"
  )
fi
if [[ $what == scale || $what == load || $what == all ]]; then
  groups+=("load|shapes.test|shapes.test|^BenchmarkLoadSets$|$sartor_scale|^load test's Pod through a set of 100")
fi

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

go_bench() { # round, binary, regexp, output
  echo "round $1" >>"$4"
  (cd "$OUT" && "$2" -test.run '^$' -test.bench "$3" \
    -test.benchtime "$GO_BENCHTIME" -test.count "$GO_COUNT") >>"$4"
}

: >"$OUT/sartor.tsv"
: >"$OUT/go.txt"
rm -f "$OUT/go-perf.txt"
[[ $perf == 1 ]] && : >"$OUT/go-perf.txt"
start=$(date +%s)
for round in $(seq 1 "$ROUNDS"); do
  for g in "${groups[@]}"; do
    IFS='|' read -r name gobin perfbin goregex sbin sfilter <<<"$g"
    echo "round $round/$ROUNDS: $name ($(($(date +%s) - start)) s)" >&2
    go_bench "$round" "$OUT/bin/$gobin" "$goregex" "$OUT/go.txt"
    if [[ $perf == 1 ]]; then
      go_bench "$round" "$OUT/bin-perf/$perfbin" "$goregex" "$OUT/go-perf.txt"
    fi
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
import os, re, statistics, sys
out = sys.argv[1]
sartor = {}  # full_id -> {round: ns}
for line in open(f"{out}/sartor.tsv"):
    rnd, full_id, ns = line.rstrip("\n").split("\t")
    sartor.setdefault(full_id, {})[int(rnd)] = float(ns)

def go_results(path):
    """Benchmark name as printed -> {round: [ns/op]}."""
    results = {}
    if not os.path.exists(path):
        return results
    rnd = 0
    for line in open(path):
        if line.startswith("round "):
            rnd = int(line.split()[1])
            continue
        m = re.match(r"^(Benchmark\S+)\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            results.setdefault(m.group(1), {}).setdefault(rnd, []).append(float(m.group(2)))
    return results

def lookup(results, gid):
    # Go prints a name with -GOMAXPROCS appended when GOMAXPROCS > 1; names
    # such as ".../nonmatching-100" end in digits too, so try the name as
    # given first.
    if gid in results:
        return results[gid]
    for name, rounds in results.items():
        if re.fullmatch(re.escape(gid) + r"-\d+", name):
            return rounds
    return None

gatekeeper = go_results(f"{out}/go.txt")
perf = go_results(f"{out}/go-perf.txt")

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

# The system benchmarks the performance branch adds (v3.23.1: go/shapes' copy).
def system(bench, sub, label):
    sid = f"System_Mutate{bench}" + (f"/{sub}" if sub else "")
    rows.append((f"{bench}{'/' + sub if sub else ''}: {label}", sid, f"Benchmark{sid}"))

system("NonMatchingMutatorsLargeObject", None,
       "ConfigMap of 500 entries, 100 Assigns for Deployments (none applies)")
for n in [100, 1000]:
    system("NonMatchingMutatorScale", str(n), f"ConfigMap, {n:,} Assigns for Deployments (none applies)")
for state, how in [("fresh", "a fresh copy, made untimed"), ("already-mutated", "already mutated, in place")]:
    for n in [1, 10, 100, 1000]:
        system("MatchingMutatorsLargeObject", f"matching-{n}/data-500/{state}",
               f"ConfigMap of 500 entries through {n:,} matching Assigns, {how}")
for n in [500, 5000]:
    system("SkipsPlaceholderScanWithoutTerminatingMutators", f"data-{n}",
           f"ConfigMap of {n:,} entries, one Assign of a constant, a fresh copy made untimed")
for n in [1, 100, 1000]:
    system("SelectorMatchingScale", f"matching-{n}",
           f"{n:,} Assigns with label and namespace selectors, all matching, already mutated, copy timed")
for n in [0, 100, 1000]:
    system("CandidateIndexScale", f"matching-1/nonmatching-{n}",
           f"ConfigMap, 1 matching Assign and {n:,} for Deployments, already mutated, in place")

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

def cells(s, g):
    """Gatekeeper's median, the median per-round ratio, the per-round range."""
    if not g:
        return ["–", "–", "–"]
    g_med = statistics.median(v for vs in g.values() for v in vs)
    per_round = [statistics.median(g[r]) / s[r] for r in s if r in g]
    if not per_round:
        return [fmt(g_med), "–", "–"]
    return [fmt(g_med), f"{statistics.median(per_round):.1f}x",
            f"{min(per_round):.1f}x – {max(per_round):.1f}x"]

print("| shape | sartor | Gatekeeper v3.23.1 | ratio | per-round ratios "
      "| Gatekeeper perf branch | ratio | per-round ratios |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for label, sid, gid in rows:
    s, g, p = sartor.get(sid), lookup(gatekeeper, gid), lookup(perf, gid)
    if not s or not (g or p):
        continue
    s_med = statistics.median(s.values())
    print("| " + " | ".join([label, fmt(s_med)] + cells(s, g) + cells(s, p)) + " |")

print()
if os.path.exists(f"{out}/perf-commit"):
    print(f"Gatekeeper perf branch: agent/perf-bottleneck-followups at {open(f'{out}/perf-commit').read().strip()}.")
if os.path.exists(f"{out}/perf-skipped"):
    print(open(f"{out}/perf-skipped").read().strip() + ".")
print("The perf branch's system benchmarks (rows named after them) run against v3.23.1 "
      "as go/shapes/system_shapes_test.go's copy; ratios are Gatekeeper / sartor.")
EOF
