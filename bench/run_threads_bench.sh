#!/usr/bin/env bash
# Issue 17's experiment in one run: build/bench/threads_bench (est with nothing set, and with the
# old fixed team), then PyTorch's tutorial CNN (bench/torch_cnn.py, training at batch 64, as many
# threads as cores: its default) alone and two at once, each as a fraction of one alone. The load
# average comes first: on a busy machine the figures measure the other jobs. Without PyTorch for
# /usr/bin/python3 its part is skipped, saying how to install it.
#   bench/run_threads_bench.sh [build-dir] [threads_bench options (default --seconds 2 --rounds 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
args=("$@")
((${#args[@]})) || args=(--seconds 2 --rounds 3)

echo "load: $(uptime)"
"$build/bench/threads_bench" "${args[@]}"

if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "torch: skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
  exit 0
fi
threads=$(nproc)
# examples/s of one torch_cnn.py training at batch 64 (its batch 256 and eval lines are dropped)
torch_rate() {
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 bench/torch_cnn.py \
    --threads "$threads" --repeats 3 --examples 6400 | grep 'train batch=64 ' |
    sed 's/.*examples_per_sec=//'
}
one=$(torch_rate)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
torch_rate >"$dir/first" &
first=$!
torch_rate >"$dir/second" &
second=$!
wait "$first" "$second"
awk -v one="$one" -v a="$(cat "$dir/first")" -v b="$(cat "$dir/second")" -v t="$threads" 'BEGIN {
  printf "torch scenario=one processes=1 threads=%d examples_per_sec=%.0f of_one=1.00\n", t, one
  each = (a + b) / 2
  printf "torch scenario=two_default processes=2 threads=%d examples_per_sec=%.0f of_one=%.2f total_of_one=%.2f\n", t, each, each / one, (a + b) / one
}'
