#!/usr/bin/env bash
# Re-train the embedded default planner from scratch with this project's own commands:
# generate the Pace dataset, train, calibrate, test, and write the planner directory that
# `plansmith` embeds (crates/plansmith-planner/default/). Deterministic per seed.
#
#   scripts/train-default.sh [SEED]        # ~10 minutes on 2 cores
#
# Then rebuild (`cargo build --release`) so the binary embeds the new planner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-0}"
data="target/default-planner-data"
cargo build --release -p plansmith
bin=target/release/plansmith
"$bin" data pace --out "$data" --seed "$seed"
# One compute thread: on a 2-core machine it is as fast as two and immune to contention.
"$bin" --threads 1 train \
  --data "$data/train.jsonl" --calibration "$data/calibration.jsonl" --test "$data/test.jsonl" \
  --tools examples/pace/tools.json --out crates/plansmith-planner/default \
  --epochs 4 --batch-size 16 --block 256 --d-model 96 --layers 3 --heads 4 --pos rope \
  --seed "$seed"
"$bin" eval traces --planner crates/plansmith-planner/default --data "$data/test.jsonl" --free \
  --out target/default-planner-report
