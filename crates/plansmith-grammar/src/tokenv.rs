//! Token environments: a model's vocabulary as raw bytes, for llguidance's token trie.
//!
//! Built from raw token byte strings (our char codec), a HF `tokenizer.json`, GGUF-style token
//! lists (GPT-2 byte-level strings) or a tiktoken file. Special tokens (EOS, chat markers) are
//! marked with toktrie's `0xFF` prefix so grammars never emit them as text; the EOS token is
//! always special. Masks are padded to the model's logit width (`model_vocab`): ids past the
//! tokenizer's vocabulary are never allowed.

use std::sync::Arc;

use base64::Engine as _;
use toktrie::{ApproximateTokEnv, TokRxInfo, TokTrie};

use crate::error::TokEnvError;

/// A vocabulary ready for constraint building. Cheap to clone.
#[derive(Clone)]
pub struct TokEnv {
    pub(crate) inner: toktrie::TokEnv,
    model_vocab: usize,
    eos: u32,
    id: String,
}

impl std::fmt::Debug for TokEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokEnv")
            .field("vocab", &self.vocab_size())
            .field("model_vocab", &self.model_vocab)
            .field("eos", &self.eos)
            .field("id", &self.id)
            .finish()
    }
}

impl TokEnv {
    /// From the byte string of every token id (`tokens[id]`), the EOS id, the ids of other
    /// special tokens (never emitted as text), and the model's logit width (`None` = the
    /// number of tokens).
    pub fn from_token_bytes(
        mut tokens: Vec<Vec<u8>>,
        eos: u32,
        specials: &[u32],
        model_vocab: Option<usize>,
    ) -> Result<TokEnv, TokEnvError> {
        if tokens.is_empty() {
            return Err(TokEnvError::Invalid("empty vocabulary".into()));
        }
        let n = tokens.len();
        if eos as usize >= n {
            return Err(TokEnvError::Invalid(format!(
                "EOS id {eos} is outside the vocabulary ({n} tokens)"
            )));
        }
        let model_vocab = model_vocab.unwrap_or(n);
        if model_vocab < n {
            return Err(TokEnvError::Invalid(format!(
                "model vocabulary {model_vocab} is smaller than the tokenizer's {n}"
            )));
        }
        for &s in specials.iter().chain(std::iter::once(&eos)) {
            let t = tokens.get_mut(s as usize).ok_or_else(|| {
                TokEnvError::Invalid(format!("special token id {s} is outside the vocabulary"))
            })?;
            if t.first() != Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
                let mut marked = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                marked.extend_from_slice(if t.is_empty() { b"<special>" } else { t });
                *t = marked;
            }
        }
        let id = vocab_id(&tokens, eos, model_vocab);
        let info = TokRxInfo::new(n as u32, eos);
        let trie = TokTrie::from(&info, &tokens);
        Ok(TokEnv {
            inner: Arc::new(ApproximateTokEnv::new(trie)),
            model_vocab,
            eos,
            id,
        })
    }

    /// From a Hugging Face `tokenizer.json` (byte-level BPE or byte-fallback vocabularies).
    /// `eos` defaults to the `eos_token` of an adjacent config when known by the caller; it
    /// must be given here.
    pub fn from_tokenizer_json(
        json: &serde_json::Value,
        eos: u32,
        model_vocab: Option<usize>,
    ) -> Result<TokEnv, TokEnvError> {
        let mut tokens = llguidance::token_bytes_from_tokenizer_json(json)
            .map_err(|e| TokEnvError::Invalid(format!("tokenizer.json: {e}")))?;
        if (eos as usize) >= tokens.len() {
            tokens.resize(eos as usize + 1, Vec::new());
        }
        // added special tokens already carry the 0xFF marker
        Self::from_token_bytes(tokens, eos, &[], model_vocab)
    }

    /// From a GGUF-style token list (`tokenizer.ggml.tokens`, GPT-2 byte-level strings).
    /// `token_types` (`tokenizer.ggml.token_type`, 3 = control) marks specials when given;
    /// tokens written like `<|...|>` or `<s>` are not guessed at.
    pub fn from_gguf_tokens(
        tokens: &[String],
        token_types: Option<&[i32]>,
        eos: u32,
        model_vocab: Option<usize>,
    ) -> Result<TokEnv, TokEnvError> {
        let decode = byte_level_decoder();
        let mut specials = Vec::new();
        let mut bytes = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let control = token_types
                .and_then(|tt| tt.get(i))
                .is_some_and(|&k| k == 3 || k == 4);
            if control {
                specials.push(i as u32);
                bytes.push(t.as_bytes().to_vec());
                continue;
            }
            // byte-fallback tokens `<0xAB>` (SentencePiece-style vocabularies)
            if t.len() == 6 && t.starts_with("<0x") && t.ends_with('>') {
                if let Ok(b) = u8::from_str_radix(&t[3..5], 16) {
                    bytes.push(vec![b]);
                    continue;
                }
            }
            let mut out = Vec::with_capacity(t.len());
            for c in t.chars() {
                match decode(c) {
                    Some(b) => out.push(b),
                    None => {
                        // not byte-level: keep the UTF-8 text
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
            bytes.push(out);
        }
        Self::from_token_bytes(bytes, eos, &specials, model_vocab)
    }

    /// From a tiktoken file (`base64-token rank` per line), plus the special tokens that
    /// follow the ranks (`(text, id)`), the EOS id and the model's logit width.
    pub fn from_tiktoken(
        path: &std::path::Path,
        specials: &[(&str, u32)],
        eos: u32,
        model_vocab: Option<usize>,
    ) -> Result<TokEnv, TokEnvError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokEnvError::Io {
            path: shown.clone(),
            source,
        })?;
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |m: &str| TokEnvError::Format {
                path: shown.clone(),
                line: i + 1,
                message: m.to_string(),
            };
            let (b64, rank) = line
                .split_once(' ')
                .ok_or_else(|| bad("expected `<base64> <rank>`"))?;
            let rank: usize = rank
                .trim()
                .parse()
                .map_err(|_| bad("rank is not a number"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| bad(&format!("bad base64: {e}")))?;
            if rank >= 4_000_000 {
                return Err(bad("rank too large"));
            }
            if tokens.len() <= rank {
                tokens.resize(rank + 1, Vec::new());
            }
            tokens[rank] = bytes;
        }
        let mut ids = Vec::new();
        for &(s, id) in specials {
            let id_us = id as usize;
            if tokens.len() <= id_us {
                tokens.resize(id_us + 1, Vec::new());
            }
            let mut b = vec![TokTrie::SPECIAL_TOKEN_MARKER];
            b.extend_from_slice(s.as_bytes());
            tokens[id_us] = b;
            ids.push(id);
        }
        if (eos as usize) >= tokens.len() {
            tokens.resize(eos as usize + 1, Vec::new());
        }
        Self::from_token_bytes(tokens, eos, &ids, model_vocab)
    }

    /// Qwen's vocabulary (`qwen.tiktoken`) with its three named specials, EOS
    /// `<|endoftext|>` (151643) and the model's 151936-wide logits.
    pub fn qwen_tiktoken(path: &std::path::Path) -> Result<TokEnv, TokEnvError> {
        Self::from_tiktoken(
            path,
            &[
                ("<|endoftext|>", 151_643),
                ("<|im_start|>", 151_644),
                ("<|im_end|>", 151_645),
            ],
            151_643,
            Some(151_936),
        )
    }

    /// Number of tokens the tokenizer knows.
    pub fn vocab_size(&self) -> usize {
        self.inner.tok_trie().vocab_size()
    }

    /// Width of the model's logits (masks are this long).
    pub fn model_vocab(&self) -> usize {
        self.model_vocab
    }

    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// A stable fingerprint of the vocabulary (bytes, EOS, width): part of cache keys.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The bytes of a token (special tokens keep their 0xFF marker).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.token_slice(id).to_vec()
    }

    /// [`Self::token_bytes`] without a copy, for loops over the vocabulary.
    pub fn token_slice(&self, id: u32) -> &[u8] {
        self.inner.tok_trie().token(id)
    }

    /// Greedy (longest-match) tokenization, as used for forced tokens.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.inner.tokenize_bytes(text.as_bytes())
    }

    /// The underlying llguidance environment.
    pub fn llg_env(&self) -> &toktrie::TokEnv {
        &self.inner
    }
}

