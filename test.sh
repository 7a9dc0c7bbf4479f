#!/usr/bin/env bash
# Installs what is missing, configures, builds, and runs every test suite (meson test);
# EST_SANITIZE=1 does it under ASan + UBSan in build-asan/ (README.md, "Two commands").
# Ends with the skips and their reasons, then one line "N passed, N failed, N skipped" counting
# doctest cases over all suites (scripts/summarize_tests.py).
set -euo pipefail
cd "$(dirname "$0")"
# EST_SANITIZE=1: the same under ASan and UBSan, in a build directory of its own.
if [ "${EST_SANITIZE:-0}" = 1 ]; then
  export BUILD_DIR=${BUILD_DIR:-build-asan}
  export EST_MESON_OPTIONS="${EST_MESON_OPTIONS:-} -Db_sanitize=address,undefined -Db_lundef=false"
  # Leaks off: oneDNN, OpenMP and gRPC keep memory until exit. protect_shadow_gap=0 lets CUDA
  # map its memory under ASan. Every report fails its test.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:protect_shadow_gap=0:halt_on_error=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
source scripts/setup.sh

status=0
meson test -C "$BUILD_DIR" --print-errorlogs "$@" || status=$?
/usr/bin/python3 scripts/summarize_tests.py "$BUILD_DIR/meson-logs/testlog.json" || true
exit $status
