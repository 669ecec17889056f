#!/usr/bin/env bash
# Re-train the embedded default planner from scratch with this project's own commands:
# generate the Pace dataset, train, calibrate, test, and write the planner directory that
# `plansmith` embeds (crates/plansmith-planner/default/). Deterministic per seed.
#
#   scripts/train-default.sh [SEED]        # ~30 minutes on 2 cores (4 + 10 epochs)
#
# Then rebuild (`cargo build --release`) so the binary embeds the new planner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-0}"
data="target/default-planner-data"
cargo build --release -p plansmith
bin=target/release/plansmith
"$bin" data pace --out "$data" --seed "$seed"
splits=(--data "$data/train.jsonl" --calibration "$data/calibration.jsonl" --test "$data/test.jsonl"
        --tools examples/pace/tools.json --batch-size 16 --block 256)
# One compute thread: on a 2-core machine it is as fast as two and immune to contention.
# Stage 1: 4 epochs from scratch at lr 3e-3; stage 2: 10 more epochs at lr 2e-3 (a fresh
# warm-up + cosine schedule) from stage 1's weights — the recipe the shipped planner used.
"$bin" --threads 1 train "${splits[@]}" --out target/default-planner-stage1 \
  --epochs 4 --lr 3e-3 --d-model 96 --layers 3 --heads 4 --pos rope --seed "$seed"
"$bin" --threads 1 train "${splits[@]}" --init target/default-planner-stage1 \
  --out crates/plansmith-planner/default --epochs 10 --lr 2e-3 --seed "$((seed + 1))"
"$bin" eval traces --planner crates/plansmith-planner/default --data "$data/test.jsonl" --free \
  --out target/default-planner-report
