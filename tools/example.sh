#!/usr/bin/env bash
# The main job on the bundled default: build, then evaluate the bundled example structure with the
# bundled model. NOTE: potentials/testing/tiny-cuni-random.safetensors has RANDOM weights; it shows
# the machinery, not physics. The LAMMPS example with a real potential replaces this.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/build.sh"
build=${FLASHMACE_BUILD_DIR:-$root/build}
"$build/bin/flashmace-eval" --model "$root/potentials/testing/tiny-cuni-random.safetensors" \
  --xyz "$root/examples/eval/cuni_fcc32.xyz"
