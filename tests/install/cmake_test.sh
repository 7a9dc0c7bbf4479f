#!/usr/bin/env bash
# The CMake route to est, tested: `meson install` of this build into a temporary directory
# (stage.sh), then a CMake project that knows est only through find_package(est CONFIG) and
# est::est (cmake_consumer/) configured against it with CMAKE_PREFIX_PATH, built, and run: it
# builds examples/linear_regression.cpp, which trains three steps and must leave model.ckpt-3.h5. The dependencies
# estConfig.cmake looks for through pkg-config must be the ones est.pc requires.
# Exits 77 (meson's "skipped") after `SKIPPED: reason` when it cannot test (no cmake).
#
#   cmake_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source_dir=$(cd "$2" && pwd)
command -v cmake >/dev/null ||
  { echo "SKIPPED: cmake is not installed (scripts/setup.sh installs it)"; exit 77; }
# shellcheck source=tests/install/stage.sh
source "$(dirname "$0")/stage.sh" "$1"

config=$stage_libdir/cmake/est/estConfig.cmake
[ -f "$config" ] || fail "no estConfig.cmake under $stage_libdir/cmake/est"
[ -f "$stage_libdir/cmake/est/estConfigVersion.cmake" ] || fail "no estConfigVersion.cmake beside it"
case $(cat "$config") in *"$build"* | *"$source_dir"*)
  fail "estConfig.cmake points into the build or source tree" ;;
esac

# The same dependencies as est.pc: its Requires, and the modules estConfig.cmake asks for.
required=$(PKG_CONFIG_PATH=$stage_libdir/pkgconfig pkg-config --print-requires est | awk '{print $1}' | sort | tr '\n' ' ')
modules=$(sed -n 's/^set(_est_pkg_modules \(.*\))$/\1/p' "$config" | tr ' ' '\n' | sort | tr '\n' ' ')
[ "$required" = "$modules" ] ||
  fail "estConfig.cmake finds the pkg-config modules '$modules' but est.pc requires '$required'"

sanitize=$(option b_sanitize)
cxx_flags=""
case $sanitize in none | "") ;; *) cxx_flags="-fsanitize=$sanitize" ;; esac
consumer=$work/consumer
timeout 300 cmake -S "$source_dir/tests/install/cmake_consumer" -B "$consumer" \
  -DEST_EXAMPLE="$source_dir/examples/linear_regression.cpp" \
  -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$cxx_flags" \
  >"$work/configure.log" 2>&1 || {
  tail -20 "$work/configure.log"
  fail "cmake could not configure the consumer with find_package(est CONFIG)"
}
grep -q "est_DIR:PATH=$stage_libdir/cmake/est" "$consumer/CMakeCache.txt" ||
  fail "find_package(est) found another est than the staged one: $(grep est_DIR "$consumer/CMakeCache.txt")"
timeout 600 cmake --build "$consumer" >"$work/build.log" 2>&1 || {
  tail -20 "$work/build.log"
  fail "the consumer does not build against est::est"
}
echo "built the CMake consumer against est::est from $stage_libdir/cmake/est"

model_dir=$work/model
(timeout 300 "$consumer/linear_regression" --model_dir "$model_dir") >"$work/run.log" 2>&1 || {
  tail -20 "$work/run.log"
  fail "the CMake consumer failed"
}
grep -E "^Evaluation: loss = [0-9.]+, global_step = 3$" "$work/run.log" ||
  fail "the CMake consumer's evaluation is not at global step 3: $(tail -3 "$work/run.log")"
[ -f "$model_dir/model.ckpt-3.h5" ] || fail "the CMake consumer left no model.ckpt-3.h5 in $model_dir"
echo "ran the CMake consumer from the install"
