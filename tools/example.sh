#!/usr/bin/env bash
# The main job on the bundled default: build, then run the LAMMPS example MD (examples/lammps/in.md:
# 108-atom CuNi alloy, NVT then NVE) with pair_style mace/flash and the bundled potential.
# The potential (potentials/CuNi-flashmace.safetensors) is a small MACE trained on Cu-Ni EAM data
# (potentials/README.md). Extra arguments go to flashmace-lmp (e.g. -var nve_steps 1000).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/build.sh"
build=${FLASHMACE_BUILD_DIR:-$root/build}
if [ ! -x "$build/bin/flashmace-lmp" ]; then
  echo "example.sh: $build/bin/flashmace-lmp was not built: CMake did not find LAMMPS" \
       "(see $build.configure.log; tools/install_deps.sh installs it)" >&2
  exit 1
fi
cd "$root/examples/lammps"
"$build/bin/flashmace-lmp" -in in.md -log none "$@"
