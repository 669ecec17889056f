#!/usr/bin/env python3
"""PyTorch peer of `plansmith bench train` / `plansmith bench decode` (crates/plansmith-lm/src/bench.rs).

Same architecture (mixle's CausalLM: token + learned positions, pre-LN blocks, fused QKV, 4x GELU MLP,
tied head; d_model 96, 3 layers, 4 heads, block 192, vocab 64), same synthetic data shape (prompt 64 +
completion 32 random tokens, loss on completion tokens only), same batch size (32), same optimizer step
(AdamW + global-norm clip 1.0), torch.set_num_threads(2). Prints one JSON object.

Uses mixle's own `LM` module when the `mixle` package is importable, else an equivalent re-implementation.
Decode is measured the way mixle's `LM.generate` runs: no KV cache, the whole window recomputed per token.

    python bench/pytorch_tiny_gpt.py [--batch 32] [--steps 10] [--threads 2]

On a machine shared with other work, OpenMP's default spin-waiting makes 2 threads far slower than 1;
`OMP_WAIT_POLICY=PASSIVE` avoids that (the value is echoed in the output).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time


def build_module(torch, vocab, d_model, n_layer, n_head, block):
    try:
        from mixle.models.transformer import build_causal_lm  # mixle's own module

        return build_causal_lm(vocab, d_model, n_layer, n_head, block), "mixle"
    except Exception:  # mixle not installed: same architecture written out
        pass
    nn = torch.nn
    F = torch.nn.functional

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = n_head
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(x).reshape(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
            return self.proj(o.transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class CausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(block, d_model)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, x):
            t = x.shape[1]
            h = self.tok(x.long()) + self.pos(torch.arange(t, device=x.device))[None]
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln(h))[:, -1]

    return CausalLM(), "reimplementation"


def all_positions(module, x):
    """Next-token logits at every position (mixle's `_forward_all_positions`)."""
    import torch

    t = x.shape[1]
    h = module.tok(x.long()) + module.pos(torch.arange(t, device=x.device))[None, :, :]
    for blk in module.blocks:
        h = blk(h)
    return module.head(module.ln(h))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--completion-len", type=int, default=32)
    ap.add_argument("--decode-prompt", type=int, default=96)
    ap.add_argument("--decode-new", type=int, default=64)
    ap.add_argument("--pad-to-block", action="store_true", help="pad every row to the block, as mixle's fit_pairs does")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "torch is not installed"}))
        raise SystemExit(2)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab, d_model, n_layer, n_head, block = 64, 96, 3, 4, 192
    module, impl = build_module(torch, vocab, d_model, n_layer, n_head, block)
    module.train()
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)

    seq_len = args.prompt_len + args.completion_len
    width = block if args.pad_to_block else seq_len - 1
    g = torch.Generator().manual_seed(0)
    loss = float("nan")
    t0 = time.perf_counter()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            t0 = time.perf_counter()
        seq = torch.randint(2, vocab, (args.batch, seq_len), generator=g)
        x = torch.zeros((args.batch, width), dtype=torch.long)
        x[:, : seq_len - 1] = seq[:, :-1]
        tgt = seq[:, 1:]
        logits = all_positions(module, x)[:, : seq_len - 1]
        mask = torch.zeros((args.batch, seq_len - 1), dtype=torch.bool)
        mask[:, args.prompt_len - 1 :] = True
        lo = torch.nn.functional.cross_entropy(logits[mask], tgt[mask])
        opt.zero_grad()
        lo.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        loss = float(lo.detach())
    train_s = time.perf_counter() - t0
    chars = args.steps * args.batch * seq_len

    module.eval()
    prompt = torch.randint(2, vocab, (args.decode_prompt,), generator=g).tolist()
    extra = torch.randint(2, vocab, (args.decode_new,), generator=g).tolist()
    with torch.no_grad():
        module(torch.as_tensor([prompt]))  # warm-up
        w = list(prompt)
        t0 = time.perf_counter()
        for tok in extra:
            w.append(tok)
            logits = module(torch.as_tensor([w[-block:]]))[0]
            _ = logits.numpy()
        dec_s = time.perf_counter() - t0

    print(
        json.dumps(
            {
                "impl": impl,
                "torch": torch.__version__,
                "threads": args.threads,
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "params": sum(p.numel() for p in module.parameters()),
                "train": {
                    "batch_size": args.batch,
                    "seq_len": seq_len,
                    "padded_width": width,
                    "steps": args.steps,
                    "seconds": train_s,
                    "ms_per_step": train_s * 1e3 / args.steps,
                    "chars_per_sec": chars / train_s,
                    "final_loss": loss if math.isfinite(loss) else None,
                },
                "decode": {
                    "prompt_len": args.decode_prompt,
                    "new_tokens": args.decode_new,
                    "uncached_us_per_token": dec_s * 1e6 / args.decode_new,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
