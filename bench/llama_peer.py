#!/usr/bin/env python3
"""llama.cpp peer for `llama_bench` (plansmith-llama): same cases, same token counts, same thread
count, measured with llama-cpp-python.

Usage: python3 bench/llama_peer.py [--gguf assets/smollm2.gguf] [--threads 2] [--reps 3]
       [--ours PATH-to-llama_bench] [--json out.json]
With --ours, runs our benchmark binary first and prints both tables and the ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PARA = ("The planner reads a request and a catalog of tools, then emits the calls that "
        "fulfil it. Tools live in the prompt, not in the weights: adding one is a line of "
        "JSON. Only verified plans leave; the rest escalate to a teacher. 12 timers, 3 "
        "lights, and 7 playlists were configured on 2024-06-01. ")
REQUEST = "<|im_start|>user\nset a timer for 5 minutes and play some jazz<|im_end|>\n<|im_start|>assistant\n"


def last_logits(llm):
    """Logits of the last evaluated token (llama-cpp-python only fills `scores` with logits_all)."""
    import numpy as np
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32).copy()


def synthetic(llm, n):
    text, ids = "", []
    while len(ids) < n:
        text += PARA
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
    return list(ids[:n])


def clear(llm):
    llm.reset()
    ctx = llm._ctx
    if hasattr(ctx, "memory_clear"):
        ctx.memory_clear(True)
    elif hasattr(ctx, "kv_cache_clear"):
        ctx.kv_cache_clear()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(root, "assets/smollm2.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ours", default=None, help="path to the llama_bench example binary")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    ours = None
    if args.ours:
        out_json = "/tmp/plansmith_llama_bench.json"
        r = subprocess.run([args.ours, args.gguf, "--threads", str(args.threads), "--reps", str(args.reps),
                            "--json", out_json], check=True, capture_output=True, text=True)
        print("plansmith-llama:\n" + r.stdout)
        ours = json.load(open(out_json))

    from llama_cpp import Llama
    import llama_cpp
    llm = Llama(model_path=args.gguf, n_ctx=4096, n_batch=512, n_ubatch=512, n_threads=args.threads,
                n_threads_batch=args.threads, verbose=False, logits_all=False)
    rows = []
    llm.eval(synthetic(llm, 32)); clear(llm)
    for n in (300, 1500):
        toks = synthetic(llm, n)
        ts = []
        for _ in range(args.reps):
            clear(llm)
            t = time.perf_counter(); llm.eval(toks); ts.append(time.perf_counter() - t)
        m = statistics.median(ts)
        rows.append({"case": f"prefill {n}", "tokens": n, "ms": m * 1e3, "tok_per_s": n / m})
    ctx = synthetic(llm, 300)
    ts = []
    for _ in range(args.reps):
        clear(llm); llm.eval(ctx)
        tok = int(last_logits(llm).argmax())
        t = time.perf_counter()
        for _ in range(64):
            llm.eval([tok]); tok = int(last_logits(llm).argmax())
        ts.append(time.perf_counter() - t)
    m = statistics.median(ts)
    rows.append({"case": "decode (ctx 300)", "tokens": 64, "ms": m * 1e3, "tok_per_s": 64 / m})
    prefix = synthetic(llm, 1500)
    req = list(llm.tokenize(REQUEST.encode(), add_bos=False, special=True))
    ts = []
    for _ in range(args.reps):
        clear(llm)
        t = time.perf_counter(); llm.eval(prefix + req); ts.append(time.perf_counter() - t)
    mu = statistics.median(ts)
    rows.append({"case": f"TTFT uncached ({len(prefix)}+{len(req)})", "tokens": len(prefix) + len(req), "ms": mu * 1e3, "tok_per_s": 0})
    # Cached: state saved after the prefix, restored per request (llama-cpp-python save_state/load_state).
    clear(llm); llm.eval(prefix); state = llm.save_state()
    ts = []
    for _ in range(args.reps):
        t = time.perf_counter(); llm.load_state(state); llm.eval(req); ts.append(time.perf_counter() - t)
    mc = statistics.median(ts)
    rows.append({"case": f"TTFT cached prefix ({len(prefix)}+{len(req)})", "tokens": len(req), "ms": mc * 1e3, "tok_per_s": 0})
    print(f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, {args.threads} threads):")
    print(f"{'case':<34} {'tokens':>7} {'ms':>10} {'tok/s':>9}")
    for r in rows:
        print(f"{r['case']:<34} {r['tokens']:>7} {r['ms']:>10.1f} {r['tok_per_s']:>9.1f}")
    print(f"TTFT cached/uncached: {mc / mu:.2%}")
    result = {"llama_cpp": rows, "llama_cpp_ttft_ratio": mc / mu}
    if ours:
        print("\nratios (ours / llama.cpp; tok/s rows: higher is better, TTFT rows: lower is better):")
        ratios = []
        for a, b in zip(ours["rows"], rows):
            if b["tok_per_s"]:
                rt = a["tok_per_s"] / b["tok_per_s"]
                print(f"  {a['case']:<34} {rt:6.2f}x throughput")
            else:
                rt = a["ms"] / b["ms"]
                print(f"  {a['case']:<34} {rt:6.2f}x time")
            ratios.append({"case": a["case"], "ratio": rt})
        print(f"  our TTFT cached/uncached: {ours['ttft_ratio']:.2%}")
        result.update({"ours": ours, "ratios": ratios})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
