#!/usr/bin/env bash
# Trains and evaluates the Estimator tutorial's CNN here and in PyTorch, in the same run, and
# prints examples/s for both with the ratio. PyTorch is Debian's python3-torch with OpenBLAS's
# OpenMP build, 2 threads (a fair peer: see bench/README.md).
#   bench/run_cnn_bench.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${THREADS:-2}

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "run_cnn_bench.sh: PyTorch (the peer) is not installed for /usr/bin/python3;" \
    "install Debian's: apt-get install python3-torch" >&2
  exit 2
fi
ours=$(OMP_NUM_THREADS=$threads "$build/bench/cnn_bench" --threads "$threads")
peer=$(OMP_NUM_THREADS=$threads LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
  /usr/bin/python3 bench/torch_cnn.py --threads "$threads")

printf '%-24s %12s %12s %8s %9s\n' measurement est torch ratio roofline
while read -r _ kind batch rate fraction; do
  key="$kind $batch"
  theirs=$(grep -F "torch $key " <<<"$peer" | sed 's/.*examples_per_sec=//')
  mine=${rate#examples_per_sec=}
  printf '%-24s %12.0f %12.0f %8.2f %9s\n' "$kind $batch" "$mine" "$theirs" \
    "$(awk -v a="$mine" -v b="$theirs" 'BEGIN { print a / b }')" "${fraction##*roofline_fraction=}"
done < <(grep -E '^est (train|eval) ' <<<"$ours")
grep '^est roofline' <<<"$ours" || true
grep '^est steady_state' <<<"$ours" || true
