#!/usr/bin/env bash
# Build, then run the whole test suite with CTest (all labels; GPU tests report "skipped" without a GPU).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/build.sh"
build=${FLASHMACE_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
