# Sourced by the install suite's scripts: `meson install` of the build BUILD_DIR into a fresh
# temporary directory with --destdir, as a real install at the build's prefix would lay it out
# (est.pc and estConfig.cmake are relocatable: their prefix is their own location, so the staged
# tree is used through them alone). Reconfiguring the build directory is not a test's business,
# hence --destdir rather than a prefix. Sets:
#   work      a temporary directory, removed on exit
#   stage     the staged prefix: $stage/include/est, $stage_libdir/libest_*.a
#   stage_libdir
#   option NAME  prints one of the build's options (meson's introspection)
# and defines skip/fail (exit 77 after "SKIPPED: reason", or 1 after "FAILED: reason").
#
#   source stage.sh BUILD_DIR
build=$(cd "$1" && pwd)
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

meson install -C "$build" --no-rebuild --quiet --destdir "$work/root" >"$work/install.log" 2>&1 ||
  fail "meson install --destdir failed: $(tail -5 "$work/install.log")"
stage=$work/root$prefix
stage_libdir=$work/root$libdir
echo "installed into $stage"
