#!/usr/bin/env python3
"""Cross-check plansmith-llama against llama.cpp (llama-cpp-python) on SmolLM2 GGUF.

1. Tokenizer: token ids for a varied corpus (unicode, digits, whitespace runs, special tokens)
   must be identical.
2. Logits: next-token logits after 144 prompts (chat with the default and a tools system prompt,
   multi-turn chat, plain text, code, numbers, partial JSON tool calls; generated
   deterministically), compared with several llama.cpp configurations:
   - `default`: llama-cpp-python's defaults (KV cache f16, flash attention off),
   - `kv_f32`: KV cache f32, flash attention off,
   - `flash_attn`: flash attention on (llama.cpp then casts K/V to f16 itself),
   - `kv_f32_batch1`: KV f32, one token per batch (only as a llama.cpp-vs-llama.cpp reference).
   For each: top-1 agreement (all prompts, and prompts where llama.cpp's own top-two margin
   exceeds 0.1, the issue's criterion, or 0.25), top-5 overlap, max / mean abs logit difference, and the mean abs difference
   after removing each prompt's mean offset (a constant shift does not change the softmax).
   The same statistics between llama.cpp configurations give the spread of llama.cpp against
   itself: the scale on which our differences are to be judged.

Usage: python3 scripts/llama_crosscheck.py [--gguf assets/smollm2.gguf] [--bin PATH]
       [--out crates/plansmith-llama/results/crosscheck.json] [--threads 1]
       [--configs default,kv_f32,flash_attn,kv_f32_batch1] [--chat chatml|gemma]
The Rust side is `cargo run --release -p plansmith-llama --example llama_dump` (built if --bin
is absent, under $CARGO_TARGET_DIR or target/). Exit status 0 when the tokenizer is identical
and top-1 agreement on prompts with llama.cpp margin > 0.1 is >= 99% for every configuration.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

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
    "<start_of_turn>user\nhi  there\n\n\tok<end_of_turn>\n<start_of_turn>model\n",
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

# More requests for the extended set (the first 24 prompts are the original set, unchanged).
MORE_REQUESTS = [
    "start a 25 minute timer for focus",
    "send a message to Alice saying the meeting moved to 4pm",
    "play some jazz",
    "I need a timer for the pasta, 9 minutes",
    "tell Bob I'm running late",
    "Play 'Imagine' by John Lennon",
    "text 555-0100: on my way",
    "set a timer for an hour and a half",
    "send 'happy birthday!' to Grandma",
    "play Beethoven's fifth symphony",
    "message Sam: dinner at 8?",
    "Who wrote Pride and Prejudice?",
    "convert 100 fahrenheit to celsius",
    "What's the square root of 144?",
    "List three primary colors.",
    "Explain photosynthesis in two sentences.",
    "How far away is the moon?",
    "Can you recommend a good science fiction book?",
    "What are the benefits of regular exercise?",
    "Say hello in French, German and Italian.",
    "write a python function that reverses a string",
    "What year did the Berlin Wall fall?",
    "what's the weather like in Tokyo tomorrow?",
    "cancel my timer",
    "How do I boil an egg?",
    "Give me a synonym for 'happy'.",
    "Why is the sky blue?",
    "SET A TIMER FOR 10 MINUTES",
]

PLAIN_TEXT = [
    "The history of the Roman Empire begins",
    "In 1969, astronauts Neil Armstrong and Buzz Aldrin",
    "Water boils at 100 degrees Celsius at sea level, but at higher altitudes",
    "The mitochondria is the powerhouse of the cell because",
    "My favorite recipe for chocolate chip cookies starts with",
    "Dear hiring manager,\n\nI am writing to apply for",
    "Breaking news: scientists have discovered",
    "The three laws of thermodynamics are",
    "It was a dark and stormy night; the rain fell in torrents",
    "Machine learning is a field of artificial intelligence that",
    "Q: What is the largest planet in the solar system?\nA:",
    "Step 1: Preheat the oven to 180 degrees.\nStep 2:",
    "Photosynthesis converts light energy into",
    "The capital of Japan is Tokyo. The capital of Italy is",
    "Shakespeare was born in Stratford-upon-Avon in",
    "Ingredients:\n- 2 cups flour\n- 1 cup sugar\n-",
    "The French Revolution began in 1789 when",
    "A haiku is a short poem with",
    "To be, or not to be, that is",
    "Once there was a little robot who wanted to",
]

CODE = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "import numpy as np\n\nx = np.linspace(0, 1, 100)\ny =",
    "for (let i = 0; i < arr.length; i++) {\n    ",
    "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!(",
    "SELECT name, COUNT(*) FROM orders GROUP BY",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        ",
    "#include <stdio.h>\n\nint main(void) {\n    printf(",
    "def is_prime(n):\n    for i in range(2, int(n ** 0.5) + 1):\n        if n % i == 0:\n            return",
    "<html>\n  <head>\n    <title>My page</title>\n  </head>\n  <body>\n    <h1>",
    "git commit -m \"",
    "const add = (a, b) =>",
    "# Sort a list of dictionaries by key\nitems.sort(key=lambda d:",
]

NUMBERS = [
    "2, 4, 6, 8, 10,",
    "1, 1, 2, 3, 5, 8, 13,",
    "12 + 30 =",
    "The year after 1999 is",
    "3.14159 is an approximation of",
    "100, 90, 80, 70,",
    "Monday, Tuesday, Wednesday,",
    "January, February, March,",
    "7 x 8 = 56\n6 x 9 =",
    "Order #48213 total: $",
    "a, b, c, d, e,",
    "10:00, 10:15, 10:30,",
]

JSON_PARTIAL = [
    '[{"name": "play_music", "arguments": {"song": "',
    '[{"name": "send_message", "arguments": {"to": "mom", "text": "',
    '[{"name": "',
    '{"minutes": 5, "label": "',
    '[{"name": "set_timer", "arguments": {"minutes": 10}}, {"name": "',
    '[{"name": "send_message", "arguments": {"to": "Bob", "text": "running late"}}',
    '{"type": "object", "properties": {"song": {"type": "',
    '[{"name": "play_music", "arguments": {"song": "Imagine"}}]',
]

MULTI_TURN = [
    ("What is 2 + 2?", "2 + 2 = 4.", "And times 3?"),
    ("Hi!", "Hello! How can I help you today?", "Tell me a fun fact."),
    ("set a timer for 5 minutes", '[{"name": "set_timer", "arguments": {"minutes": 5}}]', "make it 10"),
    ("Who are you?", "I am SmolLM, an AI assistant.", "What can you do?"),
    ("play jazz", '[{"name": "play_music", "arguments": {"song": "jazz"}}]', "louder please"),
    ("Name a fruit.", "Apple.", "Another one."),
]

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def last_logits(llm):
    """Logits of the last evaluated token (llama-cpp-python only fills `scores` with logits_all)."""
    import numpy as np
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32).copy()


# The turn format of the prompts: ChatML (SmolLM2, Qwen) or Gemma's (`--chat gemma`).
CHAT = {"format": "chatml"}


def chatml(system, user):
    return chatml_turns(system, [user])


def chatml_turns(system, turns):
    """System prompt, then alternating user / assistant turns ending with a user turn."""
    if CHAT["format"] == "gemma":
        out = ""
        for i, t in enumerate(turns):
            role = "user" if i % 2 == 0 else "model"
            text = f"{system}\n\n{t}" if i == 0 else t
            out += f"<start_of_turn>{role}\n{text}<end_of_turn>\n"
        return out + "<start_of_turn>model\n"
    out = f"<|im_start|>system\n{system}<|im_end|>\n"
    for i, t in enumerate(turns):
        role = "user" if i % 2 == 0 else "assistant"
        out += f"<|im_start|>{role}\n{t}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def prompts():
    """(category, text) pairs: the original 24 prompts, then the extended set (144 in all)."""
    out = []
    for u in USER_REQUESTS:
        out.append(("chat", chatml(DEFAULT_SYSTEM, u)))
    for u in USER_REQUESTS[:6]:
        out.append(("tools", chatml(SYSTEM_TOOLS, u)))
    out += [("text", t) for t in [
        "The quick brown fox",
        "Once upon a time, in a land far away,",
        "def fibonacci(n):\n    ",
        '[{"name": "set_timer", "arguments": {"minutes": ',
        "1, 2, 3, 4, 5,",
        "Paris is the capital of",
    ]]
    for u in MORE_REQUESTS:
        out.append(("chat", chatml(DEFAULT_SYSTEM, u)))
    for u in USER_REQUESTS[6:] + MORE_REQUESTS:
        out.append(("tools", chatml(SYSTEM_TOOLS, u)))
    for turns in MULTI_TURN:
        out.append(("multi_turn", chatml_turns(DEFAULT_SYSTEM, turns)))
    out += [("text", t) for t in PLAIN_TEXT]
    out += [("code", t) for t in CODE]
    out += [("numbers", t) for t in NUMBERS]
    out += [("json", t) for t in JSON_PARTIAL]
    return out


# llama.cpp configurations (keyword arguments of `Llama`). With flash attention on, llama.cpp
# casts an f32 K/V to f16 before the attention op, so `flash_attn` covers both KV types.
CONFIGS = {
    "default": dict(),
    "kv_f32": dict(type_k=0, type_v=0),
    "flash_attn": dict(flash_attn=True),
    "kv_f32_batch1": dict(type_k=0, type_v=0, n_batch=1, n_ubatch=1),
}
# Configurations our runtime must match (batch 1 only serves as llama.cpp's own reference).
GATED = ("default", "kv_f32", "flash_attn")
# The issue's margin, and a wider one: every pair of distinct implementations (llama.cpp's own
# configurations included) differs by ~0.1 per logit once the offset is removed, so a margin
# of 0.1 is within the noise and 0.25 is about 2.5 times it.
MARGIN = 0.1
MARGINS = (MARGIN, 0.25)


def run_rust(args, mode, texts):
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as d:
        inp, outp = os.path.join(d, "in.json"), os.path.join(d, "out.json")
        with open(inp, "w") as f:
            json.dump(texts, f)
        subprocess.run([args.bin, mode, args.gguf, inp, outp], check=True, env=env)
        with open(outp) as f:
            return json.load(f)


def compare(ref, mine):
    """Statistics of logits `mine` against reference `ref` (both [prompts, vocab])."""
    import numpy as np
    d = mine - ref
    ad = np.abs(d)
    cen = np.abs(d - d.mean(axis=1, keepdims=True))
    top_r, top_m = ref.argmax(axis=1), mine.argmax(axis=1)
    srt = -np.sort(-ref, axis=1)
    margin = srt[:, 0] - srt[:, 1]
    agree = top_r == top_m
    t5r = np.argsort(-ref, axis=1)[:, :5]
    t5m = np.argsort(-mine, axis=1)[:, :5]
    top5 = [len(set(a) & set(b)) / 5 for a, b in zip(t5r.tolist(), t5m.tolist())]
    n = len(ref)
    st = {
        "prompts": n,
        "top1_agree": int(agree.sum()),
        "top1_agreement": float(agree.mean()),
    }
    for mg in MARGINS:
        decisive = margin > mg
        st[f"prompts_margin_gt_{mg}"] = int(decisive.sum())
        st[f"top1_agree_margin_gt_{mg}"] = int((agree & decisive).sum())
        st[f"top1_agreement_margin_gt_{mg}"] = float((agree & decisive).sum() / max(1, decisive.sum()))
    return dict(st, **{
        "largest_margin_disagreeing": float(margin[~agree].max()) if (~agree).any() else None,
        "top5_overlap_mean": float(np.mean(top5)),
        "max_abs_diff": float(ad.max()),
        "mean_abs_diff": float(ad.mean()),
        "mean_abs_diff_offset_removed": float(cen.mean()),
        "max_abs_diff_offset_removed": float(cen.max()),
        "_margin": margin,
        "_agree": agree,
        "_max": ad.max(axis=1),
        "_mean": ad.mean(axis=1),
    })


def public(st):
    return {k: v for k, v in st.items() if not k.startswith("_")}


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--gguf", default=os.path.join(root, "assets/smollm2.gguf"))
    ap.add_argument("--bin", default=None)
    ap.add_argument("--out", default=os.path.join(root, "crates/plansmith-llama/results/crosscheck.json"))
    ap.add_argument("--threads", type=int, default=1, help="threads for both runtimes")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="llama.cpp configurations to run")
    ap.add_argument("--chat", choices=["chatml", "gemma"], default="chatml",
                    help="turn format of the chat prompts (gemma: <start_of_turn>)")
    args = ap.parse_args()
    CHAT["format"] = args.chat
    if not os.path.exists(args.gguf):
        sys.exit(f"{args.gguf} missing: run scripts/assets.sh")
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"unknown configuration {c!r} (known: {', '.join(CONFIGS)})")
    if args.bin is None:
        tdir = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "plansmith-llama", "--example", "llama_dump"],
                       check=True, cwd=root)
        args.bin = os.path.join(tdir, "release/examples/llama_dump")

    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    base_kw = dict(model_path=args.gguf, n_ctx=4096, n_batch=512, n_threads=args.threads,
                   n_threads_batch=args.threads, verbose=False, logits_all=False)

    def load(name):
        return Llama(**dict(base_kw, **CONFIGS[name]))

    # 1. tokenizer
    llm = load("default")
    ours_tok = run_rust(args, "tokenize", CORPUS)
    tok_mismatch = []
    for text, mine in zip(CORPUS, ours_tok):
        ref = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if list(ref) != list(mine):
            tok_mismatch.append({"text": text, "ours": mine, "llama_cpp": list(ref)})
    n_tok = sum(len(x) for x in ours_tok)
    print(f"tokenizer: {len(CORPUS) - len(tok_mismatch)}/{len(CORPUS)} texts identical ({n_tok} tokens)")
    for m in tok_mismatch[:5]:
        print("  MISMATCH", repr(m["text"][:60]), m["ours"][:20], m["llama_cpp"][:20])

    # 2. logits
    ps = prompts()
    texts = [t for _, t in ps]
    t0 = time.time()
    rows = run_rust(args, "logits", texts)
    ours_s = time.time() - t0
    toks = [row["tokens"] for row in rows]
    for text, tk in zip(texts, toks):
        ref_toks = list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        assert ref_toks == tk, f"prompt tokens differ for {text[:40]!r}"
    ours = np.array([row["logits"] for row in rows], dtype=np.float32)
    del rows
    print(f"ours: {len(ps)} prompts, {sum(map(len, toks))} tokens, {ours_s:.1f} s")

    refs = {}
    for name in configs:
        t0 = time.time()
        m = llm if name == "default" else load(name)
        out = []
        for tk in toks:
            m.reset()
            m._ctx.kv_cache_clear()
            m.eval(tk)
            out.append(last_logits(m))
        refs[name] = np.stack(out)
        if m is not llm:
            del m
        print(f"llama.cpp {name}: {time.time() - t0:.1f} s")

    vs = {name: compare(refs[name], ours) for name in configs}
    spread = {}
    for i, a in enumerate(configs):
        for b in configs[i + 1:]:
            spread[f"{b} vs {a}"] = public(compare(refs[a], refs[b]))

    details = []
    for i, ((cat, text), tk) in enumerate(zip(ps, toks)):
        row = {"i": i, "category": cat, "prompt_tail": text[-60:], "n_tokens": len(tk),
               "top1_ours": int(ours[i].argmax())}
        for name in configs:
            st = vs[name]
            row[name] = {"top1": int(refs[name][i].argmax()), "margin": round(float(st["_margin"][i]), 4),
                         "max_abs": round(float(st["_max"][i]), 4), "mean_abs": round(float(st["_mean"][i]), 4)}
        details.append(row)
    cats = {}
    for cat, _ in ps:
        cats[cat] = cats.get(cat, 0) + 1

    summary = {
        "gguf": os.path.basename(args.gguf),
        "llama_cpp_python": llama_cpp.__version__,
        "threads": args.threads,
        "tokenizer_texts": len(CORPUS),
        "tokenizer_identical": len(CORPUS) - len(tok_mismatch),
        "tokenizer_tokens": n_tok,
        "tokenizer_mismatches": tok_mismatch,
        "prompts": len(ps),
        "prompt_tokens": sum(map(len, toks)),
        "prompt_categories": cats,
        "margin_thresholds": list(MARGINS),
        "ours_vs_llama_cpp": {name: public(vs[name]) for name in configs},
        "llama_cpp_vs_llama_cpp": spread,
        "per_prompt": details,
    }

    def line(label, st):
        mg = "".join(f"margin>{m}: {st[f'top1_agree_margin_gt_{m}']}/{st[f'prompts_margin_gt_{m}']} = "
                     f"{st[f'top1_agreement_margin_gt_{m}']:.1%}, " for m in MARGINS)
        return (f"  {label:26s} top-1 {st['top1_agree']}/{st['prompts']} = {st['top1_agreement']:.1%}, "
                f"{mg}top-5 {st['top5_overlap_mean']:.1%}, "
                f"max|d| {st['max_abs_diff']:.3f}, mean|d| {st['mean_abs_diff']:.4f} "
                f"(offset removed {st['mean_abs_diff_offset_removed']:.4f})")

    worst_self = min(st[f"top1_agreement_margin_gt_{MARGIN}"] for st in spread.values()) if spread else None
    summary[f"llama_cpp_worst_pair_top1_agreement_margin_gt_{MARGIN}"] = worst_self
    print(f"logits, {len(ps)} prompts ({summary['prompt_tokens']} tokens):")
    print(" ours vs llama.cpp:")
    for name in configs:
        print(line(name, vs[name]))
    print(" llama.cpp vs llama.cpp (its own spread):")
    for k, st in spread.items():
        print(line(k, st))
    for name in configs:
        for dd in details:
            if dd[name]["top1"] != dd["top1_ours"]:
                print(f"  top-1 differs vs {name}: prompt {dd['i']} ({dd['category']}, {dd['n_tokens']} tok) "
                      f"llama.cpp {dd[name]['top1']} ours {dd['top1_ours']} margin {dd[name]['margin']}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    print("wrote", args.out)
    # The issue's criterion, literally: >= 99% top-1 agreement where llama.cpp's margin > 0.1.
    ok = not tok_mismatch and all(
        vs[name][f"top1_agreement_margin_gt_{MARGIN}"] >= 0.99 for name in configs if name in GATED)
    if worst_self is not None:
        print(f"llama.cpp's own configurations agree with each other on {worst_self:.1%} (worst pair) of "
              f"the prompts with margin > {MARGIN}")
    print("PASS" if ok else f"FAIL: top-1 agreement below 99% where llama.cpp's margin > {MARGIN}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
