#!/usr/bin/env python3
"""Golden file for the Gemma 3 forward: a tiny random Gemma3ForCausalLM and its logits.

Not part of CI (it needs torch, transformers and gguf); the results are committed and
`cargo test -p plansmith-llama --test gemma3` compares against them without Python.

The model is built by transformers from a tiny Gemma3TextConfig with every weight drawn at
random (norms too, so Gemma's `1 + w` scaling matters), in float64. Its tensors are saved as
llama.cpp's converter lays out Gemma 3 (GGUF tensor names, `1 + w` stored for every RMSNorm
weight, q/k rows in Hugging Face's rotate-half order, tied output head), in F32, as
tiny-f32.safetensors; the test writes the GGUF from them with the converter's metadata keys
(`--gguf-dir` writes the same file with gguf-py; no GGUF is committed). The sequence is longer than the sliding window, so local
and global layers differ; llama.cpp's fixed layout is used (every 6th layer global, local RoPE
base 10,000).

Usage: /path/to/venv/bin/python scripts/gemma3_golden.py
       [--out crates/plansmith-llama/tests/fixtures/gguf_golden/gemma3]
"""
import argparse
import json
import os

import gguf
import numpy as np
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "crates", "plansmith-llama", "tests", "fixtures", "gguf_golden",
                   "gemma3")
TOKENS = [2, 7, 3, 22, 15, 9, 31, 4, 4, 18, 27, 5, 39, 12, 0, 33, 8, 21, 2, 14, 26, 11, 30, 6,
          17, 35, 10, 24, 19, 38, 13, 29, 16, 3, 36, 25, 20, 37, 23, 28]


def config():
    return Gemma3TextConfig(
        vocab_size=48, hidden_size=32, intermediate_size=48, num_hidden_layers=6,
        num_attention_heads=2, num_key_value_heads=1, head_dim=24, query_pre_attn_scalar=24,
        max_position_embeddings=128, rms_norm_eps=1e-6, sliding_window=8,
        sliding_window_pattern=6, rope_theta=1_000_000.0, rope_local_base_freq=10_000.0,
        hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
        attn_logit_softcapping=None, tie_word_embeddings=True, attention_bias=False,
        pad_token_id=0, bos_token_id=2, eos_token_id=1)


def write_gguf(path, cfg, sd):
    """The GGUF llama.cpp's converter would write (`--gguf-dir`; never committed)."""
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_sliding_window(cfg.sliding_window)

    for name, a in gguf_tensors(cfg, sd).items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_tensors(cfg, sd):
    """GGUF tensor name -> f32 array, laid out as llama.cpp's converter lays out Gemma 3."""
    out = {}

    def put(name, t, norm=False):
        a = t.detach().to(torch.float64)
        if norm:
            a = a + 1.0  # the converter stores Gemma's (1 + w)
        out[name] = a.to(torch.float32).numpy()

    put("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        put(f"blk.{i}.attn_q.weight", sd[p + "self_attn.q_proj.weight"])
        put(f"blk.{i}.attn_k.weight", sd[p + "self_attn.k_proj.weight"])
        put(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        put(f"blk.{i}.attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"], True)
        put(f"blk.{i}.attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"], True)
        put(f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
        put(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"], True)
        put(f"blk.{i}.post_attention_norm.weight", sd[p + "post_attention_layernorm.weight"], True)
        put(f"blk.{i}.ffn_norm.weight", sd[p + "pre_feedforward_layernorm.weight"], True)
        put(f"blk.{i}.post_ffw_norm.weight", sd[p + "post_feedforward_layernorm.weight"], True)
    put("output_norm.weight", sd["model.norm.weight"], True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--gguf-dir", default=None,
                    help="also write the GGUF itself here (the test writes its own; never committed)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(2026)
    cfg = config()
    model = Gemma3ForCausalLM(cfg).to(torch.float64).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn_like(p) * 0.3)  # norm weights: 1 + w around 1
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    layer_types = list(model.config.layer_types)
    assert layer_types == ["sliding_attention"] * 5 + ["full_attention"], layer_types
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    # The reference rounds every weight to f32 first, as the GGUF stores it.
    model.load_state_dict({k: v.to(torch.float32).to(torch.float64) for k, v in sd.items()})
    with torch.no_grad():
        logits = model(torch.tensor([TOKENS])).logits[0]
    from safetensors.numpy import save_file
    save_file(gguf_tensors(cfg, sd), os.path.join(args.out, "tiny-f32.safetensors"))
    if args.gguf_dir:
        write_gguf(os.path.join(args.gguf_dir, "tiny-f32.gguf"), cfg, sd)
    golden = {"tokens": TOKENS, "logits": logits.tolist(), "layer_types": layer_types,
              "versions": {"torch": torch.__version__,
                           "transformers": __import__("transformers").__version__}}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
