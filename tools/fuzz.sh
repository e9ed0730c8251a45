#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/reliability/fuzz with clang (ASan + UBSan) into BUILD and runs each for
# SECONDS (default 60): first on its regression inputs (tests/reliability/fuzz/regressions/<target>: every input
# that once crashed), then fuzzing from seeds (the shared reference files, the bundled test model,
# the example XYZ). A crash, a sanitizer report or an exception other than flashmace::Error fails.
# Usage: tools/fuzz.sh BUILD [SECONDS]      (CTest: reliability.fuzz; needs clang and libclang-rt-14-dev)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$1
seconds=${2:-60}
reference=${FLASHMACE_REFERENCE_DIR:-$root/../shared/reference}
cmake -S "$root/tests/reliability/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build"

fuzz() {  # fuzz TARGET MAX_LEN SEED_FILES...
  local target=$1 max_len=$2; shift 2
  local corpus=$build/corpus/$target artifacts=$build/artifacts/$target/
  rm -rf "$corpus" "$artifacts"; mkdir -p "$corpus" "$artifacts"
  cp "$@" "$corpus/"
  local regressions=$root/tests/reliability/fuzz/regressions/$target
  if [ -d "$regressions" ]; then
    echo "fuzz: $target on $(ls "$regressions" | wc -l) regression input(s)"
    "$build/$target" "$regressions"/*
  fi
  echo "fuzz: $target for ${seconds} s from $# seed(s)"
  local status=0
  "$build/$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" > "$build/$target.log" 2>&1 || status=$?
  tail -n 25 "$build/$target.log"
  [ "$status" -eq 0 ] || { echo "fuzz: $target failed (status $status); the input is in $artifacts"; exit 1; }
}
# Truncated seeds still exercise the headers: the readers check every offset before reading.
fuzz fuzz_safetensors 65536 "$reference"/*.safetensors
fuzz fuzz_model_file 131072 "$root/potentials/testing/tiny-cuni-random.safetensors"
fuzz fuzz_extxyz 16384 "$root/examples/eval/cuni_fcc32.xyz"
echo "fuzz: all targets clean"
