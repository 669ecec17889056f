#!/usr/bin/env bash
# Train a generalist planner: LoRA on a pretrained small LM over a mix made to read catalogs
# rather than memorise one (issue #28), then score it on the hand-written sets.
#
#   scripts/train-generalist.sh [SEED]          # SmolLM2-135M, ~20,000 traces, ~2 h on 2 cores
#   BASE=assets/qwen05.gguf OUT=DIR scripts/train-generalist.sh
#   N=2000 scripts/train-generalist.sh          # a small run to try the recipe (~15 minutes)
#
# The mix, deterministic per seed (N is the Pace share; the others scale with it):
#   - N Pace requests against the Pace catalog;
#   - the same N against changed catalogs (`data augment`: renamed tools and parameters, some
#     opaque, shuffled, distractors, a needed tool removed -> clarify or no call);
#   - N requests for tools invented per request (made-up verbs and descriptions);
#   - N/3 requests of the synthetic tool families.
# `--group 32` gives each run of 32 traces one changed catalog and each invented tool 32
# requests: a training batch then shares its catalog prompt and runs it once (about 10x
# faster here than a catalog per trace; docs/guide/training.md).
# `--exclude-overlap eval/handwritten` keeps the hand-written sets out of every split.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-1}"
n="${N:-6000}"
base="${BASE:-assets/smollm2.gguf}"
out="${OUT:-target/generalist-$(basename "$base" .gguf)}"
tools=examples/pace/tools.json
data="target/generalist-data-$seed-$n"
cargo build --release -p plansmith
bin="${CARGO_TARGET_DIR:-target}/release/plansmith"

"$bin" data pace --out "$data" --seed "$seed" --n "$n" --upper-train 0.15
"$bin" data augment --data "$data/train.jsonl" --tools "$tools" --out "$data/aug.jsonl" \
  --copies 1 --group 32 --novel "$n" --synthetic "$((n / 3))" --seed "$seed" \
  --novel-alternatives --novel-wide-spelling --novel-durations
cat "$data/train.jsonl" "$data/aug.jsonl" > "$data/mix.jsonl"
# Held-out splits of the same mix: a tenth each for the floor and the test report, split off
# by request hash (`train` does it when no file is given).
"$bin" --threads 2 train --base "$base" --tools "$tools" --data "$data/mix.jsonl" \
  --exclude-overlap eval/handwritten --out "$out" ${STEPS:+--steps "$STEPS"} --json --log-every 10 \
  | tee "$out.train.log"
"$bin" --threads 2 eval bfcl --planner "$out" --data-dir eval/handwritten \
  --categories handwritten_pace,handwritten_new_tools,handwritten_clarify,handwritten_pace_irrelevance \
  --out "$out.handwritten"
