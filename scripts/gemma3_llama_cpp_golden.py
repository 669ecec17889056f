#!/usr/bin/env python3
"""llama.cpp's answers on the real Gemma-3-270M (`scripts/assets.sh gemma3`), for a CI test.

Writes crates/plansmith-llama/tests/fixtures/gemma3_llama_cpp.json:
- `tokenize`: the token ids llama.cpp gives each text of llama_crosscheck.py's corpus (special
  tokens parsed, no BOS): the SentencePiece tokenizer must give the same;
- `next_token`: for the cross-check's prompts in Gemma's turn format (BOS added, as the model
  asks), llama.cpp's top-1 next token where its own top-two margin exceeds 1.0 (far outside
  llama.cpp's spread between its own configurations), with the margin.
`cargo test -p plansmith-llama --test gemma3` compares without Python.

Usage: python3 scripts/gemma3_llama_cpp_golden.py [--gguf assets/gemma3.gguf] [--out FILE]
(llama-cpp-python as .ci/run builds it; KV cache f32.)
"""
import argparse
import json
import os
import sys

import numpy as np

import llama_crosscheck as cc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARGIN = 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "assets/gemma3.gguf"))
    ap.add_argument("--out", default=os.path.join(
        ROOT, "crates/plansmith-llama/tests/fixtures/gemma3_llama_cpp.json"))
    args = ap.parse_args()
    if not os.path.exists(args.gguf):
        sys.exit(f"{args.gguf} missing: run scripts/assets.sh gemma3")
    from llama_cpp import Llama
    import llama_cpp
    llm = Llama(model_path=args.gguf, n_ctx=4096, n_batch=512, verbose=False, logits_all=False,
                **cc.CONFIGS["kv_f32"])
    tokenize = [{"text": t, "ids": list(llm.tokenize(t.encode("utf-8"), add_bos=False,
                                                      special=True))} for t in cc.CORPUS]
    cc.CHAT["format"] = "gemma"
    nexts = []
    for _, text in cc.prompts():
        ids = list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))
        llm.reset()
        llm.eval(ids)
        logits = cc.last_logits(llm)
        top2 = np.argsort(logits)[-2:][::-1]
        margin = float(logits[top2[0]] - logits[top2[1]])
        if margin > MARGIN:
            nexts.append({"text": text, "ids": ids, "top1": int(top2[0]),
                          "margin": round(margin, 3)})
    out = {"model": os.path.basename(args.gguf), "llama_cpp_python": llama_cpp.__version__,
           "margin_over": MARGIN, "tokenize": tokenize, "next_token": nexts}
    with open(args.out, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
    print(f"wrote {args.out}: {len(tokenize)} texts, {len(nexts)} prompts with margin > {MARGIN}")


if __name__ == "__main__":
    main()
