#!/usr/bin/env python3
"""Planner-latency peer for `plansmith bench plan`: mixle's `GenerativePlanner.__call__` on the same
Pace requests, in the same run, on one thread (issue #5: p50 `plan()` latency >= 20x faster).

What it does:
  1. Pace traces: `--data DIR` (train.jsonl + test.jsonl) or generated with `plansmith data pace`.
  2. Builds mixle ToolSpecs from examples/pace/tools.json. mixle argument names must be Python
     identifiers, so plansmith's flattened names map `.` -> `_` (`target.type` -> `target_type`,
     `choices.0` -> `choices_0`); the mapping is per tool and checked for collisions. mixle's
     constrained decoder can only emit string values (copied from the request or taken from an
     enum), so integers are written as their decimal text ("565", which the request contains).
  3. Trains a mixle `LM` of the default planner's shape (d_model, n_layer, n_head, block read from
     crates/plansmith-planner/default/planner.json; mixle's char codec and plan text) on the train
     traces for a few hundred steps -- by default with plansmith's training schedule written out
     here (`--trainer recipe`), or with mixle's own `LM.fit_pairs` (`--trainer mixle`, which barely
     learns in that budget) -- and wraps it in mixle's `GenerativePlanner` (constrained decoding, as
     mixle ships it; no confidence floor) with the gold test plans as its teacher.
  4. Times `planner(request)` per request on the first N test requests after warm-up; plan
     agreement = emitted without escalation and equal to the reference (tools, argument names and
     values), over the first `--agree-n` of them.
  5. Runs `plansmith --threads 1 bench plan --json --data <the same N requests>` (`--reps` times
     before and `--reps` times after the mixle timing; the run with the median p50 is reported) and `plansmith eval traces` for its agreement.

    OMP_NUM_THREADS=1 python3 bench/mixle_peer.py \
        [--plansmith PATH] [--data DIR] [--n 200] [--agree-n 100] [--epochs 5] \
        [--save-planner DIR | --load-planner DIR] [--json] [--out FILE]

Prints a markdown table and the ratio mixle p50 / plansmith p50 (`--json`: one JSON object).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def percentile(sorted_ms, p):
    """Same rule as `plansmith bench plan`: the sample at round((n-1)p)."""
    if not sorted_ms:
        return 0.0
    return sorted_ms[int(round((len(sorted_ms) - 1) * p))]


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def find_plansmith(explicit):
    cands = [explicit, os.environ.get("PLANSMITH"),
             os.path.join(ROOT, "target/release/plansmith")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("plansmith binary not found: pass --plansmith PATH (build with cargo build --release)")


def planner_shape(binary, planner_dir, planner_json, label):
    """d_model / n_layer / n_head / block of the planner plansmith will run: --planner DIR's
    planner.json, else the planner.json embedded in the binary (found by its text), else the
    checkout's default planner.json (which can differ from what an older binary embeds)."""
    import re

    keys = ("d_model", "n_layer", "n_head", "block")
    if planner_dir:
        with open(os.path.join(planner_dir, "planner.json")) as f:
            meta = json.load(f)
        return {k: meta["model"][k] for k in keys}, os.path.join(planner_dir, "planner.json")
    with open(binary, "rb") as f:
        blob = f.read()
    m = re.search(rb'"family": "tiny_gpt",\s*"model": (\{[^}]*\})', blob)
    if m:
        model = json.loads(m.group(1))
        return {k: model[k] for k in keys}, f"embedded in {label}"
    with open(planner_json) as f:
        meta = json.load(f)
    log(f"note: no planner found inside {binary}; shape from {planner_json}")
    return {k: meta["model"][k] for k in keys}, planner_json


# ---------------------------------------------------------------- catalog -> mixle tool specs

def flat_fields(schema, prefix, list_len):
    """(dotted name, enum values or None) for every scalar leaf of a JSON Schema object, plus the
    dotted names that are required (a required object makes its own required leaves required)."""
    fields, required = [], []
    props = schema.get("properties") or {}
    req = set(schema.get("required") or [])
    for name, sub in props.items():
        path = prefix + name
        kind = sub.get("type")
        if kind == "object" and sub.get("properties"):
            f, r = flat_fields(sub, path + ".", list_len)
            fields += f
            if name in req:
                required += r
        elif kind == "array":
            items = sub.get("items") or {}
            k = min(int(sub.get("maxItems", list_len)), list_len)
            for i in range(max(k, 1)):
                fields.append((f"{path}.{i}", items.get("enum")))
            if name in req and int(sub.get("minItems", 0)) > 0:
                required.append(f"{path}.0")
        else:
            fields.append((path, sub.get("enum")))
            if name in req:
                required.append(path)
    return fields, required


