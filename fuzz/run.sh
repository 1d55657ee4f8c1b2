#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) each, one after another,
# one process at a time. Exits non-zero when any target crashes, hangs or
# runs out of memory; its reproducer is left in fuzz/artifacts/TARGET/.
#
#   fuzz/run.sh            # 60 s per target
#   fuzz/run.sh 5          # a CI smoke run
#   fuzz/run.sh 3600 engine loader   # chosen targets, an hour each
set -u
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(location loader compile engine admission external_data playground)
fi
cargo +nightly fuzz build || exit 1
failed=()
for target in "${targets[@]}"; do
    echo "=== $target: ${seconds}s"
    # The checked-in seeds are read from fuzz/corpus/TARGET; what a run adds
    # goes there too (git ignores it; see fuzz/.gitignore).
    if ! cargo +nightly fuzz run "$target" -- \
        -max_total_time="$seconds" -jobs=1 -workers=1 \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1; then
        failed+=("$target")
    fi
    # libFuzzer's -jobs mode logs the job to ./fuzz-0.log: keep it with the artifacts.
    mkdir -p fuzz/artifacts/"$target"
    [ -f fuzz-0.log ] && mv fuzz-0.log fuzz/artifacts/"$target"/last-run.log
done
if [ "${#failed[@]}" -ne 0 ]; then
    echo "crashed: ${failed[*]} (reproducers in fuzz/artifacts/)" >&2
    exit 1
fi
echo "no crashes: ${targets[*]}"
