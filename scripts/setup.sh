#!/usr/bin/env bash
# Shared set-up for ./run.sh and ./test.sh: installs missing Debian packages (when root),
# configures the Meson build directory once, builds, and prints which backends the build has.
# Idempotent; safe to run again. Sourced, not executed: it leaves BUILD_DIR set for the caller.
# EST_BUILD_TARGETS (ninja targets, space-separated) builds only those and what they need:
# ./run.sh builds its one program, ./test.sh everything (meson test builds what is left).
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
# What the build and ./run.sh use: the compiler and Meson (cmake finds doctest, which
# `meson setup` requires), the libraries and the data set.
packages=(
  meson ninja-build pkg-config cmake g++
  libeigen3-dev libdnnl-dev libfmt-dev doctest-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
  libhdf5-dev libprotobuf-dev protobuf-compiler libisal-dev libfarmhash-dev libsnappy-dev
  libgrpc++-dev protobuf-compiler-grpc libcpp-httplib-dev
  dataset-fashion-mnist
)
# What only the tests use (./run.sh sets EST_TEST_TOOLS=0 and skips them): the Python modules
# the tests read files with (h5py, numpy), talk to est with (grpcio, protobuf for the Example
# interop test, grpc-tools for est-serve's gRPC client stubs), the export tests' checkers
# (python3-onnx's onnx.checker; node + npm for onnxruntime-node), curl and openssl (the REST and
# TLS tests), and Prometheus (est-serve's metrics are scraped by the real server).
test_packages=(
  python3-grpcio python3-grpc-tools python3-h5py python3-numpy python3-protobuf python3-onnx
  nodejs curl openssl prometheus
)
if [ "${EST_TEST_TOOLS:-1}" = 1 ]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm (the ONNX runtime the export tests compare against comes from npm): Debian's package,
# unless the nodejs installed already brings the command (NodeSource's does, and conflicts with
# Debian's npm).
[ "${EST_TEST_TOOLS:-1}" != 1 ] || command -v npm >/dev/null || missing+=(npm)
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
ninja -C "$BUILD_DIR" ${EST_BUILD_TARGETS:-}
cat "$BUILD_DIR/backends.txt"  # "Backends: oneDNN on, CUDA off, gRPC off"
