#!/usr/bin/env bash
# Shared set-up for ./run.sh and ./test.sh: installs missing Debian packages (when root),
# configures the Meson build directory once, builds, and prints which backends the build has.
# Idempotent; safe to run again. Sourced, not executed: it leaves BUILD_DIR set for the caller.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
# What the build, the tests and ./run.sh use, and nothing else: the compiler and Meson (cmake
# finds doctest), the libraries, the data set, the Python modules the tests run h5py and (for the
# Example interop test) protobuf with, and the export tests' checkers: python3-onnx
# (onnx.checker) and node + npm (onnxruntime-node).
packages=(
  meson ninja-build pkg-config cmake g++
  libeigen3-dev libdnnl-dev libfmt-dev doctest-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
  libhdf5-dev libprotobuf-dev protobuf-compiler libisal-dev libfarmhash-dev
  libgrpc++-dev protobuf-compiler-grpc python3-grpcio openssl
  dataset-fashion-mnist python3-h5py python3-numpy python3-protobuf
  python3-onnx nodejs libcpp-httplib-dev curl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm (the ONNX runtime the export tests compare against comes from npm): Debian's package,
# unless the nodejs installed already brings the command (NodeSource's does, and conflicts with
# Debian's npm).
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  if [ "$(id -u)" -eq 0 ]; then
    echo "Installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "Missing Debian packages: ${missing[*]}" >&2
    echo "Run as root once, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

relocatable() {  # True when the build directory writes a relocatable est.pc
  meson introspect --buildoptions "$1" | /usr/bin/python3 -c 'import json, sys
print(any(o["name"] == "pkgconfig.relocatable" and o["value"] for o in json.load(sys.stdin)))'
}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR" ${EST_MESON_OPTIONS:-}
elif [ "$(relocatable "$BUILD_DIR")" != True ]; then
  # Configured before that became the default; the install test (tests/install) needs it.
  meson configure "$BUILD_DIR" -Dpkgconfig.relocatable=true
fi
ninja -C "$BUILD_DIR"
cat "$BUILD_DIR/backends.txt"  # "Backends: oneDNN on, CUDA off, gRPC off"
