#!/usr/bin/env bash
# One run on the GPU machine, within a time budget: the GPU suites, bench/gpu_bench.sh, then
# compute-sanitizer's memcheck on the graph and allocator suites, from the binaries that
# scripts/prebuild_gpu.sh staged in .gpu/ (the GPU machine has nvcc, cuDNN and NCCL but not the
# -dev packages a build needs; without .gpu/ it tries to build, which needs them). Logs go to
# $OUT (default /tmp/gpu_out), six files at most, so the device tool brings them all back:
#   summary.txt  one line per step: rc, seconds, doctest's closing line, skips; the verdict last
#   env.txt      GPU, driver, toolkit, torch, where each CUDA library was found
#   tests.log    every suite's full output     sanitizer.log  memcheck's output
#   bench.log    bench/gpu_bench.sh's output   build.log      only when it had to build
# It stops (exit 3) before any suite unless backends.txt says "CUDA on", and (exit 77, "no
# GPU") when the first GPU suite finds no GPU: a GPU suite that skips there is not a pass. A
# suite that fails or times out makes the exit status 1; all steps still run.
#
#   BUDGET=420 bash scripts/gpu_check.sh      (bench/README.md: the device tool's call)
# Env: BUDGET (seconds for the whole run, default 480), BENCH_ARGS (default "--steps 100
# --repeats 3"; gpu_bench.sh's flags), SANITIZE (1 by default: memcheck; 0 leaves it out), OUT,
# GPU_STAGE (the staged folder, default .gpu; the scripts suite points it at a stage of its own).
set -u
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/gpu_out}
stage=${GPU_STAGE:-.gpu}
mkdir -p "$OUT"
BUDGET=${BUDGET:-480}
T0=$SECONDS
summary="$OUT/summary.txt"
: >"$summary"
failed=0
note() { echo "[$((SECONDS - T0))s] $*" | tee -a "$summary"; }
left() { echo $((BUDGET - (SECONDS - T0))); }

# --- environment: the GPU, and the CUDA libraries wherever this image keeps them ------------
# (the toolkit under /usr/local/cuda, a Debian/Ubuntu package, or Python wheels: nvidia-cudnn-cu13
# and nvidia-nccl-cu13 sit in the site-packages of the python3 that has torch).
sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  echo "nvcc: $(command -v nvcc) $(nvcc --version 2>&1 | tail -1)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
        "cudnn", torch.backends.cudnn.version(), "gpu", torch.cuda.is_available())'
  echo "compute-sanitizer: $(command -v compute-sanitizer)"
  echo "site-packages: $sites"
} >"$OUT/env.txt" 2>&1
libdirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
  if [[ -z "$found" ]]; then
    # shellcheck disable=SC2086  # $sites is a list of folders
    found=$(find /usr/local/cuda/ /usr/local/cuda*/ $sites /usr/lib/x86_64-linux-gnu /opt \
      -name "$lib" 2>/dev/null | head -1)
  fi
  echo "lib $lib -> ${found:-NOT FOUND}" >>"$OUT/env.txt"
  if [[ -n "$found" ]]; then
    dir=$(dirname "$found")
    case ":$libdirs:" in *":$dir:"*) ;; *) libdirs="$libdirs:$dir" ;; esac
  fi
done

