#!/usr/bin/env bash
# Re-train the embedded default planner from scratch with this project's own commands:
# generate the Pace dataset, train, calibrate, test, and write the planner directory that
# `plansmith` embeds (crates/plansmith-planner/default/). Deterministic per seed.
#
#   scripts/train-default.sh [SEED]        # ~13 minutes on a loaded 2-core machine (3 epochs)
#
# Then rebuild (`cargo build --release`) so the binary embeds the new planner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-0}"
data="target/default-planner-data"
cargo build --release -p plansmith
bin=target/release/plansmith
"$bin" data pace --out "$data" --seed "$seed" --n 40000
# The first 1,000 of each held-out split: enough to fit and judge the floor, quick to decode.
head -n 1000 "$data/calibration.jsonl" > "$data/calibration-1k.jsonl"
head -n 1000 "$data/test.jsonl" > "$data/test-1k.jsonl"
# One compute thread: on a 2-core machine it is as fast as two, immune to contention, and the
# training run is bit-for-bit deterministic per seed at a fixed thread count. Confidence counts
# every reply token: on this planner it calibrates far better than chosen tokens only (README).
"$bin" --threads 1 train --data "$data/train.jsonl" --calibration "$data/calibration-1k.jsonl" \
  --test "$data/test-1k.jsonl" --tools examples/pace/tools.json --out crates/plansmith-planner/default \
  --epochs 3 --lr 3e-3 --batch-size 32 --block 288 --d-model 96 --layers 3 --heads 4 --pos rope \
  --confidence all --seed "$seed"
"$bin" eval traces --planner crates/plansmith-planner/default --data "$data/test-1k.jsonl" --free \
  --out target/default-planner-report