def mixle_name(dotted):
    return dotted.replace(".", "_")


def build_specs(catalog, list_len):
    """mixle ToolSpecs plus, per tool, the mixle-name -> dotted-name map used to compare plans."""
    from mixle.task.toolcall import ToolSpec

    specs, names = [], {}
    for entry in catalog:
        fn = entry.get("function", entry)
        fields, required = flat_fields(fn.get("parameters") or {}, "", list_len)
        to_dotted = {}
        for dotted, _ in fields:
            m = mixle_name(dotted)
            if m in to_dotted or not m.isidentifier():
                raise SystemExit(f"{fn['name']}: argument {dotted!r} has no unique identifier form ({m!r})")
            to_dotted[m] = dotted
        vocab = {mixle_name(d): [str(v) for v in enum] for d, enum in fields if enum}
        specs.append(ToolSpec(fn["name"], list(to_dotted), [mixle_name(d) for d in required], vocab or None))
        names[fn["name"]] = to_dotted
    return specs, names


def scalar_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else json.dumps(v)


def flatten_args(args, prefix=""):
    out = {}
    for k, v in args.items():
        path = prefix + k
        if isinstance(v, dict):
            out.update(flatten_args(v, path + "."))
        elif isinstance(v, list):
            out.update(flatten_args({str(i): x for i, x in enumerate(v)}, path + "."))
        else:
            out[path] = scalar_text(v)
    return out


def trace_plan_mixle(calls):
    """A trace's calls as a mixle plan: [{"tool", "args": {mixle_name: text}}], argument order kept."""
    return [{"tool": c["name"], "args": {mixle_name(k): v for k, v in flatten_args(c.get("arguments") or {}).items()}}
            for c in calls]


def canonical_trace(calls):
    return [(c["name"], tuple(sorted(flatten_args(c.get("arguments") or {}).items()))) for c in calls]


def canonical_mixle(plan, names):
    out = []
    for step in plan:
        m = names.get(step["tool"], {})
        out.append((step["tool"], tuple(sorted((m.get(k, k), scalar_text(v)) for k, v in step["args"].items()))))
    return out


# ---------------------------------------------------------------- mixle planner

def sft_steps(module, pairs, steps, batch, lr, seed, t0):
    """Prompt-masked SFT of mixle's CausalLM with the schedule plansmith trains its planner with:
    AdamW (betas 0.9/0.99, weight decay 0.01), 5% linear warm-up, cosine to 0.1 x lr, global-norm clip
    1.0, rows padded to the longest in the batch. Token and position embeddings start at N(0, 0.02):
    mixle's default N(0, 1) under a tied head starts near loss 20 and barely moves in a few hundred
    steps. Returns the mean loss of the last 50 steps."""
    import math

    import numpy as np
    import torch

    with torch.no_grad():
        module.tok.weight.normal_(0.0, 0.02)
        module.pos.weight.normal_(0.0, 0.02)
    opt = torch.optim.AdamW(module.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)
    rng = np.random.RandomState(seed)
    module.train()
    warm = max(1, int(0.05 * steps))
    recent = []
    for step in range(steps):
        idx = rng.randint(0, len(pairs), batch)
        rows = []
        for i in idx:  # over-long rows keep the completion and drop the oldest prompt characters
            prompt, completion = pairs[i]
            seq, mask = prompt + completion, [False] * len(prompt) + [True] * len(completion)
            rows.append((seq[-module.block:], mask[-module.block:]))
        length = max(len(seq) for seq, _ in rows)
        x = torch.zeros(batch, length, dtype=torch.long)
        keep = torch.zeros(batch, length, dtype=torch.bool)
        for row, (seq, mask) in enumerate(rows):
            x[row, : len(seq)] = torch.tensor(seq)
            keep[row, : len(seq)] = torch.tensor(mask)
        scale = min(1.0, (step + 1) / warm) * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        logits = module(x, return_all_logits=True)[:, :-1]
        target_mask = keep[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits[target_mask], x[:, 1:][target_mask])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        recent = (recent + [loss.item()])[-50:]
        if (step + 1) % 100 == 0 or step + 1 == steps:
            log(f"  step {step + 1}: loss {statistics.fmean(recent):.4f} ({time.perf_counter() - t0:.0f} s)")
    module.eval()
    return statistics.fmean(recent) if recent else None


