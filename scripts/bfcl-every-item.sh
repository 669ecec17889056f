#!/usr/bin/env bash
# BFCL v4, every item of the eight categories issue #27 names, one category per run so that a
# long evaluation (hours on 2 cores) can stop and go on: a category whose report exists is
# skipped. Reports: results/bfcl/<NAME>/<category>/report.{json,md}.
#
#   scripts/bfcl-every-item.sh NAME [plansmith eval bfcl options...]
#   scripts/bfcl-every-item.sh qwen05-tool_call-full --gguf assets/qwen05.gguf --reply-format tool_call
#   scripts/bfcl-every-item.sh qwen05-json-full --gguf assets/qwen05.gguf --reply-format json
#   scripts/bfcl-every-item.sh qwen05-free-full --gguf assets/qwen05.gguf --free
#   scripts/bfcl-every-item.sh smollm2-full --gguf assets/smollm2.gguf
#
# The binary is copied aside first, so builds during the run do not change what is measured.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name="${1:?usage: scripts/bfcl-every-item.sh NAME [eval bfcl options...]}"
shift
cargo build --release -p plansmith
bin="target/bfcl-bin-$$"
cp "${CARGO_TARGET_DIR:-target}/release/plansmith" "$bin"
trap 'rm -f "$bin"' EXIT
for category in simple_python multiple parallel parallel_multiple irrelevance \
    live_simple live_multiple live_irrelevance; do
  out="results/bfcl/$name/$category"
  if [[ -f "$out/report.json" ]]; then
    echo "bfcl: $category done already ($out)"
    continue
  fi
  echo "bfcl: $category -> $out ($(date -u +%FT%TZ))"
  "$bin" --threads "${THREADS:-2}" eval bfcl --categories "$category" --out "$out.tmp" "$@"
  rm -rf "$out"
  mv "$out.tmp" "$out"
done
