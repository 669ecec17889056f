#!/usr/bin/env python3
"""Cross-check plansmith-llama against llama.cpp (llama-cpp-python) on SmolLM2 GGUF.

1. Tokenizer: token ids for a varied corpus (unicode, digits, whitespace runs, special tokens)
   must be identical.
2. Logits: next-token logits after >= 20 prompts: top-1 agreement, max / mean abs difference.

Usage: python3 scripts/llama_crosscheck.py [--gguf assets/smollm2.gguf] [--bin PATH]
       [--out crates/plansmith-llama/results/crosscheck.json] [--kv-f32]
The Rust side is `cargo run -p plansmith-llama --example llama_dump` (built if --bin is absent).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CORPUS = [
    "Hello world",
    "Hello  world   with   runs    of spaces",
    "  leading spaces and trailing spaces   ",
    "tabs\tand\t\ttabs\nnew\n\nlines\r\n\r\nwindows",
    "1234567890 3.14159 -42 1e10 0x1F 2024-06-01 12:30:45",
    "Phone: +1 (555) 123-4567, ZIP 94103, $1,234.56 or €99,99",
    "I'm can't won't they're we've you'll he'd She'S I'M",
    "naïve café résumé façade coöperate Zürich Ångström",
    "日本語のテキストと中文文本和한국어 텍스트",
    "Emoji: 😀👍🏽🚀 🇫🇷 family: 👨‍👩‍👧‍👦",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी",
    "<|im_start|>user\nset a timer for 5 minutes<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|><|im_start|>user\nhi<|im_end|>",
    "text<|endoftext|>more text<repo_name>x<file_sep>y",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    '{"name": "set_timer", "arguments": {"minutes": 5, "label": "tea"}}',
    '[{"name":"play","arguments":{"song":"Bohemian Rhapsody","volume":0.8}}]',
    "   \n   \n\n\n    x",
    "a\u00a0b\u2003c\u3000d\u200be",
    "!!!??? ... --- *** ### @@@ ~~~ ``` '''",
    "Numbers１２３ and ²³ ½ ⅓ Ⅻ ٣ ๓",
    "MiXeD CaSe WoRdS and ALLCAPS and lowercase",
    "https://example.com/path?query=1&x=y#frag user@example.org",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "The quick brown fox jumps over the lazy dog. " * 5,
    "",
    " ",
    "\n",
    "x" * 100,
    "1" * 50,
    "'s 're 've 'm 'll 'd 't",
    "Zero-width joiner\u200d and combining e\u0301 accents a\u0300",
]

SYSTEM_TOOLS = (
    "You are a function-calling assistant. You have access to these tools:\n<tools>\n"
    '{"name":"set_timer","description":"Start a timer","parameters":{"type":"object","properties":{"minutes":{"type":"integer"}},"required":["minutes"]}}\n'
    '{"name":"play_music","description":"Play a song","parameters":{"type":"object","properties":{"song":{"type":"string"}},"required":["song"]}}\n'
    '{"name":"send_message","description":"Send a text message","parameters":{"type":"object","properties":{"to":{"type":"string"},"text":{"type":"string"}},"required":["to","text"]}}\n'
    "</tools>\nAnswer the user's request with only a JSON array of tool calls, for example "
    '[{"name": "tool_name", "arguments": {"arg": "value"}}]. Use only the tools above and their parameters. Reply [] if no tool applies.'
)

USER_REQUESTS = [
    "What is the capital of France?",
    "set a timer for 5 minutes",
    "play Bohemian Rhapsody",
    "text mom that I'll be late",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Translate 'good morning' to Spanish.",
    "remind me to call Bob at 3pm",
    "What's 17 times 23?",
    "Tell me a joke about cats.",
    "turn off the lights in the kitchen",
    "Summarize the plot of Hamlet in one sentence.",
]


def last_logits(llm):
    """Logits of the last evaluated token (llama-cpp-python only fills `scores` with logits_all)."""
    import numpy as np
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32).copy()


def chatml(system, user):
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def prompts():
    out = []
    default_sys = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    for u in USER_REQUESTS:
        out.append(chatml(default_sys, u))
    for u in USER_REQUESTS[:6]:
        out.append(chatml(SYSTEM_TOOLS, u))
    out += [
        "The quick brown fox",
        "Once upon a time, in a land far away,",
        "def fibonacci(n):\n    ",
        '[{"name": "set_timer", "arguments": {"minutes": ',
        "1, 2, 3, 4, 5,",
        "Paris is the capital of",
    ]
    return out


def run_rust(args, mode, texts):
    with tempfile.TemporaryDirectory() as d:
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump(texts, f)
        subprocess.run([args.bin, mode, args.gguf, inp, outp], check=True)
        with open(outp) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--gguf", default=os.path.join(root, "assets/smollm2.gguf"))
    ap.add_argument("--bin", default=None)
    ap.add_argument("--out", default=os.path.join(root, "crates/plansmith-llama/results/crosscheck.json"))
    ap.add_argument("--kv-f32", action="store_true", help="llama.cpp KV cache in f32 (default f16)")
    args = ap.parse_args()
    if not os.path.exists(args.gguf):
        sys.exit(f"{args.gguf} missing: run scripts/assets.sh")
    if args.bin is None:
        tdir = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        subprocess.run(["cargo", "build", "-q", "-p", "plansmith-llama", "--example", "llama_dump"], check=True, cwd=root)
        args.bin = os.path.join(tdir, "debug/examples/llama_dump")

    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    kw = dict(model_path=args.gguf, n_ctx=4096, n_batch=512, n_threads=2, verbose=False, logits_all=False)
    if args.kv_f32:
        kw.update(type_k=0, type_v=0)
    llm = Llama(**kw)

    # 1. tokenizer
    ours = run_rust(args, "tokenize", CORPUS)
    tok_mismatch = []
    for text, mine in zip(CORPUS, ours):
        ref = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if list(ref) != list(mine):
            tok_mismatch.append({"text": text, "ours": mine, "llama_cpp": list(ref)})
    n_tok = sum(len(x) for x in ours)
    print(f"tokenizer: {len(CORPUS) - len(tok_mismatch)}/{len(CORPUS)} texts identical ({n_tok} tokens)")
    for m in tok_mismatch[:5]:
        print("  MISMATCH", repr(m["text"][:60]), m["ours"][:20], m["llama_cpp"][:20])

    # 2. logits
    ps = prompts()
    rows = run_rust(args, "logits", ps)
    agree = 0
    max_abs, mean_abs, top5 = [], [], []
    details = []
    for text, row in zip(ps, rows):
        toks = row["tokens"]
        ref_toks = list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        assert ref_toks == toks, f"prompt tokens differ for {text[:40]!r}"
        llm.reset()
        llm._ctx.kv_cache_clear()
        llm.eval(toks)
        ref = last_logits(llm)
        mine = np.array(row["logits"], dtype=np.float32)
        d = np.abs(ref - mine)
        a, b = int(ref.argmax()), int(mine.argmax())
        agree += int(a == b)
        max_abs.append(float(d.max()))
        mean_abs.append(float(d.mean()))
        t5r, t5m = set(np.argsort(-ref)[:5].tolist()), set(np.argsort(-mine)[:5].tolist())
        top5.append(len(t5r & t5m) / 5)
        srt = np.sort(ref)[::-1]
        details.append({"prompt": text[-60:], "n_tokens": len(toks), "top1_llama_cpp": a, "top1_ours": b,
                        "ref_margin": float(srt[0] - srt[1]), "max_abs": float(d.max()), "mean_abs": float(d.mean())})
    n = len(ps)
    # Noise floor: llama.cpp against itself, batched prefill vs one token at a time.
    kw1 = dict(kw, n_batch=1, n_ubatch=1)
    llm1 = Llama(**kw1)
    self_agree, self_max, self_mean = 0, [], []
    for text, row in zip(ps, rows):
        outs = []
        for m in (llm, llm1):
            m.reset()
            m._ctx.kv_cache_clear()
            m.eval(row["tokens"])
            outs.append(last_logits(m))
        self_agree += int(outs[0].argmax() == outs[1].argmax())
        dd = np.abs(outs[0] - outs[1])
        self_max.append(float(dd.max()))
        self_mean.append(float(dd.mean()))
    decisive = [dd for dd in details if dd["ref_margin"] > 0.1]
    summary = {
        "gguf": os.path.basename(args.gguf),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_kv": "f32" if args.kv_f32 else "f16",
        "tokenizer_texts": len(CORPUS),
        "tokenizer_identical": len(CORPUS) - len(tok_mismatch),
        "tokenizer_tokens": n_tok,
        "tokenizer_mismatches": tok_mismatch,
        "prompts": n,
        "top1_agreement": agree / n,
        "top5_overlap_mean": float(np.mean(top5)),
        "max_abs_diff": float(np.max(max_abs)),
        "mean_abs_diff": float(np.mean(mean_abs)),
        "top1_agreement_margin_gt_0_1": sum(dd["top1_llama_cpp"] == dd["top1_ours"] for dd in decisive) / max(1, len(decisive)),
        "prompts_margin_gt_0_1": len(decisive),
        "llama_cpp_self_batch512_vs_batch1": {"top1_agreement": self_agree / n, "max_abs_diff": max(self_max), "mean_abs_diff": float(np.mean(self_mean))},
        "per_prompt": details,
    }
    print(f"logits: {n} prompts, top-1 agreement {agree}/{n} = {agree / n:.1%}, top-5 overlap {np.mean(top5):.1%}, "
          f"max |diff| {np.max(max_abs):.4f}, mean |diff| {np.mean(mean_abs):.4f} (llama.cpp KV {summary['llama_cpp_kv']})")
    print(f"  prompts with reference top-1 margin > 0.1: {len(decisive)}, agreement {summary['top1_agreement_margin_gt_0_1']:.1%}")
    print(f"  noise floor, llama.cpp vs itself (batch 512 vs 1): top-1 {self_agree}/{n}, max |diff| {max(self_max):.4f}, mean |diff| {np.mean(self_mean):.4f}")
    for dd in details:
        if dd["top1_llama_cpp"] != dd["top1_ours"]:
            print("  top-1 differs:", dd)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print("wrote", args.out)
    ok = not tok_mismatch and summary["top1_agreement_margin_gt_0_1"] >= 0.99
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
