#!/usr/bin/env python3
"""Golden files for the LoRA training step: loss and every LoRA gradient from PyTorch + PEFT.

Not part of CI (it needs torch, transformers and peft). For each of LlamaForCausalLM (tied
embeddings), Qwen2ForCausalLM (q/k/v biases, untied head) and Qwen3ForCausalLM (q/k norms) it
builds a tiny random checkpoint with visible spread in every weight, norm and bias, wraps it in a
PEFT LoRA adapter on all seven projections with random non-zero A and B, and writes to
crates/plansmith-llama/tests/fixtures/lora_golden/<arch>/:
  model/                     config.json + model.safetensors (f32)
  adapter/                   adapter_config.json + adapter_model.safetensors (PEFT layout)
  golden.json                the examples (token ids, prompt_len) and the loss of each case
  golden_grads.safetensors   the gradient of every lora_A / lora_B tensor, per case

Cases: `single` (one example) and `batch` (five examples of different lengths sharing a
30-token prompt prefix). The loss is the mean next-token cross-entropy over the reply tokens of
the whole batch (labels -100 on prompt tokens), each example run on its own (no padding). The
reference runs in float64, so the Rust f32 step is measured against the exact answer.

Usage: python3 scripts/lora_golden.py [--out crates/plansmith-llama/tests/fixtures/lora_golden]
"""
import argparse
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
VOCAB = 40


def common():
    return dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
                rope_theta=10000.0, max_position_embeddings=128, attn_implementation="eager",
                bos_token_id=1, eos_token_id=2)


def configs():
    yield "llama", LlamaConfig(**common(), tie_word_embeddings=True, attention_bias=False,
                               mlp_bias=False, architectures=["LlamaForCausalLM"])
    yield "qwen2", Qwen2Config(**common(), tie_word_embeddings=False,
                               architectures=["Qwen2ForCausalLM"])
    yield "qwen3", Qwen3Config(**common(), tie_word_embeddings=True, attention_bias=False,
                               architectures=["Qwen3ForCausalLM"])


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)


def lcg_tokens(seed, n):
    out, s = [], seed
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(3 + (s >> 33) % (VOCAB - 3))
    return out


def examples():
    single = lcg_tokens(3, 50)
    prefix = lcg_tokens(1, 30)
    batch = []
    for i in range(5):
        prompt = prefix + lcg_tokens(100 + i, 6 + i)
        batch.append({"tokens": prompt + lcg_tokens(200 + i, 3 + 2 * i), "prompt_len": len(prompt)})
    return {"single": [{"tokens": single, "prompt_len": 31}], "batch": batch}


def loss_and_grads(peft_model, batch):
    peft_model.zero_grad()
    total = sum(len(e["tokens"]) - e["prompt_len"] for e in batch)
    loss_sum = 0.0
    for e in batch:
        ids = torch.tensor([e["tokens"]])
        logits = peft_model(input_ids=ids).logits[0, :-1].double()
        target = ids[0, 1:]
        ce = torch.nn.functional.cross_entropy(logits, target, reduction="none")
        mask = torch.arange(len(target)) >= e["prompt_len"] - 1
        s = ce[mask].sum()
        (s / total).backward()
        loss_sum += s.item()
    grads = {}
    for name, p in peft_model.named_parameters():
        if "lora_" in name:
            key = name.replace(".default", "")
            grads[key] = p.grad.detach().float().contiguous()
    return loss_sum / total, grads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="crates/plansmith-llama/tests/fixtures/lora_golden")
    args = ap.parse_args()
    ex = examples()
    for arch, cfg in configs():
        gen = torch.Generator().manual_seed(1234)
        root = os.path.join(args.out, arch)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        randomize(model, gen)
        model.save_pretrained(os.path.join(root, "model"), safe_serialization=True)
        lcfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS,
                          task_type="CAUSAL_LM", init_lora_weights=False)
        peft_model = get_peft_model(model, lcfg)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_" in name:
                    p.copy_(0.3 * torch.randn(p.shape, generator=gen))
        peft_model.save_pretrained(os.path.join(root, "adapter"))
        # PEFT writes a model-card template beside the adapter; it is not ours to commit
        for extra in ["README.md"]:
            path = os.path.join(root, "adapter", extra)
            if os.path.exists(path):
                os.remove(path)
        peft_model = peft_model.double()
        golden = {"torch": torch.__version__, "examples": ex, "loss": {}}
        tensors = {}
        for case, batch in ex.items():
            loss, grads = loss_and_grads(peft_model, batch)
            golden["loss"][case] = loss
            for k, v in grads.items():
                tensors[f"{case}/{k}"] = v
        save_file(tensors, os.path.join(root, "golden_grads.safetensors"))
        with open(os.path.join(root, "golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
        print(arch, {k: round(v, 6) for k, v in golden["loss"].items()})


if __name__ == "__main__":
    main()
