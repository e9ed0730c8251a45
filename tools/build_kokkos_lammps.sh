#!/usr/bin/env bash
# Builds, once per cache, a LAMMPS with the KOKKOS and PLUGIN packages for CPU (Kokkos Serial, or
# OpenMP), or for an NVIDIA H200 (Kokkos CUDA, sm_90), from the registries CI reaches (docs/kokkos.md):
#   * Kokkos 3.4.01, the version this LAMMPS asks for, from PyPI's sdist pykokkos-base==0.0.7
#     (its external/kokkos), built as shared libraries;
#   * LAMMPS from Debian's `lammps` source package (the installed liblammps-dev's version, 20220106:
#     src/KOKKOS is there, lib/kokkos is stripped, hence EXTERNAL_KOKKOS), with KOKKOS and PLUGIN and
#     nothing else (the decks the kk tests run use core styles only).
# The result lives in FLASHMACE_CACHE (default ~/.cache/flashmace)/kokkos-lammps/<versions>/ with
# `current` pointing to it: lammps/bin/lmp, lammps-src/src (the headers a plugin compiles against),
# kokkos/ (the installed Kokkos) and flashmace-kokkos-lammps.cmake (what kokkos/CMakeLists.txt reads;
# pass its folder as -DFLASHMACE_KOKKOS_LAMMPS=). Nothing of LAMMPS or Kokkos enters the repository.
#   tools/build_kokkos_lammps.sh            (FLASHMACE_KOKKOS_BACKEND=serial|openmp|cuda, default serial)
# A finished build is reused: a second call prints its folder and returns at once.
# cuda: nvcc (CUDA 13) at the PATH, no GPU needed to build. Kokkos 3.4 predates both Hopper and
# CUDA 13: tools/kokkos_cuda_patches.py edits the unpacked sdist (each edit checked); LAMMPS compiles
# unchanged, everything through Kokkos's nvcc_wrapper. Its folder is printed, and `current` is left
# alone (it stays the CPU build the kk tests use).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${FLASHMACE_CACHE:-$HOME/.cache/flashmace}
venv=${FLASHMACE_VENV:-$cache/venv}
backend=${FLASHMACE_KOKKOS_BACKEND:-serial}
jobs=${FLASHMACE_BUILD_JOBS:-$(nproc)}
kokkos_version=3.4.01
pykokkos=pykokkos-base==0.0.7
pykokkos_sha256=6339daced1e81a2748f381847d8717cd77d824407da3c263b9491b5630c642b0
recipe=3  # raise when the build options below change, so cached builds are redone
cuda_recipe=1  # the cuda build's own: raise when its options or tools/kokkos_cuda_patches.py change
lammps_version=$(dpkg-query -W -f='${source:Version}' liblammps-dev)

say() { echo "build_kokkos_lammps: $*"; }
case $backend in
  serial) kokkos_backend=(-DKokkos_ENABLE_SERIAL=ON) lammps_omp=OFF ;;
  openmp) kokkos_backend=(-DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON) lammps_omp=ON ;;
  # HOPPER90 is one of the patches: an sm_80 Kokkos aborts in Kokkos::initialize on an sm_90 device.
  cuda) kokkos_backend=(-DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON
                        -DKokkos_ARCH_HOPPER90=ON) lammps_omp=OFF recipe=$recipe.$cuda_recipe
        command -v nvcc > /dev/null ||
          { echo "build_kokkos_lammps: FLASHMACE_KOKKOS_BACKEND=cuda needs nvcc (CUDA 13) at the PATH" >&2; exit 1; } ;;
  *) echo "build_kokkos_lammps: FLASHMACE_KOKKOS_BACKEND=$backend: use serial, openmp or cuda" >&2; exit 1 ;;
esac
# Only a CPU build becomes `current`: the CPU kk tests run what it points to.
set_current() { [ "$backend" = cuda ] || ln -sfn "$dest" "$cache/kokkos-lammps/current"; }

dest=$cache/kokkos-lammps/lammps-$lammps_version-kokkos-$kokkos_version-$backend-r$recipe
if [ -f "$dest/.complete" ]; then
  set_current
  say "ready: $dest"
  exit 0
fi
start=$SECONDS
rm -rf "$dest"
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Release at -O2: the kk tests exercise LAMMPS's Kokkos data movement, not its own kernels' speed.
# Without LAMMPS_EXCEPTIONS, as Debian's LAMMPS: with them, stock lmp aborts on error->one without
# flushing the screen, so a piped run loses the error message.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DCMAKE_CXX_STANDARD=17
        -DCMAKE_CXX_EXTENSIONS=OFF "${launcher[@]}")

say "fetching $pykokkos (PyPI sdist) and the LAMMPS $lammps_version source package (Debian)"
"$venv/bin/pip" download -q --no-deps --no-binary pykokkos-base "$pykokkos" -d "$work"
sdist=$(ls "$work"/pykokkos*base-0.0.7.tar.gz)
echo "$pykokkos_sha256  $sdist" | sha256sum -c --quiet
tarball=$("$here/fetch_lammps_source.sh" "$work/apt" "$lammps_version" | tail -n 1)

say "building Kokkos $kokkos_version ($backend, shared)"
tar -xzf "$sdist" -C "$work" --wildcards '*/external/kokkos/*'
kokkos_src=$(dirname "$(ls "$work"/*/external/kokkos/CMakeLists.txt)")
grep -q "Kokkos_VERSION_MINOR 4" "$kokkos_src/CMakeLists.txt"
kokkos_cxx=() lammps_cxx=()
if [ "$backend" = cuda ]; then
  "$venv/bin/python" "$here/kokkos_cuda_patches.py" "$kokkos_src"
  # Kokkos builds with its own (patched) wrapper; LAMMPS with the installed one, as the LAMMPS manual
  # says for an external CUDA Kokkos.
  kokkos_cxx=("-DCMAKE_CXX_COMPILER=$kokkos_src/bin/nvcc_wrapper")
  lammps_cxx=("-DCMAKE_CXX_COMPILER=$dest/kokkos/bin/nvcc_wrapper")
