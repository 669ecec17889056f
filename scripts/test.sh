#!/usr/bin/env bash
# The test command: fetch the PyPI-hosted model and data (cached under assets/), then run every
# test in the workspace. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/assets.sh
cargo test --workspace --locked "$@"
