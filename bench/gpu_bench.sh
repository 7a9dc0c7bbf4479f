#!/usr/bin/env bash
# The GPU speed comparison (issue 23): est (build/bench/gpu_bench) and PyTorch
# (bench/torch_gpu.py) on the same device, like for like, then the ratios against the targets.
# Both sides print the same rows: the tutorial CNN at each batch size, in float32 with TF32 off
# on both sides and in tf32 with it on, eager and as a captured graph (est's nn::CapturedStep,
# torch's torch.cuda.CUDAGraph), and the ResNet-style net under --resnet-policy (est's line says
# how its convolutions compute: a mixed_bfloat16 row whose convolutions run in float32 through
# casts says so). The sides run --rounds times, alternating which runs first (round 1 est, round
# 2 torch, ...), so that neither always meets a cold or a warm GPU; each figure is the median
# over the rounds of each round's median run. Targets (the H100's, checked on --device gpu):
# CNN batch 64, est graph >= 4x torch eager and >= 1x torch graph, est eager >= 1.2x torch
# eager; batch 1024 float32 eager >= 1.2x torch eager examples/s; the ResNet >= 1x. Without
# torch (or a torch without CUDA) est's figures are still printed and each ratio says why it is
# missing. --device cpu runs both on the CPU (the smoke test in tests/scripts).
#
#   bench/gpu_bench.sh [--build DIR] [--device gpu|cpu] [--rounds N] [flags of both sides...]
#   e.g. bench/gpu_bench.sh --build build --device gpu --resnet-policy float32
# Flags of both sides: --warmup --steps --repeats --cnn-batches --precisions --resnet-batch
# --resnet-size --resnet-width --resnet-blocks --resnet-policy --threads.
# PYTHON chooses the interpreter (default: the first of python3 on PATH and /usr/bin/python3 that
# imports torch).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=build
device=gpu
rounds=2
args=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$device" in
  gpu) torch_device=cuda ;;
  cpu) torch_device=cpu ;;
  *) echo "gpu_bench.sh: --device is gpu or cpu, not '$device'" >&2; exit 2 ;;
esac
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu_bench.sh: --rounds is a positive number, not '$rounds'" >&2
  exit 2
fi
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
missing=""
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  missing="no Python interpreter $PYTHON (set PYTHON to one with torch)"
elif ! import_error=$("$PYTHON" -c 'import torch' 2>&1); then
  missing="PyTorch is not installed for $PYTHON ($(tail -n 1 <<<"$import_error"))"
fi

all_ours=""
all_peer=""
est_status=0
run_est() {
  echo "== est ($build/bench/gpu_bench --device $device ${args[*]})"
  local out status
  out=$("$build/bench/gpu_bench" --device "$device" "${args[@]}" 2>&1)
  status=$?
  echo "$out"
  ((status != 0)) && echo "est: gpu_bench exited with status $status" && est_status=$status
  all_ours+="$out"$'\n'
}
run_torch() {
  echo "== torch ($PYTHON bench/torch_gpu.py --device $torch_device ${args[*]})"
  if [[ -n "$missing" ]]; then
    echo "torch: missing: $missing"
    return
  fi
  local out status device_error
  out=$("$PYTHON" bench/torch_gpu.py --device "$torch_device" "${args[@]}" 2>&1)
  status=$?
  echo "$out"
  if device_error=$(grep -m1 '^torch device=.* error=' <<<"$out"); then
    missing="torch cannot run on the device: ${device_error#*error=}"
  elif ((status != 0)); then
    missing="bench/torch_gpu.py exited with status $status ($(tail -n 1 <<<"$out"))"
  fi
  [[ -n "$missing" ]] && echo "torch: missing: $missing"
  all_peer+="$out"$'\n'
}
for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2 == 1)); then
    echo "== round $round of $rounds: est first"
    run_est
    run_torch
  else
    echo "== round $round of $rounds: torch first"
    run_torch
    run_est
  fi
done

# One line per key (everything before the figures): the median over the rounds of steps/s and
# examples/s, the last round's loss; a key with no figure in any round keeps its last line.
aggregate() {  # side lines
  awk -v side="$1" '
    function median(values, count,   i, j, v, sorted) {
      for (i = 1; i <= count; ++i) sorted[i] = values[i] + 0
      for (i = 2; i <= count; ++i)
        for (j = i; j > 1 && sorted[j - 1] > sorted[j]; --j) {
          v = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = v
        }
      return count % 2 ? sorted[(count + 1) / 2] : (sorted[count / 2] + sorted[count / 2 + 1]) / 2
    }
    index($0, side " train ") == 1 {
      if (match($0, / steps_per_sec=[^ ]+ examples_per_sec=[^ ]+ loss=[^ ]+$/)) {
        key = substr($0, 1, RSTART - 1)
        split(substr($0, RSTART + 1), f, " ")
        if (!(key in count) && !(key in other)) order[++keys] = key
        n = ++count[key]
        sub(/^steps_per_sec=/, "", f[1]); steps[key, n] = f[1]
        sub(/^examples_per_sec=/, "", f[2]); examples[key, n] = f[2]
        loss[key] = f[3]
      } else if (match($0, / (error|skipped)=/)) {
        key = substr($0, 1, RSTART - 1)
        if (!(key in count) && !(key in other)) order[++keys] = key
        other[key] = $0
      }
    }
    END {
      for (k = 1; k <= keys; ++k) {
        key = order[k]
        if (!(key in count)) { print other[key]; continue }
        for (i = 1; i <= count[key]; ++i) { s[i] = steps[key, i]; e[i] = examples[key, i] }
        printf "%s steps_per_sec=%.2f examples_per_sec=%.1f %s\n", key, median(s, count[key]),
               median(e, count[key]), loss[key]
      }
    }' <<<"$2"
}
ours=$(aggregate est "$all_ours")
peer=$(aggregate torch "$all_peer")
echo "== est, median of $rounds rounds"
echo "$ours"
echo "== torch, median of $rounds rounds"
if [[ -n "$missing" ]]; then echo "torch: missing: $missing"; else echo "$peer"; fi
case $missing in
  "PyTorch is not installed"* | "no Python interpreter"*)
    echo "torch: to install PyTorch: apt-get install python3-torch (Debian's, seen by" \
      "/usr/bin/python3), or pip install torch into the python3 on PATH" ;;
