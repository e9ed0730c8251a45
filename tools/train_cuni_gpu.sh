#!/usr/bin/env bash
# The bundled Cu-Ni potential, end to end, on a CUDA machine that has PyTorch but neither LAMMPS
# nor mace-torch, and no internet (the project's GPU machine): tools/train_cuni.py --device cuda
# (EAM data from LAMMPS, training, export, test-set errors). What it needs comes from one folder:
#   ASSETS/extra_site.tar.xz  mace-torch and its import-time dependencies (../shared/bench/kit)
#   ASSETS/*.deb              Debian 12's LAMMPS, to label the data: lammps, liblammps0, libkim-api2,
#                             libvoro++1, libpython3.11, libpython3.11-stdlib, libpython3.11-minimal,
#                             libjpeg62-turbo (`apt-get download` them on a Debian 12 machine)
#   ASSETS/CuNi.eam.alloy     the EAM potential (Debian lammps-data: /usr/share/lammps/potentials)
# Usage: tools/train_cuni_gpu.sh ASSETS OUT [train_cuni.py options, e.g. --dtype float32]
# OUT receives data/, train/ (the trainer's folder), test_errors.json, train.log and
# CuNi-flashmace.safetensors (the file to commit as potentials/CuNi-flashmace.safetensors).
set -euo pipefail
assets=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${FLASHMACE_PYTHON:-python3}
deps=${TMPDIR:-/tmp}/flashmace-cuni-deps

rm -rf "$deps"
mkdir -p "$deps/site"
for deb in "$assets"/*.deb; do dpkg -x "$deb" "$deps"; done
tar xJf "$assets/extra_site.tar.xz" -C "$deps/site"
# Debian's libraries for lmp alone: the trainer's process keeps the machine's own.
cat > "$deps/lmp" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$deps/usr/bin/lmp" "\$@"
EOF
chmod +x "$deps/lmp"
"$deps/lmp" -h | sed -n 2p  # the version line; fails here if a library is missing

export PYTHONPATH="$deps/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$python" "$root/tools/train_cuni.py" "$out" --device cuda --lmp "$deps/lmp" --eam "$assets/CuNi.eam.alloy" \
  --output "$out/CuNi-flashmace.safetensors" "$@" 2>&1 | tee "$out/train.log"
