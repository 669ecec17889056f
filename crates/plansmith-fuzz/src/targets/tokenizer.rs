//! tokenizer.json loading (mutated HF tokenizers, byte-level and SentencePiece-style with byte
//! fallback: a tokenizer or a typed error), and encode /
//! decode of arbitrary text through a byte-level BPE and a SentencePiece-style vocabulary with
//! byte fallback (decode(encode(text)) == text for both).

use plansmith_llama::{TokenKind, Tokenizer};
use serde_json::{json, Map, Value};

use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

pub struct TokenizerTarget {
    seed: Value,
    spm_seed: Value,
    tokenizer: Tokenizer,
    sentencepiece: Tokenizer,
    /// [`spm_seed_json`] loaded.
    spm_json: Tokenizer,
}

/// A SentencePiece-style vocabulary: the 256 byte tokens, a few pieces with `▁` for a space
/// (scores decide the merges), and two control tokens.
fn sentencepiece() -> Result<Tokenizer, String> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
    let mut kinds = vec![TokenKind::Byte; 256];
    let mut scores = vec![0.0f32; 256];
    let pieces = [
        "o",
        "p",
        "e",
        "n",
        "t",
        "h",
        "\u{2581}",
        "op",
        "en",
        "\u{2581}op",
        "\u{2581}open",
        "th",
        "the",
        "\u{2581}the",
        "é",
    ];
    for (i, p) in pieces.iter().enumerate() {
        tokens.push(p.to_string());
        kinds.push(TokenKind::Normal);
        scores.push(-(i as f32));
    }
    for c in ["<start_of_turn>", "<end_of_turn>"] {
        tokens.push(c.into());
        kinds.push(TokenKind::Control);
        scores.push(0.0);
    }
    Tokenizer::sentencepiece(tokens, kinds, scores, false).map_err(|e| e.to_string())
}

/// GPT-2's byte-to-character table: printable bytes stand for themselves, the rest are moved
/// to code points from 256 up.
fn byte_chars() -> Vec<char> {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32).collect();
    printable.extend(0xA1..=0xAC);
    printable.extend(0xAE..=0xFF);
    let mut out = vec!['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        out[b as usize] = if printable.contains(&b) {
            char::from_u32(b).unwrap_or('?')
        } else {
            let c = char::from_u32(next).unwrap_or('?');
            next += 1;
            c
        };
    }
    out
}

/// A byte-level BPE: every byte, a few merges, two special tokens.
fn seed_json() -> Value {
    let chars = byte_chars();
    let mut vocab = Map::new();
    for (i, c) in chars.iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    let space = chars[b' ' as usize];
    let merges = [
        format!("{space} o"),
        "o p".into(),
        "e n".into(),
        format!("{space}o p"),
        format!("{space}op en"),
        "t h".into(),
        "th e".into(),
    ];
    let mut next = 256;
    for m in &merges {
        vocab.insert(m.replace(' ', ""), json!(next));
        next += 1;
    }
    json!({
        "version": "1.0",
        "added_tokens": [
            {"id": next, "content": "<|im_start|>", "special": true},
            {"id": next + 1, "content": "<|im_end|>", "special": true}
        ],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges}
    })
}

/// A SentencePiece-style `tokenizer.json` as Gemma's is written: byte tokens, pieces with `▁`
/// for a space, ranked merges, `Replace(" ", "▁")`, byte fallback, two special tokens.
fn spm_seed_json() -> Value {
    let mut vocab = Map::new();
    for b in 0..=255u8 {
        vocab.insert(format!("<0x{b:02X}>"), json!(b as usize));
    }
    let mut next = 256;
    for p in ["o", "p", "e", "n", "t", "h", "\u{2581}"] {
        vocab.insert(p.into(), json!(next));
        next += 1;
    }
    let merges = [
        ["o", "p"],
        ["e", "n"],
        ["\u{2581}", "op"],
        ["\u{2581}op", "en"],
        ["t", "h"],
        ["th", "e"],
        ["\u{2581}", "the"],
    ];
    for [l, r] in merges {
        vocab.insert(format!("{l}{r}"), json!(next));
        next += 1;
    }
    json!({
        "version": "1.0",
        "added_tokens": [
            {"id": next, "content": "<start_of_turn>", "special": true},
            {"id": next + 1, "content": "<end_of_turn>", "special": true}
        ],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                          "behavior": "MergedWithPrevious", "invert": false},
        "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": null,
                  "vocab": vocab, "merges": merges}
    })
}

impl TokenizerTarget {
    pub fn new() -> Result<Self, String> {
        let seed = seed_json();
        let tokenizer =
            Tokenizer::from_hf_json(&seed).map_err(|e| format!("the seed tokenizer: {e}"))?;
        let spm_seed = spm_seed_json();
        let spm = Tokenizer::from_hf_json(&spm_seed)
            .map_err(|e| format!("the SentencePiece-style seed tokenizer: {e}"))?;
        Ok(TokenizerTarget {
            seed,
            spm_seed,
            tokenizer,
            sentencepiece: sentencepiece()?,
            spm_json: spm,
        })
    }
}

impl Target for TokenizerTarget {
    fn name(&self) -> &'static str {
        "tokenizer"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        if rng.chance(0.5) {
            let mut out = vec![0u8];
            let seed = if rng.chance(0.5) {
                &self.seed
            } else {
                &self.spm_seed
            };
            out.extend(mutate::json_bytes(rng, seed, seed));
            out
        } else {
            let mut out = vec![1u8];
            let r = 1 + rng.below(6);
            let mut text =
                mutate::text(rng, "open the file <|im_start|> then 12345 ok", r).into_bytes();
            if rng.chance(0.3) {
                let rounds = 1 + rng.below(4);
                mutate::bytes(rng, &mut text, rounds, 0);
            }
            out.extend(text);
            out
        }
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        let Some((&which, rest)) = input.split_first() else {
            return Ok(Verdict::Refused);
        };
        if which == 0 {
            let Ok(v) = serde_json::from_slice::<Value>(rest) else {
                return Ok(Verdict::Refused);
            };
            let tok = match Tokenizer::from_hf_json(&v) {
                Ok(t) => t,
                Err(_) => return Ok(Verdict::Refused),
            };
            let ids = tok.encode("open the file <|im_start|> é 🙂", true, true);
            let n = tok.vocab_size() as u32;
            if let Some(bad) = ids.iter().find(|&&i| i >= n) {
                return Err(format!(
                    "encode produced id {bad} outside a vocabulary of {n}"
                ));
            }
            let _ = tok.decode(&ids, false);
            return Ok(Verdict::Accepted);
        }
        // Arbitrary bytes, as a request would reach us (lossily decoded), round-trip.
        let text = String::from_utf8_lossy(rest);
        for (name, tok) in [
            ("byte-level BPE", &self.tokenizer),
            ("SentencePiece", &self.sentencepiece),
            ("SentencePiece tokenizer.json", &self.spm_json),
        ] {
            // SentencePiece writes a space as `▁`, so a literal `▁` comes back as a space (as in
            // llama.cpp and sentencepiece itself).
            if name.starts_with("SentencePiece") && text.contains('\u{2581}') {
                continue;
            }
            let ids = tok.encode(&text, false, false);
            let back = tok
                .decode(&ids, false)
                .map_err(|e| format!("{name}: decode of encode failed: {e}"))?;
            if back != text {
                return Err(format!("{name}: round trip changed {text:?} into {back:?}"));
            }
            let _ = tok.encode(&text, true, true);
        }
        Ok(Verdict::Accepted)
    }
}
