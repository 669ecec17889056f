#!/usr/bin/env python3
"""Cross-check plansmith-llama's Hugging Face loader against `transformers` (CPU torch).

Not part of CI. For each of LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM it:
  1. trains a small byte-level BPE tokenizer with `tokenizers` (Llama-3 split regex for Llama,
     Qwen2 regex for Qwen2, digits + GPT-2 ByteLevel for Qwen3) and saves it with
     `PreTrainedTokenizerFast.save_pretrained`;
  2. builds a tiny random model (weights, norms and biases drawn with a visible spread), saves
     it with `save_pretrained` (Llama f32, Qwen2 bf16 sharded, Qwen3 f16, explicit head_dim);
  3. runs `hf_logits` (crates/plansmith-llama/examples/hf_logits.rs) on the directory and
     compares token ids on a text corpus and logits at every position against transformers
     (reference model loaded back from the same files as float32, eager attention).
With --gguf it also exports SmolLM2 through `hf_logits export` and checks that `tokenizers`
reads our tokenizer.json to the same ids and `transformers` reads our checkpoint to the same
logits as our dense (dequantized) model.

Usage: python3 scripts/hf_crosscheck.py [--bin PATH] [--gguf PATH]
       [--out crates/plansmith-llama/results/hf_crosscheck.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TRAIN_TEXT = [
    "set a timer for five minutes and remind me to call mom",
    "turn on the living room lights at 7:30 pm",
    "What's the weather like in Zürich tomorrow? It'll rain, they're saying.",
    "play some jazz, volume 40%, then open the calendar for 2024-06-01",
    "def plan(request):\n    return [call for call in tools if call.matches(request)]\n",
    '{"name": "set_timer", "arguments": {"minutes": 5, "label": "tea"}}',
    "日本語のテキスト、中文文本和한국어 텍스트 😀🚀",
    "I'm sure we've seen THEY'RE and DON'T before, haven't we?",
] * 20

CORPUS = [
    "Hello world",
    "set a timer for 25 minutes and call Mom at 18:30",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\n\n\n  indented\r\nCRLF line",
    "non-breaking\u00a0space and\u2003em space",
    "I'M sure they've DON'T it's we'll",
    "naïve café résumé — “quotes” … Zürich",
    "日本語のテキストと中文 한국어",
    "emoji 👩‍👩‍👧‍👦 🇫🇷 🤖!",
    "numbers 1234567890 3.14159 -42 1e-5",
    "<|im_start|>user\nturn on the lights<|im_end|>\n<|im_start|>assistant\n",
    '{"name": "set", "arguments": {"device": "lamp", "on": true}}',
    "fn main() { println!(\"{}\", x.len()); }  // code\n\n\n    x",
    "!!!??? ... --- *** ### (parenthesised) [brackets]",
]

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tokenizer(kind, out_dir):
    tok = Tokenizer(models.BPE())
    if kind == "llama3":
        pre = [pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    elif kind == "qwen2":
        pre = [pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    else:  # SmolLM style
        pre = [pre_tokenizers.Digits(individual_digits=True),
               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TRAIN_TEXT, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                   eos_token="<|im_end|>")
    fast.chat_template = CHATML
    fast.save_pretrained(out_dir)
    return fast


def build_model(arch, vocab, out_dir, seed):
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=2)
    if arch == "llama":
        cfg = transformers.LlamaConfig(rope_theta=10000.0, tie_word_embeddings=False, **common)
        cls, dtype, shard = transformers.LlamaForCausalLM, torch.float32, None
    elif arch == "qwen2":
        cfg = transformers.Qwen2Config(rope_theta=1000000.0, tie_word_embeddings=True, **common)
        cls, dtype, shard = transformers.Qwen2ForCausalLM, torch.bfloat16, "40KB"
    else:
        cfg = transformers.Qwen3Config(rope_theta=1000000.0, tie_word_embeddings=True,
                                       head_dim=32, **common)
        cls, dtype, shard = transformers.Qwen3ForCausalLM, torch.float16, None
    model = cls(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
            elif "embed" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5 * 1.5)
    model = model.to(dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(out_dir, safe_serialization=True, **kwargs)


def hf_reference(model_dir, id_lists):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    out = []
    with torch.no_grad():
        for ids in id_lists:
            out.append(model(torch.tensor([ids])).logits[0].float())
    return out


def ours(binary, cmd, model, requests):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(requests, f)
        path = f.name
    try:
        res = subprocess.run([binary, cmd, model, path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if res.returncode != 0:
        sys.exit(f"hf_logits failed on {model}: {res.stderr.strip()}")
    return json.loads(res.stdout)


def compare(ref_logits, our_rows):
    max_diff, agree, total = 0.0, 0, 0
    for ref, rows in zip(ref_logits, our_rows):
        mine = torch.tensor(rows["logits"])
        max_diff = max(max_diff, (ref - mine).abs().max().item())
        agree += (ref.argmax(-1) == mine.argmax(-1)).sum().item()
        total += ref.shape[0]
    return max_diff, agree, total


def check_arch(binary, arch, kind, root, seed):
    d = os.path.join(root, arch)
    fast = build_tokenizer(kind, d)
    vocab = (len(fast) + 63) // 64 * 64
    build_model(arch, vocab, d, seed)
    # Token ids: our tokenizer.json reader vs `tokenizers`.
    want_ids = [fast(t, add_special_tokens=False)["input_ids"] for t in CORPUS]
    got = ours(binary, "logits", d, [{"text": t} for t in CORPUS])
    same = sum(1 for w, g in zip(want_ids, got) if w == g["ids"])
    for t, w, g in zip(CORPUS, want_ids, got):
        if w != g["ids"]:
            print(f"  [{arch}] token mismatch on {t!r}:\n    hf   {w}\n    ours {g['ids']}")
    ref = hf_reference(d, [g["ids"] for g in got])
    max_diff, agree, total = compare(ref, got)
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    return {
        "architecture": arch, "pre_tokenizer": kind,
        "weights": {"llama": "f32", "qwen2": "bf16", "qwen3": "f16"}[arch],
        "safetensors_files": len(files), "vocab": vocab,
        "texts_identical": same, "texts": len(CORPUS),
        "tokens": sum(len(w) for w in want_ids),
        "positions": total, "top1_agree": agree, "max_abs_diff": max_diff,
        "logit_std": float(torch.cat(ref).std()),
    }


def check_smollm_export(binary, gguf, root):
    d = os.path.join(root, "smollm2")
    res = subprocess.run([binary, "export", gguf, d], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"export failed: {res.stderr.strip()}")
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    got = ours(binary, "dense-logits", gguf, [{"text": t} for t in CORPUS[:4]])
    mine_ids = ours(binary, "logits", gguf, [{"text": t} for t in CORPUS])
    hf_ids = [tok.encode(t, add_special_tokens=False).ids for t in CORPUS]
    same = sum(1 for w, g in zip(hf_ids, mine_ids) if w == g["ids"])
    for t, w, g in zip(CORPUS, hf_ids, mine_ids):
        if w != g["ids"]:
            print(f"  [smollm2 export] token mismatch on {t!r}:\n    hf   {w}\n    ours {g['ids']}")
    ref = hf_reference(d, [g["ids"] for g in got])
    max_diff, agree, total = compare(ref, got)
    return {
        "architecture": "smollm2 export", "pre_tokenizer": "smollm", "weights": "f32",
        "safetensors_files": 1, "vocab": 49152,
        "texts_identical": same, "texts": len(CORPUS), "tokens": sum(len(w) for w in hf_ids),
        "positions": total, "top1_agree": agree, "max_abs_diff": max_diff,
        "logit_std": float(torch.cat(ref).std()),
    }


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    root_dir = os.path.dirname(here)
    ap.add_argument("--bin", help="hf_logits binary (built with cargo if absent)")
    ap.add_argument("--gguf", help="also check the SmolLM2 export (e.g. assets/smollm2.gguf)")
    ap.add_argument("--out", default=os.path.join(root_dir, "crates/plansmith-llama/results/hf_crosscheck.json"))
    args = ap.parse_args()
    binary = args.bin
    if not binary:
        subprocess.run(["cargo", "build", "--release", "-p", "plansmith-llama", "--example",
                        "hf_logits"], check=True, cwd=root_dir)
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root_dir, "target"))
        binary = os.path.join(target, "release", "examples", "hf_logits")
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for i, (arch, kind) in enumerate([("llama", "llama3"), ("qwen2", "qwen2"),
                                          ("qwen3", "smollm")]):
            rows.append(check_arch(binary, arch, kind, root, seed=i + 1))
        if args.gguf:
            rows.append(check_smollm_export(binary, args.gguf, root))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    print("| model | weights | pre-tokenizer | token ids identical | positions | top-1 agree | max abs diff | logit std |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['architecture']} | {r['weights']} ({r['safetensors_files']} file(s)) | "
              f"{r['pre_tokenizer']} | {r['texts_identical']}/{r['texts']} ({r['tokens']} tokens) | "
              f"{r['positions']} | {r['top1_agree']}/{r['positions']} | {r['max_abs_diff']:.2e} | "
              f"{r['logit_std']:.2f} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "rows": rows}, f, indent=1)
    bad = [r for r in rows if r["texts_identical"] != r["texts"]
           or r["top1_agree"] != r["positions"] or r["max_abs_diff"] > 1e-3]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
