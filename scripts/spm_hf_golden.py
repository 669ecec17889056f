#!/usr/bin/env python3
"""Golden files for SentencePiece-style `tokenizer.json` files (BPE with byte fallback, as
Hugging Face ships Gemma, Llama 2 and Mistral): a tiny SentencePiece BPE model trained here,
converted to `tokenizer.json` by transformers' own converters (GemmaConverter: spaces replaced
by `▁`, no dummy prefix; LlamaConverter, legacy: `▁` prepended too; LlamaConverter, not
legacy: a `Metaspace` pre-tokenizer prepending `▁` at the input's start only), and the ids Hugging Face
`tokenizers` gives for a corpus of texts.

Not part of CI (it needs sentencepiece, transformers, tokenizers and protobuf; no torch); the
results are committed and `cargo test -p plansmith-llama --test tokenizer spm_hf` compares
against them without Python.

Usage: /path/to/venv/bin/python scripts/spm_hf_golden.py
       [--out crates/plansmith-llama/tests/fixtures/spm_hf]
"""
import argparse
import io
import json
import os
import random
import tempfile
import types

import sentencepiece as spm
import tokenizers
import transformers
from transformers.convert_slow_tokenizer import GemmaConverter, LlamaConverter
from transformers.tokenization_utils_base import generate_merges

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "crates", "plansmith-llama", "tests", "fixtures", "spm_hf")

WORDS = ("open the set a timer for minutes call mom at turn on lights play music volume to "
         "send message please can you remind me tomorrow morning schedule meeting with team "
         "weather in paris what is show my calendar screenshot window browser safari notes "
         "check package where parcel delivery track order number 12 34 567 8.5 ten twenty").split()

# Texts the tokenizers are compared on: spaces at the ends and in runs, newlines and tabs,
# characters the vocabulary lacks (byte fallback), digits, special tokens, capitals.
CORPUS = [
    "open the notes",
    "Set a timer for 10 minutes",
    "  leading and trailing spaces  ",
    "double  space and   triple",
    "tabs\tand\nnew\n\nlines",
    "café naïve Ünïcödé — “quotes”",
    "日本語のテキスト",
    "emoji 🤖 and 👩‍👩‍👧",
    "numbers 1234567890 and 3.14",
    "<start_of_turn>user\nplay music<end_of_turn>\n<start_of_turn>model\n",
    "ALL CAPS PLEASE",
    "",
    " ",
    "x",
    "track order number 12 34 567",
]


class Extractor:
    """The vocabulary and score-ordered merges, as transformers 4's extractor gave the
    converters (transformers 5 calls its own with another signature)."""

    def __init__(self, model):
        self.sp = spm.SentencePieceProcessor(model_file=model)

    def extract(self, vocab_scores=None):
        vocab = {self.sp.id_to_piece(i): i for i in range(self.sp.GetPieceSize())}
        if "\t" not in vocab:
            vocab["\t"] = vocab.get("<0x09>")
        return vocab, generate_merges(vocab, vocab_scores)


class Gemma(GemmaConverter):
    SpmExtractor = Extractor


class Llama(LlamaConverter):
    SpmExtractor = Extractor


def train(path_prefix, pad, unk, bos, eos, add_dummy_prefix, user_defined):
    rng = random.Random(2026)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(3000)]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=600,
        model_type="bpe", byte_fallback=True, split_digits=True, character_coverage=1.0,
        pad_id=pad, unk_id=unk, bos_id=bos, eos_id=eos, add_dummy_prefix=add_dummy_prefix,
        user_defined_symbols=user_defined, num_threads=1, minloglevel=2,
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True)
    return path_prefix + ".model"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    cases = {
        # Gemma's layout: pad 0, eos 1, bos 2, unk 3; the turn markers are special.
        "gemma": (Gemma,
                  train(os.path.join(tmp, "gemma"), 0, 3, 2, 1, False,
                        ["<start_of_turn>", "<end_of_turn>"]),
                  dict(pad_token="<pad>", eos_token="</s>", bos_token="<s>")),
        # Llama 2's: unk 0, bos 1, eos 2; a legacy tokenizer prepends `▁`.
        "llama": (Llama,
                  train(os.path.join(tmp, "llama"), -1, 0, 1, 2, True, []),
                  dict(legacy=True, add_prefix_space=True)),
        # A non-legacy Llama tokenizer: no normalizer, `Metaspace` with prepend_scheme "first".
        "llama_first": (Llama,
                        train(os.path.join(tmp, "llama_first"), -1, 0, 1, 2, True, []),
                        dict(legacy=False, add_prefix_space=True)),
    }
    golden = {"versions": {"transformers": transformers.__version__,
                           "tokenizers": tokenizers.__version__,
                           "sentencepiece": spm.__version__}, "cases": {}}
    for name, (conv, model, attrs) in cases.items():
        sp = spm.SentencePieceProcessor(model_file=model)
        original = types.SimpleNamespace(vocab_file=model, **attrs)
        if conv is Llama:
            original.convert_ids_to_tokens = sp.id_to_piece
        tok = conv(original).converted()
        path = os.path.join(args.out, f"{name}.tokenizer.json")
        tok.save(path)
        rows = []
        for text in CORPUS:
            rows.append({"text": text,
                         "ids": tok.encode(text, add_special_tokens=False).ids,
                         "sentencepiece": sp.encode(text)})
        golden["cases"][name] = rows
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f, ensure_ascii=False, indent=0)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
