#!/usr/bin/env bash
# The tools-in-prompt experiment behind issue #10 (not the shipped planner): train a tiny
# planner that reads the catalog's compact line in its prompt, with one Pace verb held out of
# training, and measure it on
#   1. the Pace test split (catalog in the prompt),
#   2. the same requests against renamed / shuffled / distractor catalogs,
#   3. the held-out verb, given only its schema in the catalog.
#
#   scripts/experiment-tools-in-prompt.sh [SEED] [N] [VERB]   # defaults: 0 70000 wait
#
# With N = 70,000 (180,322 traces after augmentation) training takes ~13 minutes on one
# thread. Session 4's numbers: Pace test 0.946 (coverage 0.712), changed catalogs 0.823
# (coverage 0.315), held-out `wait` 0.000 (escalated 99%).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-0}"
n="${2:-70000}"
verb="${3:-wait}"
out="target/tools-in-prompt-$verb-$n-$seed"
tools=examples/pace/tools.json
cargo build --release -p plansmith
bin="${CARGO_TARGET_DIR:-target}/release/plansmith"
mkdir -p "$out"
"$bin" data pace --out "$out/data" --seed "$seed" --n "$n" --holdout-verb "$verb" --upper-train 0.15
# renamed tools and parameters, shuffled catalogs, distractors, removed tools, plus synthetic
# families: what teaches a model to read the catalog rather than memorise Pace
"$bin" data augment --data "$out/data/train.jsonl" --tools "$tools" --out "$out/train-aug.jsonl" \
  --copies 1 --keep-original --synthetic $((n * 2 / 7)) --seed "$seed"
head -n 3000 "$out/data/calibration.jsonl" > "$out/calibration-3k.jsonl"
head -n 2000 "$out/data/test.jsonl" > "$out/test-2k.jsonl"
head -n 500 "$out/data/heldout_verb.jsonl" > "$out/heldout-500.jsonl"
"$bin" data augment --data "$out/test-2k.jsonl" --tools "$tools" --out "$out/test-2k-changed.jsonl" \
  --copies 1 --seed 7
# catalogs of synthetic families make longer prompts than Pace's: block 320
"$bin" --threads 1 train --data "$out/train-aug.jsonl" --calibration "$out/calibration-3k.jsonl" \
  --test "$out/test-2k.jsonl" --tools "$tools" --tools-in-prompt --out "$out/planner" \
  --epochs 1 --block 320 --batch-size 32 --lr 3e-3 --confidence all --seed "$seed"
for split in test-2k test-2k-changed heldout-500; do
  echo "== $split"
  "$bin" --threads 1 eval traces --planner "$out/planner" --data "$out/$split.jsonl"
done