def train_mixle(args, shape, train, specs):
    import numpy as np
    import torch
    from mixle.models import LM
    from mixle.task.sft_plan import _PROMPT_SEP, GenerativePlanner, _CharCodec, _serialize_plan
    from mixle.task.toolcall import _tool_spec_map

    spec_map = _tool_spec_map(specs, reserved=("done",))
    rng = np.random.RandomState(args.seed)
    rows = [train[i] for i in rng.permutation(len(train))[: args.train_n]]
    prompts = [r["request"] + _PROMPT_SEP for r in rows]
    completions = [_serialize_plan(trace_plan_mixle(r["calls"])) for r in rows]
    codec = _CharCodec([*prompts, *completions])
    pairs = [(codec.encode(p), codec.encode(c)) for p, c in zip(prompts, completions)]
    cfg = {"vocab": codec.vocab, "d_model": shape["d_model"], "n_layer": shape["n_layer"],
           "n_head": shape["n_head"], "block": shape["block"]}
    torch.manual_seed(args.seed)
    lm = LM(**cfg)
    n_params = sum(p.numel() for p in lm.module.parameters())
    t0 = time.perf_counter()
    if args.trainer == "mixle":
        steps = args.epochs * -(-len(pairs) // args.batch)
        log(f"mixle: LM.fit_pairs {cfg} ({n_params:,} params) on {len(pairs)} traces, "
            f"{args.epochs} epochs x batch {args.batch} = {steps} steps, one thread")
        losses = []
        lm.fit_pairs(pairs, epochs=args.epochs, batch_size=args.batch, lr=args.lr, seed=args.seed,
                     log=lambda e, loss: (losses.append(loss), log(f"  epoch {e + 1}: loss {loss:.4f} "
                                                                     f"({time.perf_counter() - t0:.0f} s)")))
        final = losses[-1] if losses else None
        recipe = {"trainer": "mixle LM.fit_pairs", "epochs": args.epochs}
    else:
        steps = args.steps
        log(f"mixle: training LM {cfg} ({n_params:,} params) on {len(pairs)} traces, "
            f"{steps} steps x batch {args.batch} (AdamW, warm-up, cosine, clip), one thread")
        final = sft_steps(lm.module, pairs, steps, args.batch, args.lr, args.seed, t0)
        recipe = {"trainer": "AdamW loop over mixle's CausalLM (plansmith's recipe)", "init_std": 0.02}
    train_s = time.perf_counter() - t0
    planner = GenerativePlanner(lm=lm, codec=codec, tools=spec_map, teacher=lambda r: [],
                                plan_agreement=float("nan"), max_new=shape["block"], constrained=True,
                                lm_config=cfg)
    info = {**recipe, "train_traces": len(pairs), "batch": args.batch, "steps": steps, "lr": args.lr,
            "final_loss": None if final is None else round(final, 4), "train_seconds": round(train_s, 1),
            "params": n_params, "vocab": codec.vocab}
    return planner, info


def load_mixle(path):
    from mixle.task.sft_plan import GenerativePlanner

    planner = GenerativePlanner.load(path, teacher=lambda r: [])
    with open(os.path.join(path, "mixle_peer.json")) as f:
        info = json.load(f)
    return planner, info


def time_mixle(planner, requests, gold, names, warmup, agree_n):
    import torch

    torch.set_num_threads(1)
    teacher_plans = {r: trace_plan_mixle(calls) for r, calls in gold.items()}
    planner.teacher = lambda r: teacher_plans.get(r, [])  # gold plans: escalation costs a dict lookup
    for r in requests[:warmup]:
        planner(r)
    from mixle.task.sft_plan import _serialize_plan

    ms, agree, tools_agree, escalated, emitted_chars, ref_chars = [], 0, 0, 0, [], []
    for i, r in enumerate(requests):
        t = time.perf_counter()
        out = planner(r)
        ms.append((time.perf_counter() - t) * 1e3)
        ref_chars.append(len(_serialize_plan(teacher_plans[r])))
        if not out["escalate"]:
            emitted_chars.append(len(_serialize_plan(out["plan"])))
        if i < agree_n:
            escalated += int(out["escalate"])
            if not out["escalate"] and canonical_mixle(out["plan"], names) == canonical_trace(gold[r]):
                agree += 1
            if not out["escalate"] and [s["tool"] for s in out["plan"]] == [c["name"] for c in gold[r]]:
                tools_agree += 1
    n_agree = min(agree_n, len(requests))
    return ms, {"agreement": agree / n_agree if n_agree else None,
                "escalation_rate": escalated / n_agree if n_agree else None, "agreement_n": n_agree,
                "tool_agreement": tools_agree / n_agree if n_agree else None,
                "mean_plan_chars": statistics.fmean(emitted_chars) if emitted_chars else 0.0,
                "mean_reference_chars": statistics.fmean(ref_chars)}


# ---------------------------------------------------------------- plansmith

def run_plansmith(binary, req_file, n, reps, agree_file, planner_dir):
    base = [binary, "--threads", "1"]
    extra = ["--planner", planner_dir] if planner_dir else []
    env = dict(os.environ, OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1")
    runs = []
    for _ in range(reps):
        out = subprocess.run(base + ["bench", "plan", "--json", "--data", req_file, "--n", str(n)] + extra,
                             check=True, capture_output=True, text=True, env=env).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    best = {"runs": runs}
    ev = subprocess.run(base + ["eval", "traces", "--json", "--data", agree_file] + extra,
                        check=True, capture_output=True, text=True, env=env).stdout
    ev = json.loads(ev.strip().splitlines()[-1])
    best["agreement"] = ev.get("agreement")
    best["escalation_rate"] = ev.get("escalation_rate")
    return best


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plansmith", default=None, help="plansmith binary (default: $PLANSMITH, "
                    "target/release/plansmith)")
    ap.add_argument("--planner", default=None, help="plansmith planner dir (default: the embedded one)")
    ap.add_argument("--planner-json", default=os.path.join(ROOT, "crates/plansmith-planner/default/planner.json"),
                    help="shape fallback when the binary's embedded planner cannot be read")
    ap.add_argument("--tools", default=os.path.join(ROOT, "examples/pace/tools.json"))
    ap.add_argument("--data", default=None, help="Pace dir with train.jsonl and test.jsonl (default: generate)")
    ap.add_argument("--pace-n", type=int, default=2000, help="traces to generate when --data is not given")
    ap.add_argument("--pace-seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=200, help="timed test requests")
    ap.add_argument("--agree-n", type=int, default=100, help="test requests scored for plan agreement")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3, help="plansmith bench plan runs before and after mixle (median p50 kept)")
    ap.add_argument("--train-n", type=int, default=2000)
    ap.add_argument("--trainer", choices=["recipe", "mixle"], default="recipe",
                    help="recipe: AdamW/warm-up/cosine/clip loop over mixle's CausalLM (default); "
                         "mixle: mixle's own LM.fit_pairs (Adam, constant lr; converges far slower)")
    ap.add_argument("--steps", type=int, default=600, help="optimizer steps (--trainer recipe)")
    ap.add_argument("--epochs", type=int, default=5, help="epochs (--trainer mixle)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list-len", type=int, default=4, help="array slots per array argument (choices.0..)")
    ap.add_argument("--save-planner", default=None, help="save the trained mixle planner here")
    ap.add_argument("--load-planner", default=None, help="skip training: load a --save-planner dir")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    import mixle

    import hashlib
    import shutil

    found = find_plansmith(args.plansmith)
    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="mixle_peer_")
    # Snapshot the binary: a shared build directory can be rebuilt under a long run.
    binary = os.path.join(tmp, "plansmith")
    shutil.copy2(found, binary)
    with open(binary, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    binary_info = {"path": found, "sha256_16": digest,
                   "mtime": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(os.path.getmtime(found)))}
    try:
        binary_info["checkout_head"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                                      capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    data = args.data
    if data is None:
        data = os.path.join(tmp, "pace")
        subprocess.run([binary, "--threads", "1", "data", "pace", "--out", data, "--n", str(args.pace_n),
                        "--seed", str(args.pace_seed)], check=True, capture_output=True)
    test = read_jsonl(os.path.join(data, "test.jsonl"))
    seen, rows = set(), []
    for t in test:  # one timing per distinct request (the teacher is keyed by request)
        if t["request"] not in seen:
            seen.add(t["request"])
            rows.append(t)
    rows = rows[: args.n]
    if len(rows) < args.n:
        log(f"note: only {len(rows)} distinct test requests available")
    requests = [t["request"] for t in rows]
    gold = {t["request"]: t["calls"] for t in rows}
    req_file = os.path.join(tmp, "requests.jsonl")
    agree_file = os.path.join(tmp, "agree.jsonl")
    with open(req_file, "w") as f:
        f.writelines(json.dumps(t) + "\n" for t in rows)
    with open(agree_file, "w") as f:
        f.writelines(json.dumps(t) + "\n" for t in rows[: args.agree_n])

    shape, shape_from = planner_shape(binary, args.planner, args.planner_json, found)
    log(f"planner shape {shape} ({shape_from})")
    with open(args.tools) as f:
        catalog = json.load(f)
    specs, names = build_specs(catalog, args.list_len)

    if args.load_planner:
        planner, info = load_mixle(args.load_planner)
        got = {k: planner.lm_config.get(k) for k in shape}
        if got != shape:
            log(f"WARNING: loaded mixle planner has shape {got}, plansmith's planner {shape}: retrain")
    else:
        train = read_jsonl(os.path.join(data, "train.jsonl"))
        planner, info = train_mixle(args, shape, train, specs)
        if args.save_planner:
            planner.save(args.save_planner)
            with open(os.path.join(args.save_planner, "mixle_peer.json"), "w") as f:
                json.dump(info, f, indent=2)

    log(f"plansmith: bench plan on {len(requests)} requests x {args.reps}, before and after mixle")
    before = run_plansmith(binary, req_file, len(requests), args.reps, agree_file, args.planner)
    log(f"mixle: timing GenerativePlanner.__call__ on {len(requests)} requests (warm-up {args.warmup})")
    ms, quality = time_mixle(planner, requests, gold, names, args.warmup, args.agree_n)
    after = run_plansmith(binary, req_file, len(requests), args.reps, agree_file, args.planner)
    runs = sorted(before["runs"] + after["runs"], key=lambda r: r["p50_ms"])
    ours = dict(runs[(len(runs) - 1) // 2], agreement=before["agreement"],
                escalation_rate=before["escalation_rate"],
                p50_ms_runs={"before": [round(r["p50_ms"], 3) for r in before["runs"]],
                             "after": [round(r["p50_ms"], 3) for r in after["runs"]]})
    s = sorted(ms)
    load_after = os.getloadavg()

    mix = {"system": f"mixle {getattr(mixle, '__version__', '?')} GenerativePlanner.__call__ "
                     f"(torch {torch.__version__})",
           "requests": len(s), "p50_ms": percentile(s, 0.5), "p90_ms": percentile(s, 0.9),
           "p99_ms": percentile(s, 0.99), "mean_ms": statistics.fmean(s), **quality, "train": info}
    ours_row = {"system": "plansmith bench plan" + (f" --planner {args.planner}" if args.planner else
                                                    " (embedded default planner)"),
                "requests": ours["requests"], "p50_ms": ours["p50_ms"], "p90_ms": ours["p90_ms"],
                "p99_ms": ours["p99_ms"], "mean_ms": 1e3 / ours["plans_per_sec"],
                "p50_ms_runs": ours["p50_ms_runs"], "agreement": ours["agreement"],
                "escalation_rate": ours["escalation_rate"], "agreement_n": min(args.agree_n, len(rows))}
    report = {
        "requests": len(requests), "threads": 1, "data": data if args.data else
        f"plansmith data pace --n {args.pace_n} --seed {args.pace_seed} (test split)",
        "plansmith_binary": binary_info, "model_shape": shape, "model_shape_from": shape_from,
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
        "plansmith": ours_row, "mixle": mix,
        "ratio_p50": mix["p50_ms"] / ours["p50_ms"], "ratio_p90": mix["p90_ms"] / ours["p90_ms"],
        "target_ratio": 20.0,
    }
    shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    if args.json:
        print(json.dumps(report, indent=2))
        return

    def pct(x):
        return "—" if x is None else f"{x:.2f}"

    print(f"Pace, {len(requests)} test requests, one thread; load average "
          f"{report['loadavg_before'][0]} -> {report['loadavg_after'][0]}\n")
    print("| system | p50 ms | p90 ms | mean ms | agreement | escalated |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in (ours_row, mix):
        print(f"| {row['system']} | {row['p50_ms']:.2f} | {row['p90_ms']:.2f} | {row['mean_ms']:.2f} | "
              f"{pct(row['agreement'])} (n={row['agreement_n']}) | {pct(row['escalation_rate'])} |")
    print(f"\nmixle p50 / plansmith p50 = **{report['ratio_p50']:.1f}x** (target >= 20x); "
          f"p90 ratio {report['ratio_p90']:.1f}x")
    print(f"mixle planner: {info['params']:,} params, vocab {info['vocab']}, {info['trainer']}, "
          f"{info['steps']} steps x batch {info['batch']} on {info['train_traces']} traces, "
          f"final loss {info['final_loss']}; right tools on {mix['tool_agreement']:.2f}; mean plan length emitted {mix['mean_plan_chars']:.1f} chars "
          f"vs reference {mix['mean_reference_chars']:.1f}")


if __name__ == "__main__":
    main()
