#!/usr/bin/env bash
# On a CUDA machine (PyTorch with CUDA, CMake, Ninja; no internet needed): build flashmace against
# that machine's LibTorch, run the GPU tests (ctest -L gpu), then the benchmark table of the fast
# and reference paths. Everything it needs beyond the machine comes from one folder, ASSETS:
#   ASSETS/*.deb              nlohmann-json3-dev, libgtest-dev, googletest (Debian 12; `apt-get download` them)
#   ASSETS/reference/         the shared reference files (../shared/reference)
#   ASSETS/mp0-medium-f32.safetensors   tools/make_random_model.py mp0-medium ... --dtype float32
#   ASSETS/sc_models/         the small models of the SC tests' fixture (build/tests/sc/models: all
#                             but mp0-small and mp0-medium; mp0-medium-f32 stands in for the latter),
#                             since the fixture itself needs mace-torch
# Usage: tools/gpu_check.sh ASSETS OUT [--tests-only|--bench-only|--quick|--large|--build-only]
# (--quick: the tests and the fast path's float32 table only.)
# (--large: only the largest systems, 256,000 and 1,000,188 atoms float32, 256,000 and 500,000 float64,
#  one step each.)
# OUT receives build.log, ctest.log and bench-*.json / bench.log.
set -euo pipefail
assets=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
mode=${3:-all}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${FLASHMACE_PYTHON:-python3}
build=${FLASHMACE_BUILD_DIR:-$root/build-gpu}

prefix=$build/deps
mkdir -p "$prefix"
for deb in "$assets"/*.deb; do dpkg -x "$deb" "$prefix"; done
echo "gpu_check: $($python -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))')"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHMACE_PYTHON="$python" \
  -DFLASHMACE_LAMMPS=OFF -DFLASHMACE_REFERENCE_DIR="$assets/reference" \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -DGTest_DIR="$prefix/usr/lib/x86_64-linux-gnu/cmake/GTest" \
  > "$out/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" >> "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "gpu_check: built"
[ "$mode" = "--build-only" ] && exit 0

if [ "$mode" = "all" ] || [ "$mode" = "--tests-only" ] || [ "$mode" = "--quick" ]; then
  mkdir -p "$build/tests/sc/models"
  cp "$assets"/sc_models/*.safetensors "$build/tests/sc/models/"
  cp "$assets/mp0-medium-f32.safetensors" "$build/tests/sc/models/mp0-medium.safetensors"
  # -FS sc_models: the SC models are in place (their fixture would need mace-torch).
  (cd "$build" && ctest -R export_reference_models > /dev/null && ctest -L gpu -FS sc_models --output-on-failure) 2>&1 |
    tee "$out/ctest.log" | grep -E "tests passed|Failed|\*\*\*|Skipped" | tail -30
fi
[ "$mode" = "--tests-only" ] && exit 0

bench() {  # bench NAME ARGS...: one flashmace-bench run, table to bench.log, JSON to bench-NAME.json
  local name=$1; shift
  echo "== $name: flashmace-bench $*" | tee -a "$out/bench.log"
  "$build/bin/flashmace-bench" --model "$assets/mp0-medium-f32.safetensors" --device cuda --a 3.61 \
    --json "$out/bench-$name.json" "$@" 2>&1 | tee -a "$out/bench.log" || echo "($name failed)" | tee -a "$out/bench.log"
}
if [ "$mode" = "--large" ]; then
  # The largest systems, one step each: float32 up to 1,000,188 atoms, float64 up to 500,000.
  for cells in 40 63; do
    bench "fast-f32-c$cells" --path fast --dtype float32 --cells $cells --warmup 0 --steps 1 --no-breakdown
  done
  for cells in 40 50; do
    bench "fast-f64-c$cells" --path fast --dtype float64 --cells $cells --warmup 0 --steps 1 --no-breakdown
  done
  exit 0
fi
if [ "$mode" = "--quick" ]; then
  for cells in 6 10 16 25; do
    bench "fast-f32-c$cells" --path fast --dtype float32 --cells $cells --warmup 2 --steps 3
  done
  bench "no-cuda-graph-f32-c6" --path fast --dtype float32 --cells 6 --warmup 2 --steps 3 --no-breakdown --cuda-graph off
  exit 0
fi
# Model load time: the specialised SC and conv TP kernels compiled (empty cache), then from the cache.
export FLASHMACE_SC_CACHE=$build/sc-cache
rm -rf "$FLASHMACE_SC_CACHE"
for pass in uncached cached; do
  start=$(date +%s.%N)
  "$build/bin/flashmace-eval" --model "$assets/mp0-medium-f32.safetensors" --device cuda --xyz "$root/examples/eval/cuni_fcc32.xyz" > /dev/null
  echo "model load + one evaluation ($pass kernels): $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" "$(date +%s.%N)" "$start") s" | tee -a "$out/bench.log"
done
# The size table (864 ... 62,500 atoms), float32 and float64, then the variants at 16,384 atoms (and
# the unshared radial MLP also at 62,500).
for cells in 6 10 16 25; do
  bench "fast-f32-c$cells" --path fast --dtype float32 --cells $cells --warmup 2 --steps 3
done
for cells in 10 16 25; do
  bench "fast-f64-c$cells" --path fast --dtype float64 --cells $cells --warmup 1 --steps 3 --no-breakdown
done
for cells in 16 25; do
  bench "tf32-f32-c$cells" --path fast --dtype float32 --cells $cells --warmup 2 --steps 3 --no-breakdown --tf32
done
bench "no-cuda-graph-f32-c6" --path fast --dtype float32 --cells 6 --warmup 2 --steps 3 --no-breakdown --cuda-graph off
bench "reference-f32-c10" --path reference --dtype float32 --cells 10 --warmup 2 --steps 3 --no-breakdown
bench "recompute-f32-c16" --path fast --dtype float32 --cells 16 --warmup 2 --steps 3 --no-breakdown \
  --edge-chunk 1277952 --atom-chunk 16384
bench "per-edge-first-layer-f32-c16" --path fast --dtype float32 --cells 16 --warmup 2 --steps 3 --no-breakdown \
  --no-reassociate
bench "sc-generic-f32-c16" --path fast --dtype float32 --cells 16 --warmup 2 --steps 3 --no-breakdown --sc generic
for cells in 16 25; do
  bench "unpaired-radial-f32-c$cells" --path fast --dtype float32 --cells $cells --warmup 2 --steps 3 --no-breakdown \
    --radial-pairs off
done
