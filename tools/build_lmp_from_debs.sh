#!/usr/bin/env bash
# Build flashmace-lmp on an x86_64 machine that has no LAMMPS (and no internet), e.g. a CUDA machine
# with PyTorch, CMake and Ninja: Debian 12's LAMMPS packages are unpacked into a prefix (dpkg -x, no
# installation) and flashmace-lmp is built against them and the machine's LibTorch, in a build dir
# of its own with only that target (no tests). Everything comes from one folder, ASSETS:
#
#   ASSETS/lmp-debs/*.deb           always unpacked (Debian 12, `apt-get download` them):
#                                   lammps (bin/lmp, which LAMMPS's CMake package checks for),
#                                   liblammps0, liblammps-dev, libpython3.11, libvoro++1, libkim-api2,
#                                   libjpeg62-turbo, nlohmann-json3-dev
#   ASSETS/lmp-debs/fallback/*.deb  libraries taken only where the machine lacks them:
#                                   libfftw3-double3, libgfortran5, libquadmath0, libexpat1 (LAMMPS's);
#                                   libudev1, libmunge2 (Debian's Open MPI's, below)
#   ASSETS/lmp-debs/mpi/*.deb       Debian's Open MPI, used only when the machine has no Open MPI of
#                                   its own (mpirun, mpicxx and libmpi.so.40, which liblammps0 links):
#                                   openmpi-bin, openmpi-common, libopenmpi3, libopenmpi-dev, libpmix2,
#                                   libhwloc15, libevent-core-2.1-7, libevent-pthreads-2.1-7
#   ASSETS/lammps-headers/          the headers Debian's liblammps-dev lacks, from tools/install_deps.sh
#                                   (a copy of ~/.cache/flashmace/lammps-headers/current: fmt/,
#                                   neigh_request.h, lammpsplugin.h)
#
# The machine itself must have what every Debian/Ubuntu system with a compiler has: libc, libstdc++,
# libgcc_s, libgomp, zlib, libzstd, libpng16 and libcurl (liblammps0 links them); the script stops,
# naming the library, when one cannot be found.
#
# Usage: tools/build_lmp_from_debs.sh ASSETS [BUILD]     (BUILD default: build-lmp in the repository)
# Env:   FLASHMACE_PYTHON (python3; the interpreter whose torch to build against), FLASHMACE_JOBS
#        (nproc), FLASHMACE_MPI=auto|system|debian (auto: the machine's Open MPI when complete)
# Result: BUILD/bin/flashmace-lmp and BUILD/lammps-env.sh, to source before running it (the
# unpacked libraries' LD_LIBRARY_PATH; with Debian's Open MPI also PATH, OPAL_PREFIX and the MCA
# settings of Debian's /etc/openmpi). BUILD/lammps-build.log has the configure and build output.
set -euo pipefail
die() { echo "build_lmp_from_debs: $*" >&2; exit 1; }
say() { echo "build_lmp_from_debs: $*"; }

