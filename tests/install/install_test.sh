#!/usr/bin/env bash
# The README's install route, tested: `meson install` of this build into a temporary
# directory, the README's program built against it exactly as the README builds it
# (c++ -std=c++20 app.cpp $(pkg-config --cflags --libs est)), then run. Before it is built, the
# installed headers are checked to be the public API (check_public_headers.py), and the
# program's compilation to open no gRPC header and no header of the kernel contract.
#
# A real install's prefix is chosen at `meson setup --prefix` (meson install has no --prefix),
# so the install is staged with --destdir (stage.sh) and used through its est.pc alone. The
# program is README.md's first C++ block with two literals changed so that
# it runs in seconds: `.max_steps = 2000` -> 20, and "/tmp/fashion" -> a fresh directory.
# Exits 77 (meson's "skipped") after `SKIPPED: reason` when it cannot test.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
source_dir=$(cd "$2" && pwd)
# shellcheck source=tests/install/stage.sh
source "$(dirname "$0")/stage.sh" "$1"

pc_dir=$stage_libdir/pkgconfig
[ -f "$pc_dir/est.pc" ] || fail "no est.pc under $pc_dir"
# The install holds the public headers, all that est.h reaches and nothing else, and none of
# them includes gRPC or the kernel contract.
/usr/bin/python3 "$(dirname "$0")/check_public_headers.py" "$stage/$(option includedir)" ||
  fail "the installed headers are not est's public API (above)"

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
# What the program's compilation opens (g++ -H): no gRPC header, no kernel contract.
# shellcheck disable=SC2086 # the flags are words
(cd "$work" && timeout 600 c++ -std=c++20 -fsyntax-only -H app.cpp $(pkg-config --cflags est)) \
  2>"$work/opened.txt" ||
  fail "the README's program does not compile against the installed headers: $(tail -5 "$work/opened.txt")"
if grep -E '^\.+ .*(/grpcpp/|/grpc/|/est/ops/(registry|kernel_ops)\.h|/est/ops/(cpu|onednn|cuda)/)' \
  "$work/opened.txt"; then
  fail "compiling the README's program opens the headers above (gRPC or the kernel contract)"
fi
echo "the README's program opens $(grep -cE '^\.+ ' "$work/opened.txt") headers, none of gRPC or the kernel contract"
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
