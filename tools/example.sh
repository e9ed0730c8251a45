#!/usr/bin/env bash
# The main job on the bundled default: build, then run the LAMMPS example MD (CuNi alloy, NVT then
# NVE) with pair_style mace/flash and the bundled potential. NOTE: the bundled
# potentials/testing/tiny-cuni-random.safetensors has RANDOM weights: it exercises the whole
# machinery (LAMMPS, ghost exchange, forces, virial), not physics.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/build.sh"
build=${FLASHMACE_BUILD_DIR:-$root/build}
cd "$root/examples/lammps"
"$build/bin/flashmace-lmp" -in in.md -log none "$@"
