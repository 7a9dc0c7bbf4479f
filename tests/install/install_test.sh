#!/usr/bin/env bash
# The README's install route, tested: `meson install` of this build into a temporary
# directory, the README's program built against it exactly as the README builds it
# (c++ -std=c++20 app.cpp $(pkg-config --cflags --libs est)), then run.
#
# A real install's prefix is chosen at `meson setup --prefix` (meson install has no --prefix).
# Reconfiguring this build directory is not a test's business, so the install is staged with
# --destdir; est.pc is relocatable (pkgconfig.relocatable: its prefix is its own location), so
# the staged tree holds what an install at that prefix would hold and is used through its
# est.pc alone. The program is README.md's first C++ block with two literals changed so that
# it runs in seconds: `.max_steps = 2000` -> 20, and "/tmp/fashion" -> a fresh directory.
# Exits 77 (meson's "skipped") after `SKIPPED: reason` when it cannot test.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/est_install_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

option() {  # the value of one of the build's options, from meson's introspection
  meson introspect --buildoptions "$build" | /usr/bin/python3 -c \
    'import json, sys; print(next(str(o["value"]) for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
if [ "$(option pkgconfig.relocatable)" != True ]; then
  skip "est.pc of this build directory is not relocatable (it was configured before" \
    "pkgconfig.relocatable=true became the default); run" \
    "'meson configure $build -Dpkgconfig.relocatable=true' or ./test.sh"
fi
prefix=$(option prefix)
libdir=$(option libdir)
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac

stage=$work/stage
meson install -C "$build" --no-rebuild --quiet --destdir "$stage" >"$work/install.log" 2>&1 ||
  fail "meson install --destdir failed: $(tail -5 "$work/install.log")"
pc_dir=$stage$libdir/pkgconfig
[ -f "$pc_dir/est.pc" ] || fail "no est.pc under $pc_dir"
echo "installed into $stage$prefix"

# README.md's program, with its two literals checked before they are changed.
/usr/bin/python3 - "$source_dir/README.md" >"$work/readme.cpp" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"```cpp\n(.*?)```", text, re.S)
program = next((b for b in blocks if "#include <est/est.h>" in b and "int main(" in b), None)
if program is None:
    sys.exit("README.md has no ```cpp block with #include <est/est.h> and main()")
print(program, end="")
PY
for literal in '.max_steps = 2000' '"/tmp/fashion"'; do
  [ "$(grep -cF -- "$literal" "$work/readme.cpp")" = 1 ] ||
    fail "README.md's program no longer has $literal exactly once; update this test"
done
model_dir=$work/model
sed -e 's|\.max_steps = 2000|.max_steps = 20|' -e "s|\"/tmp/fashion\"|\"$model_dir\"|" \
  "$work/readme.cpp" >"$work/app.cpp"

export PKG_CONFIG_PATH=$pc_dir
flags=$(pkg-config --cflags --libs est) || fail "pkg-config --cflags --libs est failed"
case $flags in *"$build"* | *"$source_dir"*) fail "est.pc points into the build or source tree: $flags" ;; esac
echo "pkg-config --cflags --libs est: $flags"
# A sanitized build's library needs the sanitizers' runtime in the program too; est.pc does
# not carry build options, so they are passed here as `meson configure` reports them.
sanitize=$(option b_sanitize)
case $sanitize in none | "") ;; *) flags="-fsanitize=$sanitize $flags" ;; esac
# shellcheck disable=SC2086 # the flags are words
(cd "$work" && timeout 600 c++ -std=c++20 app.cpp $flags -o app) ||
  fail "the README's program does not build against the installed headers and libraries"
echo "built the README's program against the install"

[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  skip "built the README's program, but cannot run it: dataset-fashion-mnist is not installed"
(cd "$work" && timeout 300 ./app) >"$work/run.log" 2>&1 || {
  tail -20 "$work/run.log"
  fail "the README's program failed"
}
[ -f "$model_dir/model.ckpt-20.h5" ] || {
  tail -20 "$work/run.log"
  fail "the README's program (max_steps 20) left no model.ckpt-20.h5 in $model_dir"
}
grep -F "Saving checkpoints for 20 into" "$work/run.log"
grep -E "Saving dict for global step 20: .*accuracy = " "$work/run.log" ||
  fail "no evaluation at step 20 in the program's log"
echo "ran the README's program (max_steps 20) from the install"
