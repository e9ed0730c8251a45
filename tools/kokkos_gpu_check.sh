#!/usr/bin/env bash
# On a CUDA machine (PyTorch with CUDA, Open MPI, pytest; no internet needed): pair_style mace/flash/kk
# on the GPU. First bench/kokkos_style.py (LAMMPS's per-step sections of the kk and the plain style,
# and with ASSETS/libcupti_transfers.so the bytes copied between host and device per step), then the
# kk-against-plain tests (tests/kokkos/test_kokkos_style.py with FLASHMACE_KOKKOS_GPU=1: `-k on g 1`,
# 1 and 2 ranks on the one GPU). Everything beyond the machine comes from one folder, ASSETS:
#   ASSETS/kokkos/     a CUDA Kokkos LAMMPS (FLASHMACE_KOKKOS_BACKEND=cuda tools/build_kokkos_lammps.sh):
#                      lmp, liblammps.so.0, libkokkoscore.so.3.4, libkokkoscontainers.so.3.4, and
#                      flashmacekkplugin.so built against it (docs/kokkos.md)
#   ASSETS/models/     small_l1, scalar_l0, large_l2 .safetensors (float64; build/tests/models)
#   ASSETS/reference/  mace_<case>.safetensors (the shared reference files; the tests read their bulk.*)
#   ASSETS/mp0-medium-f32.safetensors   tools/make_random_model.py mp0-medium ... --dtype float32
#   ASSETS/libcupti_transfers.so        optional: the CMake target cupti_transfers
# Usage: tools/kokkos_gpu_check.sh ASSETS OUT [--bench-only|--tests-only] [--atoms 4000,65536] [--ranks 1]
# (--ranks: MPI ranks of the benchmark, all on the one GPU)
# OUT receives kokkos-style.md/.json with the decks (bench/), tests.log and each test's decks and
# LAMMPS output (pytest/).
set -uo pipefail
assets=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
mode=all atoms=4000,65536 ranks=1
while [ $# -gt 0 ]; do
  case $1 in
    --bench-only|--tests-only) mode=$1; shift ;;
    --atoms) atoms=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    *) echo "kokkos_gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${FLASHMACE_PYTHON:-python3}
kk=$assets/kokkos

# LibTorch and the CUDA libraries of this machine's PyTorch, then the carried LAMMPS and Kokkos.
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
nvidia_libs=$(ls -d "$torch_lib"/../../nvidia/*/lib 2> /dev/null | tr '\n' ':')
export LD_LIBRARY_PATH=$kk:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}
missing=$(ldd "$kk/lmp" "$kk/flashmacekkplugin.so" | grep "not found" || true)
[ -z "$missing" ] || { echo "kokkos_gpu_check: unresolved libraries:"; echo "$missing"; exit 1; }
echo "kokkos_gpu_check: $("$python" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))')"

# No binding of ranks to cores (Open MPI's default for 2 ranks), as in bench/rank_check.py's H200
# runs: the ranks share the one GPU and LibTorch's threads.
export OMPI_MCA_hwloc_base_binding_policy=none
status=0
if [ "$mode" != --tests-only ]; then
  transfers=()
  [ -f "$assets/libcupti_transfers.so" ] && transfers=(--transfers "$assets/libcupti_transfers.so")
  PYTHONUNBUFFERED=1 "$python" "$root/bench/kokkos_style.py" --lmp "$kk/lmp" --plugin "$kk/flashmacekkplugin.so" \
    --model "$assets/mp0-medium-f32.safetensors" --device cuda --dtype float32 --atoms "$atoms" --ranks "$ranks" \
    --out "$out/bench" "${transfers[@]}" 2>&1 | tee "$out/bench.log" || status=1
fi
if [ "$mode" != --bench-only ]; then
  # One GPU, several test processes side by side (pytest-xdist): each runs its own lmp. A skipped
  # test fails the run (a missing asset must not pass as a skip).
  (cd "$root" && FLASHMACE_KOKKOS_GPU=1 FLASHMACE_KOKKOS_LMP=$kk/lmp FLASHMACE_KOKKOS_PLUGIN=$kk/flashmacekkplugin.so \
     FLASHMACE_MPIRUN=mpirun FLASHMACE_SOURCE_DIR=$root FLASHMACE_REFERENCE_DIR=$assets/reference \
     FLASHMACE_EXPORTED_MODEL_DIR=$assets/models OMP_NUM_THREADS=1 FLASHMACE_NO_SKIP=1 \
     PYTHONPATH=$root/tools:$root/tests/lammps:$root/tests/pytest_plugins \
     "$python" -m pytest -v -rA -p no:cacheprovider -p flashmace_no_skip -n "${FLASHMACE_TEST_JOBS:-6}" --durations=5 --basetemp "$out/pytest" \
       tests/kokkos/test_kokkos_style.py) 2>&1 | tee "$out/tests.log" || status=1
fi
exit $status
