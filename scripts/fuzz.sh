#!/usr/bin/env bash
# Builds the libFuzzer programs of rankscope's parsers (clang, ASan+UBSan) and runs each for a fixed time.
#
#   scripts/fuzz.sh                    # every parser, 60 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh npy safetensors
#
# Parsers: npy safetensors csv config manifest vocab_txt vocab_json text tokenizer_json sweep_json sweep_toml
# pretrain_corpus (fuzz/fuzz_targets.hpp).
# Build folder: build/fuzz (override with FUZZ_BUILD). Each run starts from tests/fuzz_corpus/<parser>/ (seeds and the
# inputs that found bugs, kept as regression tests) plus the working corpus build/fuzz/corpus/<parser>/; crashing,
# hanging or leaking inputs are saved to build/fuzz/findings/<parser>/ (copy them into tests/fuzz_corpus/<parser>/ once
# fixed). Memory per fuzzer is capped at FUZZ_RSS_MB (1536), one input at FUZZ_TIMEOUT seconds (10).
# On the shared 2-core machine, builds and runs take the build lock: flock /tmp/rankscope-build.lock (set FUZZ_LOCK=""
# to skip it). A summary (parser, seconds, executions, findings) is printed and written to build/fuzz/summary.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${FUZZ_BUILD:-$root/build/fuzz}
seconds=${FUZZ_SECONDS:-60}
rss=${FUZZ_RSS_MB:-1536}
timeout=${FUZZ_TIMEOUT:-10}
lock=${FUZZ_LOCK-/tmp/rankscope-build.lock}
all=(npy safetensors csv config manifest vocab_txt vocab_json text tokenizer_json sweep_json sweep_toml pretrain_corpus)
parsers=("$@")
[ ${#parsers[@]} -eq 0 ] && parsers=("${all[@]}")

locked() { if [ -n "$lock" ]; then flock "$lock" "$@"; else "$@"; fi; }

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_BUILD_FUZZ=ON >/dev/null
fi
targets=()
for p in "${parsers[@]}"; do targets+=(--target "fuzz_$p"); done
locked cmake --build "$build" -j2 "${targets[@]}"

summary=$build/summary.tsv
printf 'parser\tseconds\texecutions\tfindings\n' > "$summary"
status=0
for p in "${parsers[@]}"; do
  corpus=$build/corpus/$p findings=$build/findings/$p
  mkdir -p "$corpus" "$findings" "$root/tests/fuzz_corpus/$p"
  log=$build/fuzz_$p.log
  echo "fuzz.sh: $p for ${seconds}s (log: $log)"
  # One process per parser; a finding stops that parser's run (libFuzzer's default) and is reported below: fix it,
  # keep the input in tests/fuzz_corpus/<parser>/ as a regression test, run again.
  set +e
  locked "$build/fuzz/fuzz_$p" -max_total_time="$seconds" -rss_limit_mb="$rss" -malloc_limit_mb="$rss" \
    -timeout="$timeout" -max_len=65536 -artifact_prefix="$findings/" -print_final_stats=1 \
    "$corpus" "$root/tests/fuzz_corpus/$p" > "$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  found=$(find "$findings" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\n' "$p" "$seconds" "${runs:-?}" "$found" >> "$summary"
  if [ $rc -ne 0 ] || [ "$found" -gt 0 ]; then
    status=1
    echo "fuzz.sh: $p FOUND A PROBLEM (exit $rc); inputs in $findings:" >&2
    grep -m3 -E 'ERROR|SUMMARY|terminate|deadly' "$log" >&2 || true
  fi
done
column -t "$summary"
exit $status
