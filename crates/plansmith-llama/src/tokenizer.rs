//! GPT-2 byte-level BPE tokenizer built from GGUF metadata (`tokenizer.ggml.*`), splitting
//! text the way llama.cpp does for the file's `tokenizer.ggml.pre`, with special (control)
//! tokens matched before BPE.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::{LlamaError, Result};
use crate::gguf::GgufFile;

/// Token type codes used by GGUF (`tokenizer.ggml.token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenKind {
    fn from_code(c: i64) -> Self {
        match c {
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Normal,
        }
    }

    /// Whether the token is matched verbatim in text before BPE (llama.cpp's special tokens).
    pub fn is_special(self) -> bool {
        matches!(self, Self::Control | Self::UserDefined | Self::Unknown)
    }
}

/// How text is split into words before BPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2 regex only (`gpt2`, `default`, `mpt`, `olmo`, `jais`).
    Gpt2,
    /// Every digit isolated, then the GPT-2 regex (`smollm`, `starcoder`, `refact`, `codeshell`,
    /// `command-r`).
    DigitsThenGpt2,
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for a `tokenizer.ggml.pre` value.
    pub fn from_gguf_name(name: &str) -> Result<Self> {
        match name {
            "gpt2" | "default" | "mpt" | "olmo" | "jais" => Ok(Self::Gpt2),
            "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" => Ok(Self::DigitsThenGpt2),
            other => Err(LlamaError::Unsupported(format!(
                "pre-tokenizer `{other}` (supported: gpt2, smollm, starcoder, refact, codeshell, command-r)"
            ))),
        }
    }
}

/// GPT-2's reversible byte -> unicode char mapping.
fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable =
            (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
        table[b as usize] = if printable {
            char::from_u32(b).unwrap_or('\0')
        } else {
            let c = char::from_u32(256 + n).unwrap_or('\0');
            n += 1;
            c
        };
    }
    table
}

fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"^\p{L}$").expect("static regex"));
    let mut buf = [0u8; 4];
    re.is_match(c.encode_utf8(&mut buf))
}

fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    c.is_numeric()
}