[ $# -ge 1 ] || die "usage: $0 ASSETS [BUILD]"
assets=$(cd "$1" && pwd) || die "no folder $1"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(mkdir -p "${2:-$root/build-lmp}" && cd "${2:-$root/build-lmp}" && pwd)
python=${FLASHMACE_PYTHON:-python3}
jobs=${FLASHMACE_JOBS:-$(nproc)}
mpi_mode=${FLASHMACE_MPI:-auto}
log=$build/lammps-build.log
[ "$(uname -m)" = x86_64 ] || die "the Debian packages are amd64; this machine is $(uname -m)"
ls "$assets"/lmp-debs/liblammps0_*.deb > /dev/null 2>&1 || die "no $assets/lmp-debs/liblammps0_*.deb"
[ -f "$assets/lammps-headers/fmt/format.h" ] && [ -f "$assets/lammps-headers/neigh_request.h" ] ||
  die "no $assets/lammps-headers/{fmt/format.h,neigh_request.h} (copy ~/.cache/flashmace/lammps-headers/current)"

prefix=$build/lammps-prefix
triple=x86_64-linux-gnu
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "$assets"/lmp-debs/*.deb; do dpkg -x "$deb" "$prefix"; done
libdir=$prefix/usr/lib/$triple
libpath=$libdir

# --- MPI: the machine's Open MPI when it is complete, else Debian's (unpacked, relocated) --------
system_mpi_complete() {  # (outputs captured: grep -q closing a pipe early would fail it under pipefail)
  command -v mpirun > /dev/null && command -v mpicxx > /dev/null || return 1
  [[ $(mpirun --version 2>&1) == *"Open MPI"* ]] && [[ $(ldconfig -p) == *"libmpi.so.40 "* ]]
}
if [ "$mpi_mode" = auto ]; then
  if system_mpi_complete; then mpi_mode=system; else mpi_mode=debian; fi
fi
cmake_mpi=()
env_lines=()
case $mpi_mode in
  system)
    system_mpi_complete || die "FLASHMACE_MPI=system, but the machine lacks Open MPI's mpirun, mpicxx or libmpi.so.40"
    say "MPI: the machine's $(mpirun --version 2>&1 | head -n 1) ($(command -v mpirun))"
    ;;
  debian)
    ls "$assets"/lmp-debs/mpi/libopenmpi3_*.deb > /dev/null 2>&1 ||
      die "the machine has no complete Open MPI (mpirun, mpicxx, libmpi.so.40) and $assets/lmp-debs/mpi" \
          "has no Debian Open MPI"
    mpiroot=$prefix/mpi/usr
    mkdir -p "$prefix/mpi/bin"
    for deb in "$assets"/lmp-debs/mpi/*.deb; do dpkg -x "$deb" "$prefix/mpi"; done
    # Debian points mpirun/mpicxx at these through update-alternatives, which dpkg -x does not run.
    ln -sfn "$mpiroot/bin/mpirun.openmpi" "$prefix/mpi/bin/mpirun"
    ln -sfn "$mpiroot/bin/mpiexec.openmpi" "$prefix/mpi/bin/mpiexec"
    ln -sfn "$mpiroot/bin/mpicxx.openmpi" "$prefix/mpi/bin/mpicxx"
    mpilibs=$mpiroot/lib/$triple:$mpiroot/lib/$triple/openmpi/lib:$mpiroot/lib/$triple/pmix2/lib
    libpath=$libpath:$mpilibs
    # OPAL_PREFIX relocates Open MPI (components, help files, wrapper data); PMIx's paths are
    # absolute, so its components' folder is given. The MCA settings are Debian's
    # /etc/openmpi/openmpi-mca-params.conf, which stays behind, plus silence about optional
    # components whose libraries (UCX, libfabric, verbs) are absent.
    env_lines+=("export OPAL_PREFIX=$mpiroot"
                "export PMIX_MCA_mca_base_component_path=$mpiroot/lib/$triple/pmix2/lib/pmix"
                "export PATH=$prefix/mpi/bin:\$PATH"
                "export OMPI_MCA_mca_base_component_show_load_errors=0"
                "export OMPI_MCA_btl_base_warn_component_unused=0"
                "export OMPI_MCA_mtl=^ofi OMPI_MCA_btl=^uct,openib,ofi OMPI_MCA_pml=^ucx OMPI_MCA_osc=^ucx,pt2pt")
    cmake_mpi=(-DMPI_CXX_COMPILER="$prefix/mpi/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$prefix/mpi/bin/mpirun")
    say "MPI: Debian's Open MPI 4.1.4, unpacked in $prefix/mpi (the machine has no Open MPI with mpirun," \
        "mpicxx and libmpi.so.40)"
    ;;
  *) die "FLASHMACE_MPI=$mpi_mode: use auto, system or debian" ;;
esac
export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for line in "${env_lines[@]}"; do eval "$line"; done

# --- Libraries the machine lacks: from the fallback packages, only those --------------------------
missing() { ldd "$@" 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u; }
fallback=$prefix/fallback  # the packages, unpacked
taken_dir=$prefix/fallback-lib  # the libraries taken from them
mkdir -p "$fallback" "$taken_dir"
for deb in "$assets"/lmp-debs/fallback/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" "$fallback"; done
needs=("$libdir/liblammps.so.0")
[ "$mpi_mode" = debian ] && needs+=("$mpiroot/bin/orterun" "$mpiroot/lib/$triple/libmpi.so.40"
                                    "$mpiroot/lib/$triple/pmix2/lib/libpmix.so.2")
taken=()
while true; do
  lacking=$(missing "${needs[@]}")
  [ -z "$lacking" ] && break
  progress=0
  for so in $lacking; do
    found=$(find "$fallback" -name "$so" | head -n 1 || true)
    if [ -n "$found" ]; then
      cp -L "$found" "$taken_dir/$so"
      taken+=("$so")
      progress=1
    fi
  done
  if [ $progress = 0 ]; then
    die "the machine lacks $(echo $lacking | tr ' ' ','), which $libdir/liblammps.so.0 needs; put the" \
        "Debian 12 package that has it into $assets/lmp-debs/fallback"
  fi
  case ":$LD_LIBRARY_PATH:" in
    *":$taken_dir:"*) ;;
    *) libpath=$libpath:$taken_dir; export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$taken_dir ;;
  esac
done
[ ${#taken[@]} -gt 0 ] && say "taken from the fallback packages (the machine lacks them): ${taken[*]}"

{
  echo "# flashmace-lmp against Debian's LAMMPS unpacked in $prefix (tools/build_lmp_from_debs.sh)"
  echo "export LD_LIBRARY_PATH=$libpath\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  for line in "${env_lines[@]}"; do echo "$line"; done
} > "$build/lammps-env.sh"

# --- Configure and build flashmace-lmp only ---------------------------------------------------------
# A build dir configured for the other MPI starts its configure afresh (FindMPI's cached paths);
# ninja still rebuilds only what the new configuration changes.
if [ -f "$build/CMakeCache.txt" ] && [ "$(cat "$build/lammps-mpi" 2>/dev/null)" != "$mpi_mode" ]; then
  rm -f "$build/CMakeCache.txt"
fi
echo "$mpi_mode" > "$build/lammps-mpi"
say "configuring $build (log: $log)"
# LAMMPS_DIR names the unpacked package, so that no LAMMPS of the machine's can be taken instead;
# -rpath-link lets the linker resolve liblammps.so.0's own libraries in the prefix.
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHMACE_PYTHON="$python" \
     -DFLASHMACE_BUILD_TESTS=OFF -DFLASHMACE_LAMMPS=ON -DFLASHMACE_KOKKOS=OFF \
     -DLAMMPS_DIR="$libdir/cmake/LAMMPS" -DCMAKE_PREFIX_PATH="$prefix/usr" \
     -DFLASHMACE_LAMMPS_COMPAT_DIR="$assets/lammps-headers" \
     -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,${libpath}" "${cmake_mpi[@]}" > "$log" 2>&1; then
  tail -n 30 "$log"
  die "configure failed (whole log: $log)"
fi
grep -E "flashmace: (pair style|LAMMPS integer)" "$log" | sed 's/^-- /build_lmp_from_debs: /'
say "building flashmace-lmp with $jobs jobs"
if ! cmake --build "$build" --target flashmace-lmp -j "$jobs" >> "$log" 2>&1; then
  grep -E -m 20 "error|Error" "$log" || tail -n 30 "$log"
  die "build failed (whole log: $log)"
fi
lmp=$build/bin/flashmace-lmp
lacking=$(missing "$lmp")
[ -z "$lacking" ] || die "$lmp cannot find $(echo $lacking | tr ' ' ',') at run time"
[[ $(ldd "$lmp") == *"$libdir/liblammps.so.0"* ]] ||
  die "$lmp does not load the unpacked liblammps.so.0: $(ldd "$lmp" | grep liblammps)"
# One launch of two ranks that creates the style: mpirun, libmpi and the binary fit together when one
# rank 0 prints LAMMPS's banner (two singletons, each its own rank 0, would print it twice).
printf '%s\n' "units metal" "region box block 0 1 0 1 0 1" "create_box 1 box" "pair_style mace/flash" \
  > "$build/in.smoke"
out=$(cd "$build" && mpirun --allow-run-as-root --oversubscribe -np 2 "$lmp" -in in.smoke -log none 2>&1) &&
  [ "$(grep -c "Total wall time" <<< "$out")" = 1 ] && ! grep -q "^ERROR" <<< "$out" ||
  { echo "$out" | tail -n 20; die "mpirun -np 2 $lmp (pair_style mace/flash, empty box) did not run as one job"; }
say "built $lmp ($(grep -m1 -o "LAMMPS ([^)]*)" <<< "$out"), MPI: $mpi_mode);" \
    "before running it: source $build/lammps-env.sh"
