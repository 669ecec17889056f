#!/usr/bin/env bash
# Teach a trained generalist to decline: a short LoRA run that starts from its adapter
# (`train --init-adapter`) on a mix where a quarter of the requests need no call.
#
#   scripts/teach-declining.sh [PLANNER] [OUT]
#     PLANNER  default planners/generalist-qwen05 (trained by scripts/train-generalist.sh 3)
#     OUT      default target/generalist-qwen05-declines
#
# Why: the generalist's training mix holds ~4% requests no tool fits, so the model learned to
# open a call whatever it is asked; it never declines (0 of 30 hand-written, 0 of 240 BFCL
# irrelevance; docs/experiments/generalist.md). Whether a reply ends before its first call
# is the model's end token against everything else it would write, a decision a LoRA
# adapter can move with enough examples of it.
#
# The mix, deterministic (seed 31 for new requests):
#   - every "no call" and a third of the `clarify` requests of a fresh `data pace` run;
#   - half the Pace calls of the generalist's own training split (replay: keep what it knows);
#   - every 8th group of 32 of its changed-catalog / invented-tool traces (whole groups, so a
#     batch still shares one catalog prompt); REPLAY_EVERY=4 keeps every 4th instead.
# The generalist's held-out calibration and test splits place the floor, as before;
# `--exclude-overlap eval/handwritten` keeps the hand-written sets out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
planner="${1:-planners/generalist-qwen05}"
out="${2:-target/generalist-qwen05-declines}"
src="${SRC_DATA:-target/generalist-data-3-1500}"
data="target/declining-data"
tools=examples/pace/tools.json
if [ ! -f "$src/mix.jsonl" ]; then
  echo "no $src/mix.jsonl: make the generalist's data first (scripts/train-generalist.sh 3, N=1500)" >&2
  exit 2
fi
cargo build --release -p plansmith
bin="${CARGO_TARGET_DIR:-target}/release/plansmith"
mkdir -p "$data"
"$bin" data pace --out "$data/pace" --seed 31 --n 12000 --calibration 200
{
  grep -F '"calls":[]' "$data/pace/train.jsonl"
  grep -F '"name":"clarify"' "$data/pace/train.jsonl" | awk 'NR % 3 == 0'
  grep -v -F -e '"calls":[]' -e '"name":"clarify"' "$src/train.jsonl" | awk 'NR % 2 == 0'
  awk -v every="${REPLAY_EVERY:-8}" 'int((NR - 1) / 32) % every == 0' "$src/aug.jsonl"
} > "$data/mix.jsonl"
echo "mix: $(wc -l < "$data/mix.jsonl") traces, $(grep -c -F '"calls":[]' "$data/mix.jsonl") with no call" >&2
"$bin" --threads 2 train --base assets/qwen05.gguf --init-adapter "$planner" --tools "$tools" \
  --data "$data/mix.jsonl" --calibration "$src/calibration-mix.jsonl" --test "$src/test-mix.jsonl" \
  --lora-rank 6 --lora-alpha 12 --lr "${LR:-5e-4}" --adapter-f16 --confidence auto \
  --max-wrong "${MAX_WRONG:-0.05}" --reply-format tool_call --checkpoint-every 10 \
  ${RESUME:+--resume "$out.checkpoint"} --exclude-overlap eval/handwritten --out "$out" \
  --json --log-every 5 | tee ${RESUME:+-a} "$out.train.log"
"$bin" --threads 2 eval bfcl --planner "$out" --data-dir eval/handwritten \
  --categories handwritten_pace,handwritten_new_tools,handwritten_clarify,handwritten_pace_irrelevance \
  --out "$out.handwritten"
