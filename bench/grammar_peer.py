#!/usr/bin/env python3
"""Peer benchmark for `plansmith bench grammar`: the same envelope JSON Schema, the same
Qwen 151k vocabulary and the same output tokens, through the `xgrammar` Python package.

Inputs are written by the Rust side:
    cargo run --release -p plansmith-grammar --features bench --example bench_grammar -- 20 target/bench-grammar \
        | tail -n 1 > target/bench-grammar/ours.json
    python bench/grammar_peer.py --peer-dir target/bench-grammar --ours target/bench-grammar/ours.json

Setup: `pip install --no-deps xgrammar apache-tvm-ffi numpy pydantic typing-extensions`
(in a venv). xgrammar imports torch / transformers / triton at module level but the CPU
paths used here (compile a JSON schema, fill a bitmask into a numpy int32 array, accept a
token) do not need them; when they are missing, inert stand-in modules are registered so
the import succeeds, and the report says so (`stubbed`). Nothing else is changed.

Metrics (microseconds), as on the Rust side:
  cold_compile_us  compile with caching disabled + matcher + first mask (median)
  cache_hit_us     compile through a warm compiler cache + matcher + first mask (median)
  mask_p50_us / mask_p99_us / mask_mean_us  per-token `fill_next_token_bitmask` while
                   forcing the output tokens (the first mask excluded, as on the Rust side)
xgrammar has no copy-from-request lexeme: the `pace+copy` scenario runs the plain schema.
"""

import argparse
import base64
import json
import os
import sys
import time
import types

STUBBED = []


def _stub(modname):
    try:
        __import__(modname)
        return
    except ImportError:
        pass

    class _Meta(type):
        def __getattr__(cls, n):
            if n.startswith("__"):
                raise AttributeError(n)
            return _Any

    class _Any(metaclass=_Meta):
        def __init__(self, *a, **k):
            pass

        def __bool__(self):
            return False

        def __call__(self, *a, **k):
            return _Any()

        def __getattr__(self, n):
            return _Any()

    m = types.ModuleType(modname)

    def _ga(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any

    m.__getattr__ = _ga
    m.__path__ = []
    sys.modules[modname] = m
    STUBBED.append(modname)


for _m in ("torch", "transformers", "triton"):
    _stub(_m)

import numpy as np  # noqa: E402
import xgrammar as xgr  # noqa: E402

QWEN_SPECIALS = [("<|endoftext|>", 151643), ("<|im_start|>", 151644), ("<|im_end|>", 151645)]
QWEN_EOS = 151643
QWEN_LOGITS = 151936


def load_tiktoken(path):
    vocab = []
    with open(path, "rb") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            b64, rank = line.split()
            rank = int(rank)
            if len(vocab) <= rank:
                vocab.extend([b""] * (rank + 1 - len(vocab)))
            vocab[rank] = base64.b64decode(b64)
    for text, tid in QWEN_SPECIALS:
        if len(vocab) <= tid:
            vocab.extend([b""] * (tid + 1 - len(vocab)))
        vocab[tid] = text.encode()
    return vocab


def _version():
    try:
        from importlib.metadata import version

        return version("xgrammar")
    except Exception:  # noqa: BLE001
        return "?"


def pct(sorted_xs, p):
    i = round((len(sorted_xs) - 1) * p)
    return sorted_xs[min(i, len(sorted_xs) - 1)]


def median(xs):
    return sorted(xs)[len(xs) // 2]


def run_scenario(info, sc, repeats):
    schema = json.dumps(sc["schema"])
    tokens = sc["tokens"]
    words = (QWEN_LOGITS + 31) // 32
    bitmask = np.zeros((1, words), dtype=np.int32)

    def first_mask(cg):
        m = xgr.GrammarMatcher(cg)
        m.fill_next_token_bitmask(bitmask)
        return m

    cold = []
    for _ in range(repeats):
        compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        t = time.perf_counter()
        cg = compiler.compile_json_schema(schema, any_whitespace=True)
        first_mask(cg)
        cold.append((time.perf_counter() - t) * 1e6)

    compiler = xgr.GrammarCompiler(info, cache_enabled=True)
    compiler.compile_json_schema(schema, any_whitespace=True)
    hit, masks = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        cg = compiler.compile_json_schema(schema, any_whitespace=True)
        m = first_mask(cg)
        hit.append((time.perf_counter() - t) * 1e6)
        assert m.accept_token(tokens[0]), "first token refused"
        for tok in tokens[1:]:
            t = time.perf_counter()
            m.fill_next_token_bitmask(bitmask)
            masks.append((time.perf_counter() - t) * 1e6)
            word = int(bitmask[0, tok // 32]) & 0xFFFFFFFF
            assert (word >> (tok % 32)) & 1, f"token {tok} refused"
            assert m.accept_token(tok), f"token {tok} not accepted"
    masks.sort()
    return {
        "scenario": sc["scenario"],
        "cold_compile_us": median(cold),
        "cache_hit_us": median(hit),
        "mask_p50_us": pct(masks, 0.5),
        "mask_p99_us": pct(masks, 0.99),
        "mask_mean_us": sum(masks) / len(masks),
        "tokens": len(tokens),
        "note": "copy spans not expressible; plain schema" if sc.get("copy_policy") else "",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-dir", default="target/bench-grammar")
    ap.add_argument("--tiktoken", default="assets/qwen.tiktoken")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--ours", help="the Rust report (JSON) to compute ratios against")
    args = ap.parse_args()

    t = time.perf_counter()
    vocab = load_tiktoken(args.tiktoken)
    info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, vocab_size=QWEN_LOGITS, stop_token_ids=[QWEN_EOS])
    setup_ms = (time.perf_counter() - t) * 1e3

    rows = []
    for name in ("pace", "pace+copy", "tools100"):
        path = os.path.join(args.peer_dir, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            rows.append(run_scenario(info, json.load(f), args.repeats))
    report = {
        "engine": f"xgrammar {_version()} (Python)",
        "stubbed": STUBBED,
        "tokenizer_setup_ms": setup_ms,
        "rows": rows,
    }
    if args.ours:
        with open(args.ours) as f:
            ours = {r["scenario"]: r for r in json.load(f)["rows"]}
        for r in rows:
            o = ours.get(r["scenario"])
            if o:
                r["ratio_peer_over_ours"] = {
                    k: (r[k] / o[k] if o[k] else None)
                    for k in ("cold_compile_us", "cache_hit_us", "mask_p50_us", "mask_p99_us", "mask_mean_us")
                }
    print(f"{report['engine']} (stubbed: {', '.join(STUBBED) or 'none'}), tokenizer setup {setup_ms:.1f} ms")
    print(f"{'scenario':<10} {'cold (ms)':>10} {'hit (us)':>10} {'mask p50':>9} {'mask p99':>9} {'mean':>8}   ratios peer/ours (cold, hit, p50, p99)")
    for r in rows:
        rt = r.get("ratio_peer_over_ours", {})
        ratios = ", ".join(f"{rt[k]:.2f}" if rt.get(k) else "-" for k in ("cold_compile_us", "cache_hit_us", "mask_p50_us", "mask_p99_us"))
        print(
            f"{r['scenario']:<10} {r['cold_compile_us'] / 1e3:>10.2f} {r['cache_hit_us']:>10.1f} "
            f"{r['mask_p50_us']:>9.1f} {r['mask_p99_us']:>9.1f} {r['mask_mean_us']:>8.1f}   {ratios}"
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