esac

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
quoted() { sed -n "s/.* $1=\"\([^\"]*\)\".*/\1/p" <<<"$2"; }  # error="..." and skipped="..."
number() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
line() { grep -m1 "^$1 train model=$2 batch=$3 mode=$4 precision=$5 " <<<"$6"; }

echo "== ratios (est / torch, same device, medians of $rounds rounds alternating who runs first)"
printf '%-58s %14s %14s %8s  %s\n' measurement est torch ratio target
row() {  # label est_value torch_value target_ratio(or "-") why_est_missing [why_est_skipped]
  local label=$1 mine=$2 theirs=$3 target=$4 why=$5 skipped=${6:-} ratio verdict
  if [[ -n "$skipped" ]]; then
    printf '%-58s %14s %14s %8s  skipped: %s\n' "$label" - "${theirs:--}" - "$skipped"
    return
  fi
  if ! number "$mine"; then
    printf '%-58s %14s %14s %8s  ratio missing: est has no figure (%s)\n' "$label" - "${theirs:--}" - "$why"
    return
  fi
  if [[ -n "$missing" ]]; then
    printf '%-58s %14.1f %14s %8s  ratio missing: %s\n' "$label" "$mine" - - "$missing"
    return
  fi
  if ! number "$theirs"; then
    printf '%-58s %14.1f %14s %8s  ratio missing: torch has no figure for it\n' "$label" "$mine" - -
    return
  fi
  ratio=$(awk -v a="$mine" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
  verdict=reported
  if [[ "$target" != - && "$device" == gpu ]]; then  # the targets are the H100's
    verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r >= t) ? "met" : "NOT met" }')
    verdict=">= ${target}x: $verdict"
  fi
  printf '%-58s %14.1f %14.1f %8s  %s\n' "$label" "$mine" "$theirs" "$ratio" "$verdict"
}
compare() {  # model batch precision est_mode torch_mode unit target
  local est_line torch_line unit=$6
  est_line=$(line est "$1" "$2" "$4" "$3" "$ours")
  torch_line=$(line torch "$1" "$2" "$5" "$3" "$peer")
  local key=steps_per_sec
  [[ "$unit" == examples/s ]] && key=examples_per_sec
  row "$1 batch=$2 $3 $unit (est $4 / torch $5)" "$(field $key "$est_line")" \
    "$(field $key "$torch_line")" "$7" "$(quoted error "$est_line")" "$(quoted skipped "$est_line")"
}
batches=$(grep -o '^est train model=cnn batch=[0-9]*' <<<"$ours" | sed 's/.*batch=//' | uniq)
precisions=$(grep -o '^est train model=cnn .* precision=[a-z0-9]*' <<<"$ours" |
  sed 's/.*precision=//' | awk '!seen[$0]++')
for batch in $batches; do
  for precision in $precisions; do
    unit=steps/s
    ((batch > 64)) && unit=examples/s
    # Targets: float32 (TF32 off on both sides), at batch 64 and 1024.
    t_graph_eager=- t_graph_graph=- t_eager=-
    if [[ "$precision" == float32 && "$batch" == 64 ]]; then
      t_graph_eager=4.0 t_graph_graph=1.0 t_eager=1.2
    elif [[ "$precision" == float32 && "$batch" == 1024 ]]; then
      t_eager=1.2
    fi
    compare cnn "$batch" "$precision" eager eager "$unit" "$t_eager"
    compare cnn "$batch" "$precision" graph graph "$unit" "$t_graph_graph"
    compare cnn "$batch" "$precision" graph eager "$unit" "$t_graph_eager"
  done
done
est_line=$(grep -m1 '^est train model=resnet ' <<<"$ours")
if [[ -n "$est_line" ]]; then
  torch_line=$(grep -m1 '^torch train model=resnet ' <<<"$peer")
  theirs=$(field precision "$torch_line")
  target=-
  [[ "$(field precision "$est_line")" == mixed_bfloat16 ]] && target=1.0
  row "resnet batch=$(field batch "$est_line") examples/s ($(field precision "$est_line"), convs $(field convs "$est_line") / ${theirs:--})" \
    "$(field examples_per_sec "$est_line")" "$(field examples_per_sec "$torch_line")" "$target" \
    "$(quoted error "$est_line")"
fi
exit "$est_status"
