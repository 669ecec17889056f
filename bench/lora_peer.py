#!/usr/bin/env python3
"""PyTorch + PEFT peer of `plansmith bench lora`: the same LoRA training step on the same model,
the same token ids and the same thread count, on CPU.

The model is read from the GGUF by transformers (dequantized to float32, like plansmith's
engine); LoRA r on all seven projections (q, k, v, o, gate, up, down), alpha 2r, dropout 0,
AdamW. A step runs each example on its own (no padding), loss on the reply tokens, gradients
accumulated, then one optimizer step: the usual padding-free way to train on CPU. Peak memory is
the process's maximum resident set size. With --bf16 each case runs a second time under
`torch.autocast("cpu", dtype=torch.bfloat16)` (bf16 products, f32 weights and optimizer: the
peer of plansmith's `--base-precision bf16`).

Usage: python3 bench/lora_peer.py --gguf assets/smollm2.gguf --cases cases.json
         --threads 2 --steps 2 --rank 16 --out peer.json
"""
import argparse
import json
import os
import resource
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bf16", action="store_true", help="also time each case under bf16 autocast")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    d, f = os.path.split(os.path.abspath(args.gguf))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.config.use_cache = False
    cfg = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, cfg)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    cases = json.load(open(args.cases))
    out = []
    runs = [(c, False) for c in cases] + ([(c, True) for c in cases] if args.bf16 else [])
    for case, bf16 in runs:
        batch = case["examples"]
        total = sum(len(e["tokens"]) - e["prompt_len"] for e in batch)

        def step():
            opt.zero_grad()
            for e in batch:
                ids = torch.tensor([e["tokens"]])
                labels = ids.clone()
                labels[0, : e["prompt_len"]] = -100
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = model(input_ids=ids).logits[0, :-1]
                    loss = torch.nn.functional.cross_entropy(logits.float(), labels[0, 1:],
                                                             ignore_index=-100, reduction="sum") / total
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        step()  # warm-up
        t = time.perf_counter()
        for _ in range(args.steps):
            step()
        s = (time.perf_counter() - t) / args.steps
        tokens = sum(len(e["tokens"]) for e in batch)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        precision = "bf16" if bf16 else "f32"
        row = {"case": case["case"], "examples": len(batch), "tokens_per_step": tokens, "shared": False,
               "seconds_per_step": s, "tokens_per_sec": tokens / s, "peak_rss_gb": rss / 1e9,
               "precision": precision}
        print(f"peft {row['case']} {precision} {s:.2f} s/step {row['tokens_per_sec']:.0f} tok/s", flush=True)
        out.append(row)
    json.dump(out, open(args.out, "w"))


if __name__ == "__main__":
    main()
