#!/usr/bin/env bash
# Builds the GPU configuration HERE (where the -dev packages are) and stages what the GPU machine
# needs to run the GPU suites and the bench without building: the GPU machine's image has nvcc,
# cuDNN and NCCL but none of the Debian -dev packages, and no package archive. Then
# scripts/gpu_check.sh runs there. Why each step is so:
#   - The configuration is the project's default (oneDNN and gRPC on, as ./run.sh builds) plus
#     -Dcuda=enabled, in its own build directory (build-gpu): with -Dcuda=auto a cuDNN or NCCL
#     Meson cannot find drops CUDA silently and every GPU suite would "skip"; the build stops
#     unless backends.txt says "CUDA on". Sharing the default options lets ccache reuse the
#     objects of ./build.
#   - Stripped binaries (the GPU suites, the op harness, bench/gpu_bench) in the layout of a build
#     directory, plus the Debian shared libraries they load beyond glibc, libstdc++ and CUDA
#     (fmt, oneDNN, HDF5, gRPC, ...): the GPU machine brings its own CUDA, cuDNN and NCCL.
#   - The Fashion-MNIST files (/usr/share/datasets/fashion-mnist, scripts/setup.sh's
#     dataset-fashion-mnist) that the Estimator-on-/gpu:0 suite trains on.
# All of it goes to .gpu/ (ignored by git through .git/info/exclude): gpu.tar.xz (xz -9: its
# 64 MiB window shares the est code that every statically linked binary repeats, half of gzip's
# size) and fashion-mnist/, which the device tool carries (`carry: [".gpu"]`). The tool sends the working
# tree and the carried paths, 64 MiB in all: this script fails when .gpu/ plus the tracked tree
# would not fit under EST_GPU_STAGE_LIMIT_MIB (default 60, a margin for untracked files).
#
#   bash scripts/prebuild_gpu.sh   # a minute to build when ./build is current (ccache), then
#                                  # a few minutes of xz on 2 cores
# Env: EST_GPU_BUILD_DIR (default build-gpu), EST_GPU_MESON_OPTIONS (extra meson options).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${EST_GPU_BUILD_DIR:-build-gpu}
limit_mib=${EST_GPU_STAGE_LIMIT_MIB:-60}
# The GPU suites, the op harness (its gpu/cuda cases) and the bench; gpu_check.sh runs these.
targets=(tests/ops/test_ops tests/ops/test_ops_gpu tests/ops/test_ops_gpu_nn
         tests/ops/test_ops_gpu_graph tests/nn/test_nn_gpu tests/data/test_data_gpu
         tests/distribute/test_distribute_gpu bench/gpu_bench)
fashion=/usr/share/datasets/fashion-mnist

if [[ ! -f "$build/build.ninja" ]]; then
  # shellcheck disable=SC2086  # options are words
  meson setup "$build" -Dcuda=enabled ${EST_GPU_MESON_OPTIONS:-}
else
  # shellcheck disable=SC2086
  meson configure "$build" -Dcuda=enabled ${EST_GPU_MESON_OPTIONS:-} >/dev/null
fi
ninja -C "$build" "${targets[@]}"
if ! grep -q "CUDA on" "$build/backends.txt"; then
  echo "prebuild_gpu.sh: $build/backends.txt says '$(cat "$build/backends.txt")': no CUDA build," \
    "so the GPU suites would only skip. Install the CUDA toolkit with cuDNN and NCCL beside nvcc" \
    "(meson.build says where it looks) and run again." >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib"
cp "$build/backends.txt" "$stage/build/"
for t in "${targets[@]}"; do
  mkdir -p "$stage/build/$(dirname "$t")"
  strip -o "$stage/build/$t" "$build/$t"
done
# The shared libraries the binaries load, less the C runtime and CUDA (the GPU machine has its
# own, matched to its driver). gpu_check.sh drops those the GPU machine already has.
for t in "${targets[@]}"; do ldd "$build/$t"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libutil|libresolv|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda|/(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

rm -rf .gpu
mkdir -p .gpu
tar -C "$stage" -cf - . | xz -9 -T2 >.gpu/gpu.tar.xz
if [[ -f "$fashion/train-images-idx3-ubyte.gz" ]]; then
  cp -r "$fashion" .gpu/fashion-mnist
else
  echo "prebuild_gpu.sh: $fashion is missing (Debian's dataset-fashion-mnist): the Estimator" \
    "suite on /gpu:0 will skip there" >&2
fi
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"

staged_kib=$(du -sk .gpu | cut -f1)
tree_kib=$(git ls-files -z | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total_mib=$(((staged_kib + tree_kib) / 1024))
echo "prebuild_gpu.sh: staged .gpu/ ($((staged_kib / 1024)) MiB) + tracked tree" \
  "($((tree_kib / 1024)) MiB) = ${total_mib} MiB of the device tool's 64 MiB"
ls -la .gpu
if ((total_mib > limit_mib)); then
  echo "prebuild_gpu.sh: ${total_mib} MiB is over ${limit_mib} MiB: the device tool would refuse" \
    "the call; leave data or binaries out" >&2
  exit 1
fi