/// Split one fragment with llama.cpp's hand-written GPT-2 regex
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
/// pushing byte ranges into `out`.
fn split_gpt2(chars: &[(usize, char)], text_end: usize, out: &mut Vec<(usize, usize)>) {
    let n = chars.len();
    let at = |i: usize| -> Option<char> { chars.get(i).map(|&(_, c)| c) };
    let byte_at = |i: usize| -> usize { chars.get(i).map_or(text_end, |&(b, _)| b) };
    let letter = |i: usize| at(i).is_some_and(is_letter);
    let number = |i: usize| at(i).is_some_and(is_number);
    let space = |i: usize| at(i).is_some_and(char::is_whitespace);
    let other =
        |i: usize| at(i).is_some_and(|c| !(c.is_whitespace() || is_letter(c) || is_number(c)));
    let mut start = 0usize;
    let mut pos = 0usize;
    while pos < n {
        let c = chars[pos].1;
        if c == '\'' && pos + 1 < n {
            let c1 = chars[pos + 1].1;
            if matches!(c1, 's' | 't' | 'm' | 'd') {
                pos += 2;
                out.push((byte_at(start), byte_at(pos)));
                start = pos;
                continue;
            }
            if pos + 2 < n {
                let c2 = chars[pos + 2].1;
                if matches!((c1, c2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                    pos += 3;
                    out.push((byte_at(start), byte_at(pos)));
                    start = pos;
                    continue;
                }
            }
        }
        let look = if c == ' ' { pos + 1 } else { pos };
        if letter(look) {
            pos = look;
            while letter(pos) {
                pos += 1;
            }
        } else if number(look) {
            pos = look;
            while number(pos) {
                pos += 1;
            }
        } else if other(look) {
            pos = look;
            while other(pos) {
                pos += 1;
            }
        } else {
            let mut ws = 0;
            while space(pos + ws) {
                ws += 1;
            }
            if ws > 1 && pos + ws < n {
                pos += ws - 1;
            } else if ws > 0 {
                pos += ws;
            } else {
                pos += 1;
            }
        }
        out.push((byte_at(start), byte_at(pos)));
        start = pos;
    }
}

/// Pre-tokenize `text` into words (byte ranges), llama.cpp-style: each regex stage splits the
/// fragments of the previous stage independently.
pub fn pre_tokenize(pre: PreTokenizer, text: &str) -> Vec<&str> {
    let mut fragments: Vec<(usize, usize)> = Vec::new();
    match pre {
        PreTokenizer::Gpt2 => fragments.push((0, text.len())),
        PreTokenizer::DigitsThenGpt2 => {
            let mut start = 0;
            for (b, c) in text.char_indices() {
                if is_number(c) {
                    if b > start {
                        fragments.push((start, b));
                    }
                    fragments.push((b, b + c.len_utf8()));
                    start = b + c.len_utf8();
                }
            }
            if start < text.len() {
                fragments.push((start, text.len()));
            }
        }
    }
    let mut words = Vec::new();
    let mut ranges = Vec::new();
    for (s, e) in fragments {
        let frag = &text[s..e];
        let chars: Vec<(usize, char)> = frag.char_indices().collect();
        ranges.clear();
        split_gpt2(&chars, frag.len(), &mut ranges);
        for &(a, b) in &ranges {
            if b > a {
                words.push(&frag[a..b]);
            }
        }
    }
    words
}

/// A byte-level BPE tokenizer.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    /// Token text as stored in the vocabulary (byte-level encoded for normal tokens).
    tokens: Vec<String>,
    kinds: Vec<TokenKind>,
    /// Raw bytes each token stands for.
    bytes: Vec<Vec<u8>>,
    /// Symbol table: vocab strings first (same ids), then strings created by merges that are
    /// not in the vocabulary.
    sym_to_id: HashMap<String, u32>,
    sym_strings: Vec<String>,
    /// (left symbol, right symbol) -> (rank, merged symbol).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Special tokens matched verbatim, longest first.
    specials: Vec<(String, u32)>,
    byte_char: [char; 256],
    pre: PreTokenizer,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub add_bos: bool,
}

