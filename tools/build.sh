#!/usr/bin/env bash
# Installs what is missing (tools/install_deps.sh), then configures and builds flashmace with Ninja
# into ${FLASHMACE_BUILD_DIR:-build}. Extra arguments go to CMake's configure step.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/install_deps.sh"
build=${FLASHMACE_BUILD_DIR:-$root/build}
# ccache must not treat precompiled headers as stale because of timestamps.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
cmake -S "$root" -B "$build" -G Ninja "$@" > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build"