/// The GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100...
fn byte_level_decoder() -> impl Fn(char) -> Option<u8> {
    let mut table = std::collections::HashMap::with_capacity(256);
    let mut next = 0x100u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let c = if printable {
            b as char
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
        table.insert(c, b);
    }
    move |c| table.get(&c).copied()
}

/// FNV-1a over the vocabulary: a fingerprint, not a security hash.
fn vocab_id(tokens: &[Vec<u8>], eos: u32, model_vocab: usize) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for t in tokens {
        eat(&(t.len() as u32).to_le_bytes());
        eat(t);
    }
    eat(&eos.to_le_bytes());
    eat(&(model_vocab as u64).to_le_bytes());
    format!("{h:016x}-{}", tokens.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_byte_level_tokens_decode() {
        let toks: Vec<String> = ["<|endoftext|>", "Ġhello", "a", "Ċ", "<0x41>"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let env = TokEnv::from_gguf_tokens(&toks, Some(&[3, 1, 1, 1, 6]), 0, Some(8)).unwrap();
        assert_eq!(env.token_bytes(1), b" hello");
        assert_eq!(env.token_bytes(3), b"\n");
        assert_eq!(env.token_bytes(4), b"A");
        assert_eq!(env.token_bytes(0)[0], 0xFF);
        assert_eq!((env.vocab_size(), env.model_vocab()), (5, 8));
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(TokEnv::from_token_bytes(vec![], 0, &[], None).is_err());
        assert!(TokEnv::from_token_bytes(vec![b"a".to_vec()], 3, &[], None).is_err());
        assert!(
            TokEnv::from_token_bytes(vec![b"a".to_vec(), b"b".to_vec()], 0, &[], Some(1)).is_err()
        );
    }
}
