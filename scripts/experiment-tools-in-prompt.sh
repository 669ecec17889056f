#!/usr/bin/env bash
# The held-out-verb experiment behind issue #10: the default planner's recipe
# (scripts/train-default.sh; by default as it was before 512 pieces and wide spelling, runs
# F-L in README; `WIDE=1 TAG=v512 ... 2 200000 wait -- --no-descriptions --vocab 512` is the
# current recipe, run M), with one Pace verb held out of training (its requests, every
# other request that says its name, and its tool: training sees a catalog without it). Measures
#   1. the Pace test split (catalog in the prompt),
#   2. the same requests against renamed / shuffled / distractor catalogs,
#   3. the held-out verb, given only its schema in the full catalog.
#
#   scripts/experiment-tools-in-prompt.sh [SEED] [N] [VERB] [-- TRAIN FLAGS]
#   # defaults: 2 200000 wait -- --no-descriptions (~35 minutes, 8 GB of memory)
#   # `-- ` alone puts descriptions in the prompt (a line per tool; ~3x slower to train)
#   SWAPPED=40000 scripts/experiment-tools-in-prompt.sh   # adds `data augment --swapped 40000`
#   WIDE=1 scripts/experiment-tools-in-prompt.sh          # adds `--novel-wide-spelling`
#   DURATIONS=1 scripts/experiment-tools-in-prompt.sh     # adds `--novel-durations`
#   DROPOUT=0.1 scripts/experiment-tools-in-prompt.sh     # adds `train --piece-dropout 0.1`
#   PASSES=2 scripts/experiment-tools-in-prompt.sh        # then a second pass on fresh data, as
#                                                         # scripts/train-default.sh does
#   POINTERS=1 scripts/experiment-tools-in-prompt.sh      # adds `train --tool-pointers` (tools
#                                                         # called by their place in the catalog)
# Last, the rename diagnostic (README, "Why `wait` gets nothing"): the held-out requests that
# say the verb, with the word and its tool renamed (scripts/rename-verb.py).
#   TAG=d128 scripts/experiment-tools-in-prompt.sh 2 200000 wait -- --no-descriptions --d-model 128
#                                                         # other train flags: name the run
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-2}"
n="${2:-200000}"
verb="${3:-wait}"
shift $(($# < 3 ? $# : 3))
if [ "${1:-}" = "--" ]; then shift; else set -- --no-descriptions; fi
described=yes
case " $* " in *" --no-descriptions "*) described= ;; esac
# Invented tools whose descriptions list alternative verbs, for a planner that reads them.
alternatives=
[ -z "$described" ] || alternatives=--novel-alternatives
swapped="${SWAPPED:-0}"
out="target/tools-in-prompt-$verb-$n-$seed"
[ "$swapped" = 0 ] || out="$out-swapped-$swapped"
[ -z "${WIDE:-}" ] || { out="$out-wide"; alternatives="$alternatives --novel-wide-spelling"; }
[ -z "${DURATIONS:-}" ] || { out="$out-durations"; alternatives="$alternatives --novel-durations"; }
dropout="${DROPOUT:-0}"
block="${BLOCK:-640}"   # dropout lengthens examples: described runs with it want ~768
[ "$dropout" = 0 ] || out="$out-dropout-$dropout"
[ -z "$described" ] || out="$out-described"
[ -z "${TAG:-}" ] || out="$out-$TAG"
[ -z "${POINTERS:-}" ] || { out="$out-pointers"; set -- "$@" --tool-pointers; }
tools=examples/pace/tools.json
cargo build --release -p plansmith
bin="${CARGO_TARGET_DIR:-target}/release/plansmith"
mkdir -p "$out"
# The catalog training sees: Pace without the held-out verb's tool.
python3 - "$tools" "$verb" "$out/tools-train.json" <<'EOF'
import json, sys
tools = [t for t in json.load(open(sys.argv[1])) if t.get("function", t)["name"] != sys.argv[2]]
json.dump(tools, open(sys.argv[3], "w"), indent=1)
EOF
"$bin" data pace --out "$out/data" --seed "$seed" --n "$n" --holdout-verb "$verb" --upper-train 0.15
head -n 130000 "$out/data/train.jsonl" > "$out/train-130k.jsonl"
"$bin" data augment --data "$out/train-130k.jsonl" --tools "$out/tools-train.json" \
  --out "$out/train-aug.jsonl" --copies 1 --synthetic 25000 --novel 80000 --seed "$seed" --swapped "$swapped" $alternatives
cat "$out/train-aug.jsonl" "$out/data/train.jsonl" > "$out/train-mix.jsonl"
head -n 3000 "$out/data/calibration.jsonl" > "$out/calibration-3k.jsonl"
head -n 2000 "$out/data/test.jsonl" > "$out/test-2k.jsonl"
# The held-out requests are planned against the full catalog (their own `tools`).
python3 - "$tools" "$out/data/heldout_verb.jsonl" "$out/heldout-500.jsonl" <<'EOF'
import json, sys
tools = json.load(open(sys.argv[1]))
with open(sys.argv[3], "w") as out:
    for i, line in enumerate(open(sys.argv[2])):
        if i == 500:
            break
        trace = json.loads(line)
        trace["tools"] = tools
        out.write(json.dumps(trace) + "\n")
EOF
"$bin" data augment --data "$out/test-2k.jsonl" --tools "$tools" --out "$out/test-2k-changed.jsonl" \
  --copies 1 --seed 7
# Described catalogs of synthetic families run to ~560 tokens: block 640
if [ ! -f "$out/planner/planner.json" ]; then
  "$bin" --threads 1 train --data "$out/train-mix.jsonl" --calibration "$out/calibration-3k.jsonl" \
    --test "$out/test-2k.jsonl" --tools "$out/tools-train.json" --tools-in-prompt --out "$out/planner" \
    --epochs 1 --block "$block" --batch-size 32 --lr 3e-3 --confidence all --seed 0 \
    --piece-dropout "$dropout" "$@"
fi
planner="$out/planner"
if [ "${PASSES:-1}" = 2 ]; then
  seed2=$((seed + 100))
  "$bin" data pace --out "$out/data-p2" --seed "$seed2" --n "$n" --holdout-verb "$verb" --upper-train 0.15
  scripts/drop-seen.py "$out/data-p2/train.jsonl" "$out/data-p2/train-fresh.jsonl" \
    "$out/data/calibration.jsonl" "$out/data/test.jsonl" "$out/data/heldout_verb.jsonl"
  head -n 130000 "$out/data-p2/train-fresh.jsonl" > "$out/data-p2/train-130k.jsonl"
  "$bin" data augment --data "$out/data-p2/train-130k.jsonl" --tools "$out/tools-train.json" \
    --out "$out/data-p2/train-aug.jsonl" --copies 1 --synthetic 25000 --novel 80000 --seed "$seed2" \
    --swapped "$swapped" $alternatives
  cat "$out/data-p2/train-aug.jsonl" "$out/data-p2/train-fresh.jsonl" > "$out/data-p2/train-mix.jsonl"
  "$bin" --threads 1 train --data "$out/data-p2/train-mix.jsonl" --calibration "$out/calibration-3k.jsonl" \
    --test "$out/test-2k.jsonl" --tools "$out/tools-train.json" --tools-in-prompt --out "$out/planner-p2" \
    --init "$planner" --epochs 1 --lr 1e-3 --batch-size 32 --confidence all --seed 0 "$@"
  planner="$out/planner-p2"
fi
for split in test-2k test-2k-changed heldout-500; do
  echo "== $split"
  "$bin" --threads 1 eval traces --planner "$planner" --data "$out/$split.jsonl"
done
for name in "$verb" linger blorpen; do
  scripts/rename-verb.py "$out/heldout-500.jsonl" "$out/says-$verb-as-$name.jsonl" "$verb" "$name"
  echo "== says $verb, renamed $name"
  "$bin" --threads 1 eval traces --planner "$planner" --data "$out/says-$verb-as-$name.jsonl"
done