fi
cmake -S "$kokkos_src" -B "$work/kokkos-build" "${common[@]}" "${kokkos_backend[@]}" "${kokkos_cxx[@]}" -DBUILD_SHARED_LIBS=ON \
      -DCMAKE_INSTALL_PREFIX="$dest/kokkos" -DCMAKE_INSTALL_LIBDIR=lib > "$work/kokkos.log" 2>&1 ||
  { cat "$work/kokkos.log"; exit 1; }
cmake --build "$work/kokkos-build" -j "$jobs" > "$work/kokkos.log" 2>&1 && cmake --install "$work/kokkos-build" >> "$work/kokkos.log" 2>&1 ||
  { tail -n 50 "$work/kokkos.log"; exit 1; }
say "Kokkos done after $((SECONDS - start)) s"

say "building LAMMPS (KOKKOS, PLUGIN)"
mkdir -p "$dest/lammps-src"
# src/ and cmake/, and what `cmake --install` copies: the man page and the potentials folder (empty).
tar -xJf "$tarball" -C "$dest/lammps-src" --strip-components=1 --wildcards --no-wildcards-match-slash \
    '*/src' '*/cmake' '*/doc/lammps.1'
mkdir -p "$dest/lammps-src/potentials"
# LAMMPS's CMake compiles the Kokkos version of every core style; each is a heavy template
# instantiation. Keep the Kokkos infrastructure and the styles the tests' decks use with -sf kk
# (fix nve, nvt and its compute temp, min cg); without the others LAMMPS falls back to the plain
# styles (core LAMMPS itself is untouched).
for style in atom_vec_charge atom_vec_hybrid atom_vec_sphere compute_coord_atom compute_orientorder_atom \
             compute_temp_deform fix_deform fix_enforce2d fix_gravity fix_langevin fix_momentum fix_neigh_history \
             fix_nph fix_npt fix_nve_sphere fix_nvt_sllod fix_property_atom fix_setforce fix_wall_lj93 \
             fix_wall_reflect region_block pair_buck pair_buck_coul_cut pair_coul_cut pair_coul_debye pair_coul_dsf \
             pair_coul_wolf pair_hybrid pair_hybrid_overlay pair_lj_cut pair_lj_cut_coul_cut pair_lj_expand \
             pair_morse pair_table pair_yukawa pair_zbl; do
  rm -f "$dest/lammps-src/src/KOKKOS/${style}_kokkos.cpp" "$dest/lammps-src/src/KOKKOS/${style}_kokkos.h"
done
cmake -S "$dest/lammps-src/cmake" -B "$work/lammps-build" "${common[@]}" "${lammps_cxx[@]}" \
      -DPKG_KOKKOS=ON -DEXTERNAL_KOKKOS=ON -DKokkos_DIR="$dest/kokkos/lib/cmake/Kokkos" -DPKG_PLUGIN=ON \
      -DBUILD_MPI=ON -DBUILD_OMP=$lammps_omp -DBUILD_SHARED_LIBS=ON -DLAMMPS_EXCEPTIONS=OFF -DLAMMPS_SIZES=smallbig \
      -DBUILD_TOOLS=OFF -DBUILD_LAMMPS_SHELL=OFF -DWITH_JPEG=OFF -DWITH_PNG=OFF -DWITH_GZIP=OFF \
      -DWITH_FFMPEG=OFF -DCMAKE_INSTALL_PREFIX="$dest/lammps" -DCMAKE_INSTALL_LIBDIR=lib \
      "-DCMAKE_INSTALL_RPATH=$dest/lammps/lib;$dest/kokkos/lib" > "$work/lammps.log" 2>&1 ||
  { cat "$work/lammps.log"; exit 1; }
cmake --build "$work/lammps-build" -j "$jobs" > "$work/lammps.log" 2>&1 && cmake --install "$work/lammps-build" >> "$work/lammps.log" 2>&1 ||
  { tail -n 50 "$work/lammps.log"; exit 1; }
say "LAMMPS done after $((SECONDS - start)) s"

# (Not `lmp -h | grep -q`: grep stops reading early, lmp gets SIGPIPE, and pipefail fails the check.)
"$dest/lammps/bin/lmp" -h > "$work/lmp-help.txt"
grep -q "KOKKOS" "$work/lmp-help.txt" || { echo "build_kokkos_lammps: $dest/lammps/bin/lmp lacks KOKKOS" >&2; exit 1; }
cat > "$dest/flashmace-kokkos-lammps.cmake" <<EOF
# Written by tools/build_kokkos_lammps.sh: the LAMMPS a Kokkos plugin is compiled against.
set(FLASHMACE_KOKKOS_LAMMPS_SOURCE "$dest/lammps-src/src")
set(FLASHMACE_KOKKOS_LAMMPS_LMP "$dest/lammps/bin/lmp")
set(FLASHMACE_KOKKOS_LAMMPS_DEFINITIONS LAMMPS_SMALLBIG LMP_KOKKOS)
set(FLASHMACE_KOKKOS_LAMMPS_KOKKOS_DIR "$dest/kokkos/lib/cmake/Kokkos")
set(FLASHMACE_KOKKOS_LAMMPS_DESCRIPTION "LAMMPS $lammps_version (Debian source) with Kokkos $kokkos_version ($backend)")
EOF
touch "$dest/.complete"
set_current
say "ready after $((SECONDS - start)) s: $dest"
