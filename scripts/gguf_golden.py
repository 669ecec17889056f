#!/usr/bin/env python3
"""Golden files for GGUF loading: tiny models of each family, and every quantization type.

Not part of CI (it needs torch, transformers and gguf); the small results are committed and
`cargo test -p plansmith-llama --test gguf_families` compares against them without Python.

1. Families. For each of the tiny random Llama / Qwen2 / Qwen3 checkpoints already committed for
   the LoRA golden test (crates/plansmith-llama/tests/fixtures/lora_golden/<arch>/model), the
   test writes GGUF files the way llama.cpp's converter lays them out (tensor names, metadata
   keys, and for `llama` alone q/k rows permuted into the interleaved RoPE order; `qwen2` /
   `qwen3` keep Hugging Face's rotate-half order), in F32 and F16 (`--gguf-dir` writes the same
   files with gguf-py, to compare). Reference: transformers' logits in float64 on a fixed token
   sequence, from the f32 weights and from the matrices rounded to f16.
2. Quantization types. One [4, 256] tensor per type with random blocks (the scale fields set to
   finite, moderate f16 values, every other byte random) and gguf-py's own `dequantize` of it.
   Our dequantization must equal it bit for bit.

Everything lands in golden.json; no GGUF file is committed.

Usage: python3 scripts/gguf_golden.py [--out crates/plansmith-llama/tests/fixtures/gguf_golden]
"""
import argparse
import json
import os

import gguf
import numpy as np
import torch
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "crates", "plansmith-llama", "tests", "fixtures")
ARCHS = ["llama", "qwen2", "qwen3"]
TOKENS = [1, 7, 3, 22, 15, 9, 31, 4, 4, 18, 27, 5, 39, 12, 0, 33, 8, 21, 2, 14, 26, 11, 30, 6,
          17, 35, 10, 24, 19, 38, 13, 29, 16, 3, 36, 25, 20, 37, 23, 28]


def permute(w, n_head):
    """llama.cpp's converter permutation of q/k rows (rotate-half -> interleaved pairs)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def logits(model, dtype_round=None):
    m = model
    if dtype_round is not None:
        m = AutoModelForCausalLM.from_config(model.config).to(torch.float64)
        # The GGUF stores matrices in the narrow type and norms / biases in F32.
        m.load_state_dict({k: v.to(dtype_round).to(torch.float64) if v.ndim == 2 else v
                           for k, v in model.state_dict().items()})
    m.eval()
    with torch.no_grad():
        out = m(torch.tensor([TOKENS])).logits[0]
    return out.tolist()


def write_gguf(path, arch, cfg, sd, ftype):
    w = gguf.GGUFWriter(path, arch)
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)

    def put(name, t, quantizable=True):
        a = t.detach().to(torch.float32).numpy()
        if ftype == "f16" and quantizable and a.ndim == 2:
            a = a.astype(np.float16)
        w.add_tensor(name, a)

    put("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        q = sd[p + "self_attn.q_proj.weight"]
        k = sd[p + "self_attn.k_proj.weight"]
        if arch == "llama":
            q, k = permute(q, nh), permute(k, nkv)
        put(f"blk.{i}.attn_q.weight", q)
        put(f"blk.{i}.attn_k.weight", k)
        put(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
        put(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"], False)
        put(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"], False)
        if arch == "qwen2":
            for m in "qkv":
                put(f"blk.{i}.attn_{m}.bias", sd[p + f"self_attn.{m}_proj.bias"], False)
        if arch == "qwen3":
            put(f"blk.{i}.attn_q_norm.weight", sd[p + "self_attn.q_norm.weight"], False)
            put(f"blk.{i}.attn_k_norm.weight", sd[p + "self_attn.k_norm.weight"], False)
    put("output_norm.weight", sd["model.norm.weight"], False)
    if not cfg.tie_word_embeddings:
        put("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# (type, byte offsets of f16 scale fields within a block)
QUANTS = {
    "F16": None, "BF16": None,
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}


def random_blocks(rng, qtype, fields, n_values):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_values // block, size), dtype=np.uint8)
    for off in fields:
        scale = (rng.uniform(0.01, 0.5, size=raw.shape[0]) *
                 rng.choice([-1, 1], size=raw.shape[0])).astype(np.float16)
        raw[:, off:off + 2] = scale.view(np.uint8).reshape(-1, 2)
    return raw


def quants(rng):
    """Per type: the raw blocks (hex) of a [4, 256] tensor and gguf-py's dequantization of them
    (f32 bit patterns), so the test needs no GGUF file."""
    rows, cols = 4, 256
    out = {}
    for name, fields in QUANTS.items():
        qtype = gguf.GGMLQuantizationType[name]
        if fields is None:
            values = rng.normal(0, 1, size=(rows, cols)).astype(np.float32)
            raw = gguf.quants.quantize(values, qtype)
        else:
            raw = random_blocks(rng, qtype, fields, rows * cols).reshape(rows, -1)
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(rows, cols)
        out[name] = {"raw": np.ascontiguousarray(raw).view(np.uint8).tobytes().hex(),
                     "ref_bits": ref.view(np.uint32).reshape(-1).tolist()}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(FIXTURES, "gguf_golden"))
    ap.add_argument("--gguf-dir", default=None,
                    help="also write the GGUF files llama.cpp's converter would (to check the "
                         "test's own writer against; never committed)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    golden = {"tokens": TOKENS, "models": {}}
    for arch in ARCHS:
        src = os.path.join(FIXTURES, "lora_golden", arch, "model")
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float64)
        sd = model.state_dict()
        for ftype in ["f32", "f16"]:
            name = f"{arch}-{ftype}.gguf"
            if args.gguf_dir:
                write_gguf(os.path.join(args.gguf_dir, name), arch, model.config, sd, ftype)
            golden["models"][name] = {
                "arch": arch,
                "logits": logits(model, torch.float16 if ftype == "f16" else None),
            }
        print(f"{arch}: written")
    golden["quants"] = quants(np.random.default_rng(2026))
    golden["versions"] = {"torch": torch.__version__, "gguf": gguf.__version__
                          if hasattr(gguf, "__version__") else "unknown"}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
