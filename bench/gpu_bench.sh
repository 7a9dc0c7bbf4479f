#!/usr/bin/env bash
# Issue 13's speed comparison: est (build/bench/gpu_bench) and PyTorch eager (bench/torch_gpu.py)
# on the same device in one run, their lines, then the ratios against the targets: the tutorial
# CNN at batch 64 >= 4x torch's steps/s (est's best mode: a CUDA graph of the step), at batch
# 1024 >= 1.2x its examples/s, and the ResNet-style net at batch 256 reported (est
# mixed_bfloat16 when the build has it, torch bfloat16 autocast with cudnn.benchmark = True).
# Without torch (or a torch without CUDA) est's figures are still printed and each ratio says
# why it is missing. --device cpu runs both on the CPU (the smoke test in tests/scripts).
#
#   bench/gpu_bench.sh [--build DIR] [--device gpu|cpu] [gpu_bench/torch_gpu.py flags...]
#   e.g. bench/gpu_bench.sh --build build --device gpu
# PYTHON chooses the interpreter (default: the first of python3 on PATH and /usr/bin/python3 that
# imports torch).
set -uo pipefail
cd "$(dirname "$0")/.."
build=build
device=gpu
args=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$device" in
  gpu) torch_device=cuda ;;
  cpu) torch_device=cpu ;;
  *) echo "gpu_bench.sh: --device is gpu or cpu, not '$device'" >&2; exit 2 ;;
esac
if [[ ! -x "$build/bench/gpu_bench" ]]; then
  echo "gpu_bench.sh: $build/bench/gpu_bench is not built (ninja -C $build bench/gpu_bench)" >&2
  exit 2
fi
if [[ -z "${PYTHON:-}" ]]; then
  # The first of python3 on PATH and /usr/bin/python3 that imports torch (Debian's torch is seen
  # only by /usr/bin/python3; a GPU image's torch usually by the python3 on PATH).
  PYTHON=python3
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
      PYTHON=$candidate
      break
    fi
  done
fi

echo "== est ($build/bench/gpu_bench --device $device ${args[*]})"
ours=$("$build/bench/gpu_bench" --device "$device" "${args[@]}" 2>&1)
est_status=$?
echo "$ours"
if ((est_status != 0)); then echo "est: gpu_bench exited with status $est_status"; fi

echo "== torch ($PYTHON bench/torch_gpu.py --device $torch_device ${args[*]})"
missing=""
peer=""
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  missing="no Python interpreter $PYTHON (set PYTHON to one with torch)"
elif ! import_error=$("$PYTHON" -c 'import torch' 2>&1); then
  missing="PyTorch is not installed for $PYTHON ($(tail -n 1 <<<"$import_error"))"
else
  peer=$("$PYTHON" bench/torch_gpu.py --device "$torch_device" "${args[@]}" 2>&1)
  torch_status=$?
  echo "$peer"
  if device_error=$(grep -m1 '^torch device=.* error=' <<<"$peer"); then
    missing="torch cannot run on the device: ${device_error#*error=}"
  elif ((torch_status != 0)); then
    missing="bench/torch_gpu.py exited with status $torch_status ($(tail -n 1 <<<"$peer"))"
  fi
fi
[[ -n "$missing" ]] && echo "torch: missing: $missing"
case $missing in
  "PyTorch is not installed"* | "no Python interpreter"*)
    echo "torch: to install PyTorch: apt-get install python3-torch (Debian's, seen by" \
      "/usr/bin/python3), or pip install torch into the python3 on PATH" ;;
esac

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
number() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
line() { grep -m1 "^$1 train model=$2 batch=$3 mode=$4 " <<<"$5"; }

echo "== ratios (est / torch, same device, one run)"
printf '%-46s %14s %14s %8s  %s\n' measurement est torch ratio target
row() {  # label est_value torch_value target_ratio(or "-") why_est_missing
  local label=$1 mine=$2 theirs=$3 target=$4 why=$5 ratio verdict
  if ! number "$mine"; then
    printf '%-46s %14s %14s %8s  ratio missing: est has no figure (%s)\n' "$label" - "${theirs:--}" - "$why"
    return
  fi
  if [[ -n "$missing" ]]; then
    printf '%-46s %14.1f %14s %8s  ratio missing: %s\n' "$label" "$mine" - - "$missing"
    return
  fi
  if ! number "$theirs"; then
    printf '%-46s %14.1f %14s %8s  ratio missing: torch has no figure for it\n' "$label" "$mine" - -
    return
  fi
  ratio=$(awk -v a="$mine" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
  verdict=reported
  if [[ "$target" != - && "$device" == gpu ]]; then  # the targets are the H100's
    verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
    verdict=">= ${target}x: $verdict"
  fi
  printf '%-46s %14.1f %14.1f %8s  %s\n' "$label" "$mine" "$theirs" "$ratio" "$verdict"
}

batches=$(grep -o '^est train model=cnn batch=[0-9]*' <<<"$ours" | sed 's/.*batch=//' | uniq)
for batch in $batches; do
  # est's best mode: the CUDA graph when it ran, else eager.
  est_line=$(line est cnn "$batch" graph "$ours")
  mode=graph
  if ! number "$(field steps_per_sec "$est_line")"; then
    est_line=$(line est cnn "$batch" eager "$ours")
    mode=eager
  fi
  torch_line=$(line torch cnn "$batch" eager "$peer")
  why=$(field error "$est_line")
  if ((batch <= 64)); then
    target=-; ((batch == 64)) && target=4.0
    row "cnn batch=$batch steps/s (est $mode)" "$(field steps_per_sec "$est_line")" \
      "$(field steps_per_sec "$torch_line")" "$target" "$why"
  else
    target=-; ((batch == 1024)) && target=1.2
    row "cnn batch=$batch examples/s (est $mode)" "$(field examples_per_sec "$est_line")" \
      "$(field examples_per_sec "$torch_line")" "$target" "$why"
  fi
done
est_line=$(grep -m1 '^est train model=resnet ' <<<"$ours")
if [[ -n "$est_line" ]]; then
  torch_line=$(grep -m1 '^torch train model=resnet ' <<<"$peer")
  theirs=$(field precision "$torch_line")
  row "resnet batch=$(field batch "$est_line") examples/s ($(field precision "$est_line")/${theirs:--})" \
    "$(field examples_per_sec "$est_line")" "$(field examples_per_sec "$torch_line")" - \
    "$(field error "$est_line")"
fi
exit "$est_status"
