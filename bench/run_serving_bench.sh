#!/usr/bin/env bash
# Issue 21's and 31's serving figures in one run: build/bench/serving_bench (the tutorial CNN
# through est-serve at 1, 8 and 64 clients, over REST on kept-alive connections and over gRPC;
# Estimator::predict and est's ONNX interpreter in-process; the server's own cost per request;
# issue 31's targets as `target NAME=RATIO BOUND met=yes|no` lines; onnxruntime-node behind
# Node's HTTP server with the same clients, bench/serving_ort_http.js), then onnxruntime-node
# in-process on the same model.onnx (bench/serving_ort.js), found or installed into build/npm
# as the export tests do. The load average comes first: on a busy machine the figures measure
# the other jobs.
#   bench/run_serving_bench.sh [build-dir] [--requests N (default 256)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
args=("$@")
((${#args[@]})) || args=(--requests 256)

echo "load: $(uptime)"
dir=$(mktemp -d /tmp/serving_bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
peer=()
if modules=$(sh tests/export/find_onnxruntime.sh "$build/npm"); then
  peer=(--ort_http bench/serving_ort_http.js --node_path "$modules")
fi
EST_DEVICE=/cpu:0 "$build/bench/serving_bench" --est_serve "$build/tools/est-serve" --dir "$dir" \
  "${peer[@]}" "${args[@]}" 2>/dev/null | tee "$dir/figures.txt"
model=$(sed -n 's/^model_onnx=//p' "$dir/figures.txt")
if ((${#peer[@]} == 0)); then
  echo "onnxruntime_node: skipped: $modules"
  exit 0
fi
runs=256
[ "${args[0]}" = --requests ] && runs=${args[1]}
NODE_PATH="$modules" node bench/serving_ort.js "$model" "$runs"