# --- binaries: the staged ones, or a build ----------------------------------------------------
# Unpacked outside the stage (the stage travels as it is: nothing may grow inside it), into
# folders removed when the script ends.
scratch=$(mktemp -d /tmp/est_gpu.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
unpacked=$stage
if [[ -f "$stage/gpu.tar.xz" ]]; then
  unpacked=$scratch/stage
  mkdir -p "$unpacked"
  # tar's xz, or Python's lzma where the image has no xz
  tar -C "$unpacked" -xJf "$stage/gpu.tar.xz" 2>/dev/null ||
    python3 -m tarfile -e "$stage/gpu.tar.xz" "$unpacked/" ||
    note "could not unpack $stage/gpu.tar.xz"
fi
if [[ -x "$unpacked/build/bench/gpu_bench" ]]; then
  build=$unpacked/build
  # The carried Debian libraries this image lacks: one it has under the same soname is
  # ABI-compatible, and the image's own (newer) one suits its libstdc++.
  carried=$scratch/lib
  mkdir -p "$carried"
  for f in "$unpacked"/lib/*; do
    [[ -e "$f" ]] || continue
    ldconfig -p | awk -v l="$(basename "$f")" '$1 == l {f = 1} END {exit !f}' || cp "$f" "$carried/"
  done
  note "prebuilt binaries ($build); Debian libraries carried: $(find "$carried" -type f -printf '%f ')"
  export LD_LIBRARY_PATH="${libdirs#:}:$carried"
else
  build="build-gpu"
  export LD_LIBRARY_PATH="${libdirs#:}"
  {
    { [[ -f $build/build.ninja ]] || meson setup $build -Dcuda=enabled; } &&
      ninja -C $build -j16 tests/ops/test_ops tests/ops/test_ops_gpu tests/ops/test_ops_gpu_nn \
        tests/ops/test_ops_gpu_graph tests/nn/test_nn_gpu tests/data/test_data_gpu \
        tests/distribute/test_distribute_gpu bench/gpu_bench
  } >"$OUT/build.log" 2>&1
  note "no .gpu/ staged (scripts/prebuild_gpu.sh): built here, rc=$? ($(tail -1 "$OUT/build.log"))"
fi
note "$(cat "$build/backends.txt" 2>/dev/null || echo "no $build/backends.txt")"
if ! grep -q "CUDA on" "$build/backends.txt" 2>/dev/null; then
  note "VERDICT: stop: not a CUDA build (backends.txt must say 'CUDA on'); every GPU suite would skip"
  exit 3
fi
# The Estimator suite trains on Fashion-MNIST at Debian's path; install the staged copy there.
fashion=/usr/share/datasets/fashion-mnist
if [[ ! -f $fashion/train-images-idx3-ubyte.gz && -d "$stage/fashion-mnist" ]]; then
  if mkdir -p $fashion 2>/dev/null && cp "$stage"/fashion-mnist/*.gz $fashion/ 2>/dev/null; then
    note "installed the staged Fashion-MNIST in $fashion"
  else
    note "could not install Fashion-MNIST in $fashion (not root?): the Estimator case will skip"
  fi
fi

# --- tests: each suite under min(its timeout, what the budget leaves for the bench) ----------
run() {  # name timeout binary args...
  local name=$1 t=$2
  shift 2
  local cap=$(($(left) - 150))
  ((cap < t)) && t=$cap
  if ((t < 15)); then
    note "$name NOT RUN (budget spent)"
    failed=1
    return
  fi
  local start=$SECONDS log="$OUT/.suite.log"
  timeout -k 5 "$t" "$@" --no-colors -d >"$log" 2>&1
  local rc=$?
  { echo "===== $name (timeout ${t}s) rc=$rc: $*"; cat "$log"; } >>"$OUT/tests.log"
  local closing
  closing=$(grep -a -E 'test cases:|^SKIPPED:' "$log" | tail -1)
  note "$name rc=$rc $((SECONDS - start))s $( ((rc == 124 || rc == 137)) && echo TIMEOUT) $closing"
  grep -a '^SKIPPED test case' "$log" | sed 's/^/    /' | tee -a "$summary"
  rm -f "$log"
  if ((rc == 77)); then
    note "VERDICT: stop: $name found no GPU ($closing); nothing here ran on a GPU"
    exit 77
  fi
  ((rc != 0)) && failed=1
}
b=$build
run ops_gpu 60 "$b"/tests/ops/test_ops_gpu
run ops_gpu_graph 60 "$b"/tests/ops/test_ops_gpu_graph
run nn_gpu 45 "$b"/tests/nn/test_nn_gpu
run data_gpu 45 "$b"/tests/data/test_data_gpu
run ops_gpu_nn 120 "$b"/tests/ops/test_ops_gpu_nn
run harness_cuda 120 "$b"/tests/ops/test_ops '-tc=*gpu/cuda*'
run distribute_gpu 150 "$b"/tests/distribute/test_distribute_gpu

# --- bench: torch's side under the image's python3, without the carried libraries ------------
t=$(($(left) - 90))  # memcheck gets what is left after it
((t > 240)) && t=240
if ((t >= 60)); then
  printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec python3 "$@"\n' >"$OUT/.python" && chmod +x "$OUT/.python"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  PYTHON=$OUT/.python timeout -k 5 $t bash bench/gpu_bench.sh --build $b --device gpu \
    ${BENCH_ARGS:---steps 100 --repeats 3} >"$OUT/bench.log" 2>&1
  rc=$?
  rm -f "$OUT/.python"
  note "bench rc=$rc (timeout ${t}s)"
  sed -n '/^== ratios/,$p' "$OUT/bench.log" | tee -a "$summary"
else
  note "bench NOT RUN (budget spent)"
fi
# --- memcheck: the graph suite and the allocator cases, for bad accesses (no leak check: the
# allocator's cache and the per-process streams are held on purpose) ---------------------------
if [[ "${SANITIZE:-1}" == 1 ]]; then
  if ! command -v compute-sanitizer >/dev/null; then
    note "memcheck NOT RUN: no compute-sanitizer on PATH"
  elif (($(left) < 40)); then
    note "memcheck NOT RUN (budget spent)"
  else
    memcheck() {  # name binary args...
      local name=$1 t=$(($(left) - 10))
      shift
      ((t > 150)) && t=150
      if ((t < 20)); then
        note "memcheck $name NOT RUN (budget spent)"
        return
      fi
      { echo "===== memcheck $name: $*"; timeout -k 5 $t compute-sanitizer --tool memcheck \
        --leak-check no --error-exitcode 9 "$@" --no-colors; echo "rc=$?"; } >>"$OUT/sanitizer.log" 2>&1
      note "memcheck $name $(tail -1 "$OUT/sanitizer.log") $(grep -a 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
      tail -1 "$OUT/sanitizer.log" | grep -qx 'rc=0' || failed=1
    }
    memcheck ops_gpu_graph "$b"/tests/ops/test_ops_gpu_graph
    memcheck allocator "$b"/tests/ops/test_ops_gpu '-tc=*alloc*'
  fi
fi

if ((failed)); then note "VERDICT: FAILED (see tests.log / sanitizer.log)"; exit 1; fi
note "VERDICT: every GPU suite passed"