impl Tokenizer {
    /// Build from the GGUF metadata (`tokenizer.ggml.model` must be `gpt2`).
    pub fn from_gguf(g: &GgufFile) -> Result<Self> {
        let model = g.get_str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(LlamaError::Unsupported(format!(
                "tokenizer model `{model}` (only byte-level BPE `gpt2` is supported)"
            )));
        }
        let pre =
            PreTokenizer::from_gguf_name(g.opt_str("tokenizer.ggml.pre")?.unwrap_or("default"))?;
        let tokens = g.get_str_array("tokenizer.ggml.tokens")?;
        let kinds = if g.metadata().contains_key("tokenizer.ggml.token_type") {
            g.get_int_array("tokenizer.ggml.token_type")?
        } else {
            vec![1; tokens.len()]
        };
        if kinds.len() != tokens.len() {
            return Err(LlamaError::Tokenizer(format!(
                "tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
                kinds.len(),
                tokens.len()
            )));
        }
        let merges = g.get_str_array("tokenizer.ggml.merges")?;
        let id = |k: &str| -> Result<Option<u32>> { Ok(g.opt_usize(k)?.map(|v| v as u32)) };
        let mut t = Self::new(
            tokens,
            kinds.into_iter().map(TokenKind::from_code).collect(),
            &merges,
            pre,
        )?;
        t.bos = id("tokenizer.ggml.bos_token_id")?;
        t.eos = id("tokenizer.ggml.eos_token_id")?;
        t.eot = id("tokenizer.ggml.eot_token_id")?;
        t.add_bos = g.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false);
        for (name, v) in [("bos", t.bos), ("eos", t.eos), ("eot", t.eot)] {
            if let Some(v) = v {
                if v as usize >= t.tokens.len() {
                    return Err(LlamaError::Tokenizer(format!(
                        "{name} token id {v} is outside the vocabulary ({})",
                        t.tokens.len()
                    )));
                }
            }
        }
        Ok(t)
    }

    /// Build from a vocabulary, token kinds and merges (`"left right"` strings, rank order).
    pub fn new(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        merges: &[String],
        pre: PreTokenizer,
    ) -> Result<Self> {
        let byte_char = bytes_to_unicode();
        let mut char_byte: HashMap<char, u8> = HashMap::new();
        for (b, &c) in byte_char.iter().enumerate() {
            char_byte.insert(c, b as u8);
        }
        let mut sym_to_id = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            sym_to_id.entry(t.clone()).or_insert(i as u32);
        }
        let mut sym_strings = tokens.clone();
        let mut intern = |s: &str, sym_to_id: &mut HashMap<String, u32>| -> u32 {
            if let Some(&id) = sym_to_id.get(s) {
                return id;
            }
            let id = sym_strings.len() as u32;
            sym_strings.push(s.to_string());
            sym_to_id.insert(s.to_string(), id);
            id
        };
        let mut merge_map = HashMap::with_capacity(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            let split = m
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(i, _)| i);
            let Some(sp) = split else {
                return Err(LlamaError::Tokenizer(format!(
                    "merge {rank} `{m}` has no separating space"
                )));
            };
            let (l, r) = (&m[..sp], &m[sp + 1..]);
            let li = intern(l, &mut sym_to_id);
            let ri = intern(r, &mut sym_to_id);
            let joined = format!("{l}{r}");
            let ji = intern(&joined, &mut sym_to_id);
            merge_map.entry((li, ri)).or_insert((rank as u32, ji));
        }
        let bytes: Vec<Vec<u8>> = tokens
            .iter()
            .zip(&kinds)
            .map(|(t, k)| {
                if k.is_special() {
                    t.as_bytes().to_vec()
                } else {
                    let mut out = Vec::with_capacity(t.len());
                    for c in t.chars() {
                        match char_byte.get(&c) {
                            Some(&b) => out.push(b),
                            None => {
                                let mut buf = [0u8; 4];
                                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            }
                        }
                    }
                    out
                }
            })
            .collect();
        let mut specials: Vec<(String, u32)> = tokens
            .iter()
            .zip(&kinds)
            .enumerate()
            .filter(|(_, (t, k))| k.is_special() && !t.is_empty())
            .map(|(i, (t, _))| (t.clone(), i as u32))
            .collect();
        specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        Ok(Self {
            tokens,
            kinds,
            bytes,
            sym_to_id,
            sym_strings,
            merges: merge_map,
            specials,
            byte_char,
            pre,
            bos: None,
            eos: None,
            eot: None,
            add_bos: false,
        })
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// Raw bytes of a token (special tokens: their literal text).
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize).map(Vec::as_slice)
    }

    /// Raw bytes of every token, indexed by id (for building a token trie).
    pub fn all_token_bytes(&self) -> &[Vec<u8>] {
        &self.bytes
    }

    /// Vocabulary string of a token as stored in the GGUF.
    pub fn token_str(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// Kind of a token.
    pub fn token_kind(&self, id: u32) -> Option<TokenKind> {
        self.kinds.get(id as usize).copied()
    }

    /// Id of a special token by its literal text (e.g. `<|im_end|>`).
    pub fn special_id(&self, text: &str) -> Option<u32> {
        self.specials
            .iter()
            .find(|(t, _)| t == text)
            .map(|&(_, id)| id)
    }

    /// Tokens that end generation: EOS, EOT, and the ChatML / common end-of-turn markers present.
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = [self.eos, self.eot].into_iter().flatten().collect();
        for t in [
            "<|im_end|>",
            "<|eot_id|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
        ] {
            if let Some(id) = self.special_id(t) {
                v.push(id);
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Encode text. With `parse_special`, special-token texts are matched verbatim first
    /// (llama.cpp `parse_special = true`). BOS is added when `add_special` and the model asks for it.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            if let Some(b) = self.bos {
                out.push(b);
            }
        }
        // Fragments: Ok(text) or Err(special id).
        let mut frags: Vec<std::result::Result<&str, u32>> = vec![Ok(text)];
        if parse_special {
            for (sp, id) in &self.specials {
                let mut next = Vec::with_capacity(frags.len());
                for f in frags {
                    match f {
                        Ok(mut s) => {
                            while let Some(i) = s.find(sp.as_str()) {
                                if i > 0 {
                                    next.push(Ok(&s[..i]));
                                }
                                next.push(Err(*id));
                                s = &s[i + sp.len()..];
                            }
                            if !s.is_empty() {
                                next.push(Ok(s));
                            }
                        }
                        Err(id) => next.push(Err(id)),
                    }
                }
                frags = next;
            }
        }
        let mut word_buf = String::new();
        for f in frags {
            match f {
                Err(id) => out.push(id),
                Ok(s) => {
                    for w in pre_tokenize(self.pre, s) {
                        word_buf.clear();
                        for &b in w.as_bytes() {
                            word_buf.push(self.byte_char[b as usize]);
                        }
                        self.bpe_word(&word_buf, &mut out);
                    }
                }
            }
        }
        out
    }

    /// BPE one byte-level-encoded word: repeatedly merge the lowest-rank adjacent pair
    /// (leftmost first on ties).
    fn bpe_word(&self, word: &str, out: &mut Vec<u32>) {
        let mut syms: Vec<u32> = Vec::with_capacity(word.len());
        let mut buf = [0u8; 4];
        for c in word.chars() {
            let s = c.encode_utf8(&mut buf);
            match self.sym_to_id.get(&*s) {
                Some(&id) => syms.push(id),
                None => syms.push(u32::MAX), // unknown char: never merges
            }
        }
        loop {
            let mut best: Option<(u32, usize, u32)> = None;
            for i in 0..syms.len().saturating_sub(1) {
                if let Some(&(rank, joined)) = self.merges.get(&(syms[i], syms[i + 1])) {
                    if best.is_none_or_greater(rank) {
                        best = Some((rank, i, joined));
                    }
                }
            }
            let Some((_, i, joined)) = best else { break };
            syms[i] = joined;
            syms.remove(i + 1);
        }
        let vocab = self.tokens.len() as u32;
        for (k, &s) in syms.iter().enumerate() {
            if s < vocab {
                out.push(s);
            } else {
                // Not a vocabulary entry: fall back to single-byte tokens (llama.cpp behaviour).
                let text: String = if s == u32::MAX {
                    word.chars().nth(k).map(String::from).unwrap_or_default()
                } else {
                    self.sym_strings[s as usize].clone()
                };
                for b in text.bytes() {
                    let one = [b];
                    if let Ok(st) = std::str::from_utf8(&one) {
                        if let Some(&id) = self.sym_to_id.get(st) {
                            if id < vocab {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Decode ids to bytes; special tokens are rendered as their text unless `skip_special`.
    pub fn decode_bytes(&self, ids: &[u32], skip_special: bool) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for &id in ids {
            let b = self
                .bytes
                .get(id as usize)
                .ok_or(LlamaError::TokenOutOfRange {
                    id,
                    vocab: self.tokens.len(),
                })?;
            if skip_special && self.kinds[id as usize].is_special() {
                continue;
            }
            out.extend_from_slice(b);
        }
        Ok(out)
    }

    /// Decode ids to a string (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, skip_special)?).into_owned())
    }
}

trait BestRank {
    fn is_none_or_greater(&self, rank: u32) -> bool;
}

impl BestRank for Option<(u32, usize, u32)> {
    fn is_none_or_greater(&self, rank: u32) -> bool {
        match self {
            None => true,
            Some((r, _, _)) => rank < *r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_tokenize_smollm_splits_digits_and_whitespace() {
        let w = pre_tokenize(PreTokenizer::DigitsThenGpt2, "Hello world 123  x\n\n  y's");
        assert_eq!(
            w,
            vec!["Hello", " world", " ", "1", "2", "3", " ", " x", "\n\n ", " y", "'s"]
        );
    }

    #[test]
    fn pre_tokenize_gpt2_trailing_space_run() {
        let w = pre_tokenize(PreTokenizer::Gpt2, "a   ");
        assert_eq!(w, vec!["a", "   "]);
        let w = pre_tokenize(PreTokenizer::Gpt2, "a ... !?");
        assert_eq!(w, vec!["a", " ...", " !?"]);
    }
}
