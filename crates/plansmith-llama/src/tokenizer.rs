//! Tokenizers built from GGUF metadata (`tokenizer.ggml.*`), with special (control) tokens
//! matched before the model's algorithm: GPT-2 byte-level BPE (`gpt2`), splitting text the way
//! llama.cpp does for the file's `tokenizer.ggml.pre`, or SentencePiece-style merging by score
//! (`llama`: Gemma, Llama 2; see [`crate::spm`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::error::{LlamaError, Result};
use crate::gguf::GgufFile;
use crate::spm::{Spm, SPACE_MARK};

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
    /// The Llama-3 split regex (`llama-bpe`): case-insensitive contractions, one optional
    /// non-letter before a letter run, numbers in groups of up to three digits, newlines kept
    /// with the whitespace before them.
    Llama3,
    /// The Qwen2 split regex (`qwen2`): as [`PreTokenizer::Llama3`] but every digit isolated.
    Qwen2,
}

/// The GPT-2 split regex as written in `tokenizer.json` files.
pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// The Llama-3 split regex as written in `tokenizer.json` files.
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen2 split regex as written in `tokenizer.json` files.
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for a `tokenizer.ggml.pre` value.
    pub fn from_gguf_name(name: &str) -> Result<Self> {
        match name {
            "gpt2" | "default" | "mpt" | "olmo" | "jais" => Ok(Self::Gpt2),
            "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" => Ok(Self::DigitsThenGpt2),
            "llama-bpe" | "llama3" => Ok(Self::Llama3),
            "qwen2" => Ok(Self::Qwen2),
            other => Err(LlamaError::Unsupported(format!(
                "pre-tokenizer `{other}` (supported: gpt2, smollm, starcoder, refact, codeshell, command-r, llama-bpe, qwen2)"
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

/// Split one fragment with the Llama-3 / Qwen2 regex
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// (`D` = `max_digits`: 3 for Llama-3, 1 for Qwen2), written out by hand because the `regex`
/// crate has no look-ahead. Alternatives are tried in order at each position, as a
/// backtracking regex engine does.
fn split_llama3(
    chars: &[(usize, char)],
    text_end: usize,
    max_digits: usize,
    out: &mut Vec<(usize, usize)>,
) {
    let n = chars.len();
    let at = |i: usize| -> Option<char> { chars.get(i).map(|&(_, c)| c) };
    let byte_at = |i: usize| -> usize { chars.get(i).map_or(text_end, |&(b, _)| b) };
    let letter = |i: usize| at(i).is_some_and(is_letter);
    let number = |i: usize| at(i).is_some_and(is_number);
    let space = |i: usize| at(i).is_some_and(char::is_whitespace);
    let crlf = |i: usize| matches!(at(i), Some('\r' | '\n'));
    let other =
        |i: usize| at(i).is_some_and(|c| !(c.is_whitespace() || is_letter(c) || is_number(c)));
    let mut pos = 0usize;
    while pos < n {
        let start = pos;
        let c = chars[pos].1;
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if c == '\'' && pos + 1 < n {
            let c1 = chars[pos + 1].1.to_ascii_lowercase();
            let c2 = at(pos + 2).map(|c| c.to_ascii_lowercase());
            let len = if matches!(c1, 's' | 't' | 'm' | 'd') {
                2
            } else if matches!(
                (c1, c2),
                ('r', Some('e')) | ('v', Some('e')) | ('l', Some('l'))
            ) {
                3
            } else {
                0
            };
            if len > 0 {
                pos += len;
                out.push((byte_at(start), byte_at(pos)));
                continue;
            }
        }
        if letter(pos) || (!crlf(pos) && !number(pos) && letter(pos + 1)) {
            // [^\r\n\p{L}\p{N}]?\p{L}+
            pos += 1;
            while letter(pos) {
                pos += 1;
            }
        } else if number(pos) {
            // \p{N}{1,D}
            let mut k = 0;
            while k < max_digits && number(pos) {
                pos += 1;
                k += 1;
            }
        } else if other(pos) || (c == ' ' && other(pos + 1)) {
            // ' '?[^\s\p{L}\p{N}]+[\r\n]*
            pos += 1;
            while other(pos) {
                pos += 1;
            }
            while crlf(pos) {
                pos += 1;
            }
        } else {
            // c is whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+
            let mut end = pos;
            while space(end) {
                end += 1;
            }
            if let Some(i) = (pos..end).rev().find(|&i| crlf(i)) {
                pos = i + 1;
            } else if end == n || end - pos == 1 {
                pos = end;
            } else {
                pos = end - 1;
            }
        }
        out.push((byte_at(start), byte_at(pos)));
    }
}

/// Pre-tokenize `text` into words (byte ranges), llama.cpp-style: each regex stage splits the
/// fragments of the previous stage independently.
pub fn pre_tokenize(pre: PreTokenizer, text: &str) -> Vec<&str> {
    let mut fragments: Vec<(usize, usize)> = Vec::new();
    match pre {
        PreTokenizer::Gpt2 | PreTokenizer::Llama3 | PreTokenizer::Qwen2 => {
            fragments.push((0, text.len()))
        }
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
        match pre {
            PreTokenizer::Gpt2 | PreTokenizer::DigitsThenGpt2 => {
                split_gpt2(&chars, frag.len(), &mut ranges)
            }
            PreTokenizer::Llama3 => split_llama3(&chars, frag.len(), 3, &mut ranges),
            PreTokenizer::Qwen2 => split_llama3(&chars, frag.len(), 1, &mut ranges),
        }
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
    /// A whole pre-tokenized word that is itself a vocabulary entry is emitted as is, without
    /// running merges (`ignore_merges` in `tokenizer.json`; llama.cpp does this for Llama-3).
    pub ignore_merges: bool,
    /// SentencePiece-style merging by score instead of byte-level BPE.
    spm: Option<Spm>,
}

impl Tokenizer {
    /// Build from the GGUF metadata (`tokenizer.ggml.model`: `gpt2` or `llama`).
    pub fn from_gguf(g: &GgufFile) -> Result<Self> {
        let model = g.get_str("tokenizer.ggml.model")?;
        if model != "gpt2" && model != "llama" {
            return Err(LlamaError::Unsupported(format!(
                "tokenizer model `{model}` (supported: gpt2 (byte-level BPE), llama \
                 (SentencePiece))"
            )));
        }
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
        let kinds: Vec<TokenKind> = kinds.into_iter().map(TokenKind::from_code).collect();
        let mut t = if model == "llama" {
            let scores = g.get_f32_array("tokenizer.ggml.scores")?;
            let prefix = g
                .opt_bool("tokenizer.ggml.add_space_prefix")?
                .unwrap_or(true);
            Self::sentencepiece(tokens, kinds, scores, prefix)?
        } else {
            let pre = PreTokenizer::from_gguf_name(
                g.opt_str("tokenizer.ggml.pre")?.unwrap_or("default"),
            )?;
            let merges = g.get_str_array("tokenizer.ggml.merges")?;
            let mut t = Self::new(tokens, kinds, &merges, pre)?;
            t.ignore_merges = pre == PreTokenizer::Llama3;
            t
        };
        let id = |k: &str| -> Result<Option<u32>> { Ok(g.opt_usize(k)?.map(|v| v as u32)) };
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

    /// A SentencePiece-style tokenizer from a vocabulary, token kinds and merge scores.
    pub fn sentencepiece(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        scores: Vec<f32>,
        add_space_prefix: bool,
    ) -> Result<Self> {
        if scores.len() != tokens.len() {
            // A short score list would silently leave some pieces unmergeable.
            return Err(LlamaError::Tokenizer(format!(
                "tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}",
                scores.len(),
                tokens.len()
            )));
        }
        let mut t = Self::from_pairs(tokens, kinds, &[], PreTokenizer::Gpt2)?;
        t.bytes = t
            .tokens
            .iter()
            .zip(&t.kinds)
            .map(|(text, k)| match k {
                TokenKind::Control | TokenKind::Unknown => text.as_bytes().to_vec(),
                _ => Spm::token_bytes(text),
            })
            .collect();
        t.spm = Some(Spm::new(&t.tokens, scores, add_space_prefix));
        Ok(t)
    }

    /// Build from a vocabulary, token kinds and merges (`"left right"` strings, rank order).
    pub fn new(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        merges: &[String],
        pre: PreTokenizer,
    ) -> Result<Self> {
        let mut pairs = Vec::with_capacity(merges.len());
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
            pairs.push((m[..sp].to_string(), m[sp + 1..].to_string()));
        }
        Self::from_pairs(tokens, kinds, &pairs, pre)
    }

    /// Build from a vocabulary, token kinds and merges as `(left, right)` pairs in rank order.
    pub fn from_pairs(
        tokens: Vec<String>,
        kinds: Vec<TokenKind>,
        merges: &[(String, String)],
        pre: PreTokenizer,
    ) -> Result<Self> {
        if kinds.len() != tokens.len() {
            return Err(LlamaError::Tokenizer(format!(
                "{} token kinds for {} tokens",
                kinds.len(),
                tokens.len()
            )));
        }
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
        for (rank, (l, r)) in merges.iter().enumerate() {
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
            ignore_merges: false,
            spm: None,
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
    /// (llama.cpp `parse_special = true`); without it, only user-defined tokens are (Qwen's
    /// `<tool_call>`: llama.cpp always matches those, as Hugging Face does its non-special
    /// added tokens). BOS is added when `add_special` and the model asks for it.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if add_special && self.add_bos {
            if let Some(b) = self.bos {
                out.push(b);
            }
        }
        // Fragments: Ok(text) or Err(special id).
        let mut frags: Vec<std::result::Result<&str, u32>> = vec![Ok(text)];
        {
            for (sp, id) in &self.specials {
                if !parse_special && self.kinds[*id as usize] != TokenKind::UserDefined {
                    continue;
                }
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
        if let Some(spm) = &self.spm {
            let mut after_special = true;
            for (i, f) in frags.into_iter().enumerate() {
                match f {
                    Err(id) => out.push(id),
                    Ok(s) => spm.encode(&self.sym_to_id, s, after_special, i == 0, &mut out),
                }
                after_special = f.is_err();
            }
            return out;
        }
        let mut word_buf = String::new();
        for f in frags {
            match f {
                Err(id) => out.push(id),
                Ok(s) => {
                    for w in pre_tokenize(self.pre, s) {
                        // Merging is quadratic in a word's length: a word longer than any real
                        // one (found by fuzzing: 12 KB of "thethe…" took 3 s) is merged in
                        // pieces, which bounds the cost of hostile input at linear.
                        for piece in word_pieces(w, MAX_WORD_BYTES) {
                            word_buf.clear();
                            for &b in piece.as_bytes() {
                                word_buf.push(self.byte_char[b as usize]);
                            }
                            self.bpe_word(&word_buf, &mut out);
                        }
                    }
                }
            }
        }
        out
    }

    /// BPE one byte-level-encoded word: repeatedly merge the lowest-rank adjacent pair
    /// (leftmost first on ties).
    fn bpe_word(&self, word: &str, out: &mut Vec<u32>) {
        if self.ignore_merges {
            if let Some(&id) = self.sym_to_id.get(word) {
                if (id as usize) < self.tokens.len() && !self.kinds[id as usize].is_special() {
                    out.push(id);
                    return;
                }
            }
        }
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

    /// Decode ids to bytes; control tokens are rendered as their text unless `skip_special`
    /// (user-defined ones, such as Qwen's `<tool_call>` or Gemma's newline runs, are text the
    /// model writes and always rendered, as llama.cpp renders them).
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
            if skip_special
                && matches!(
                    self.kinds[id as usize],
                    TokenKind::Control | TokenKind::Unknown | TokenKind::Unused
                )
            {
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

/// What a `tokenizer.json` `pre_tokenizer` section means, or why it is not supported.
/// Longest word merged whole; longer ones (never seen in text) are merged in pieces.
const MAX_WORD_BYTES: usize = 256;

/// `word` in pieces of at most `max` bytes, cut at character boundaries.
fn word_pieces(word: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut == 0 {
            // A single character longer than `max` bytes cannot happen (UTF-8 is at most 4).
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// Whether a SentencePiece-style `tokenizer.json` normalizer prepends `▁` to the text (Llama 2:
/// `Prepend("▁")` then `Replace(" ", "▁")`) or not (Gemma: the `Replace` alone). Other
/// normalizers are refused.
fn spm_normalizer(n: &serde_json::Value) -> std::result::Result<bool, String> {
    use serde_json::Value;
    let mark = SPACE_MARK.to_string();
    let is_replace = |x: &Value| {
        x.get("type").and_then(Value::as_str) == Some("Replace")
            && x.pointer("/pattern/String").and_then(Value::as_str) == Some(" ")
            && x.get("content").and_then(Value::as_str) == Some(mark.as_str())
    };
    let is_prepend = |x: &Value| {
        x.get("type").and_then(Value::as_str) == Some("Prepend")
            && x.get("prepend").and_then(Value::as_str) == Some(mark.as_str())
    };
    let steps: Vec<&Value> = match n.get("type").and_then(Value::as_str) {
        Some("Sequence") => n
            .get("normalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some(_) => vec![n],
        None => Vec::new(),
    };
    match steps.as_slice() {
        [r] if is_replace(r) => Ok(false),
        [p, r] if is_prepend(p) && is_replace(r) => Ok(true),
        _ => Err(format!(
            "{n} (with byte_fallback: Replace(\" \", \"▁\"), optionally after Prepend(\"▁\"))"
        )),
    }
}

/// `(prepend ▁, only at the input's start)` of a `Metaspace` pre-tokenizer that replaces
/// spaces by `▁` without splitting on them (`split: false`), by its `prepend_scheme`.
fn metaspace_prefix(m: &serde_json::Value) -> std::result::Result<(bool, bool), String> {
    use serde_json::Value;
    if m.get("replacement").and_then(Value::as_str) != Some(&SPACE_MARK.to_string()) {
        return Err(format!("Metaspace with replacement {}", m["replacement"]));
    }
    if m.get("split").and_then(Value::as_bool) != Some(false) {
        return Err("Metaspace that splits on spaces (only split: false)".into());
    }
    match m.get("prepend_scheme").and_then(Value::as_str) {
        Some("first") => Ok((true, true)),
        Some("never") => Ok((false, false)),
        other => Err(format!(
            "Metaspace with prepend_scheme {other:?} (first or never)"
        )),
    }
}

/// A `Split` on the string `" "` (Gemma's pre-tokenizer).
fn is_space_split(p: &serde_json::Value) -> bool {
    use serde_json::Value;
    p.get("type").and_then(Value::as_str) == Some("Split")
        && p.pointer("/pattern/String").and_then(Value::as_str) == Some(" ")
        && p.get("invert").and_then(Value::as_bool) != Some(true)
}

/// SentencePiece merge scores from a `tokenizer.json`'s ranked merges: a piece scores minus the
/// rank of the first merge that makes it (earlier merges first, as the converters rank pieces
/// by their SentencePiece score), and a piece no merge makes is never merged into.
fn spm_scores(
    tokens: &[String],
    merges: &[(String, String)],
) -> std::result::Result<Vec<f32>, String> {
    let index: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let mut scores = vec![f32::NEG_INFINITY; tokens.len()];
    for (rank, (l, r)) in merges.iter().enumerate() {
        let joined = format!("{l}{r}");
        let id = *index.get(joined.as_str()).ok_or_else(|| {
            format!("model.merges[{rank}] makes {joined:?}, which is not in the vocabulary")
        })?;
        if scores[id] == f32::NEG_INFINITY {
            scores[id] = -(rank as f32);
        }
    }
    Ok(scores)
}

fn pre_from_hf(v: &serde_json::Value) -> std::result::Result<PreTokenizer, String> {
    use serde_json::Value;
    let ty = |v: &Value| {
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let flag =
        |v: &Value, k: &str, default: bool| v.get(k).and_then(Value::as_bool).unwrap_or(default);
    // ByteLevel with or without its built-in GPT-2 regex; a prefix space is not supported.
    let byte_level = |v: &Value| -> std::result::Result<bool, String> {
        if ty(v) != "ByteLevel" {
            return Err(format!("`{}` pre-tokenizer", ty(v)));
        }
        if flag(v, "add_prefix_space", false) {
            return Err("ByteLevel with add_prefix_space = true".into());
        }
        Ok(flag(v, "use_regex", true))
    };
    let split = |v: &Value| -> std::result::Result<PreTokenizer, String> {
        let pat = v
            .get("pattern")
            .and_then(|p| p.get("Regex"))
            .and_then(Value::as_str)
            .ok_or_else(|| "Split without a `Regex` pattern".to_string())?;
        let behavior = v.get("behavior").and_then(Value::as_str).unwrap_or("");
        if behavior != "Isolated" || flag(v, "invert", false) {
            return Err(format!("Split with behavior `{behavior}` / invert"));
        }
        match pat {
            GPT2_PATTERN => Ok(PreTokenizer::Gpt2),
            LLAMA3_PATTERN => Ok(PreTokenizer::Llama3),
            QWEN2_PATTERN => Ok(PreTokenizer::Qwen2),
            other => Err(format!("Split regex {other:?}")),
        }
    };
    match ty(v).as_str() {
        "ByteLevel" => {
            if byte_level(v)? {
                Ok(PreTokenizer::Gpt2)
            } else {
                Err("ByteLevel without a split regex".into())
            }
        }
        "Sequence" => {
            let items: Vec<&Value> = v
                .get("pretokenizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            match items.as_slice() {
                [d, b] if ty(d) == "Digits" => {
                    if !flag(d, "individual_digits", false) {
                        return Err("Digits with individual_digits = false".into());
                    }
                    if byte_level(b)? {
                        Ok(PreTokenizer::DigitsThenGpt2)
                    } else {
                        Err("Digits then ByteLevel without a split regex".into())
                    }
                }
                [sp, b] if ty(sp) == "Split" => {
                    let pre = split(sp)?;
                    if byte_level(b)? {
                        return Err("Split then ByteLevel with its own regex".into());
                    }
                    Ok(pre)
                }
                [b] => pre_from_hf(b),
                _ => Err(format!("Sequence of {} pre-tokenizers", items.len())),
            }
        }
        "Split" => Err("Split without a ByteLevel step".into()),
        "" => Err("missing pre_tokenizer".into()),
        other => Err(format!("`{other}` pre-tokenizer")),
    }
}

fn pre_to_hf(pre: PreTokenizer) -> serde_json::Value {
    use serde_json::json;
    let bl = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    match pre {
        PreTokenizer::Gpt2 => bl(true),
        PreTokenizer::DigitsThenGpt2 => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, bl(true)]}),
        PreTokenizer::Llama3 | PreTokenizer::Qwen2 => {
            let pat = if pre == PreTokenizer::Llama3 {
                LLAMA3_PATTERN
            } else {
                QWEN2_PATTERN
            };
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": false},
                bl(false)]})
        }
    }
}

impl Tokenizer {
    /// Read a Hugging Face `tokenizer.json` (byte-level BPE only).
    pub fn from_hf_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| LlamaError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| LlamaError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        Self::from_hf_json(&v).map_err(|e| match e {
            LlamaError::Tokenizer(m) => LlamaError::Tokenizer(format!("{}: {m}", path.display())),
            LlamaError::Unsupported(m) => {
                LlamaError::Unsupported(format!("{}: {m}", path.display()))
            }
            e => e,
        })
    }

    /// Build from a parsed `tokenizer.json`: `model.type == "BPE"` with byte-level pre-tokenizer
    /// (GPT-2, digits + GPT-2, Llama-3 or Qwen2 split regex), `vocab`, `merges` as `"a b"`
    /// strings or `["a", "b"]` pairs, `added_tokens` matched verbatim before BPE
    /// (`special: true` -> [`TokenKind::Control`], else [`TokenKind::UserDefined`]).
    /// `bos` / `eos` / `add_bos` come from the `post_processor` when it adds a leading special
    /// token; set them from `tokenizer_config.json` afterwards if needed.
    ///
    /// The `NFC` normalizer is accepted and not applied (llama.cpp does the same); any other
    /// normalizer, BPE option or pre-tokenizer is a typed `Unsupported` error.
    ///
    /// With `byte_fallback: true` the file is SentencePiece-style BPE (Gemma, Llama 2, Mistral):
    /// spaces become `▁` (`Replace`, after `Prepend("▁")` for legacy Llama, or a `Metaspace`
    /// pre-tokenizer with `prepend_scheme` `first` / `never`), characters the vocabulary lacks
    /// fall back to `<0xXX>` tokens, and merges run in the SentencePiece tokenizer, each piece
    /// scored by the rank of the first merge that makes it (the converters rank merges by the
    /// pieces' SentencePiece scores).
    pub fn from_hf_json(v: &serde_json::Value) -> Result<Self> {
        use serde_json::Value;
        let unsupported = |m: String| LlamaError::Unsupported(format!("tokenizer.json: {m}"));
        let bad = |m: String| LlamaError::Tokenizer(format!("tokenizer.json: {m}"));
        let model = v
            .get("model")
            .ok_or_else(|| bad("missing `model`".into()))?;
        let mty = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
        if mty != "BPE" {
            return Err(unsupported(format!(
                "model type `{mty}` (only byte-level BPE is supported)"
            )));
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if let Some(s) = model.get(key).and_then(Value::as_str) {
                if !s.is_empty() {
                    return Err(unsupported(format!("model.{key} = {s:?}")));
                }
            }
        }
        let sentencepiece = model.get("byte_fallback").and_then(Value::as_bool) == Some(true);
        if let Some(d) = model.get("dropout").and_then(Value::as_f64) {
            if d != 0.0 {
                return Err(unsupported(format!("model.dropout = {d}")));
            }
        }
        // SentencePiece-style (byte fallback): spaces become `▁` (and Llama 2 prepends one);
        // byte-level BPE: no normalization beyond NFC.
        let (mut space_prefix, mut first_only) = (false, false);
        let pre = if sentencepiece {
            let normalizer = v.get("normalizer").unwrap_or(&Value::Null);
            let metaspace = v
                .get("pre_tokenizer")
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("Metaspace"));
            match metaspace {
                // Non-legacy Llama: no normalizer, `Metaspace` writes the spaces as `▁`.
                Some(m) if normalizer.is_null() => {
                    (space_prefix, first_only) = metaspace_prefix(m)
                        .map_err(|e| unsupported(format!("pre_tokenizer: {e}")))?;
                }
                _ => {
                    space_prefix = spm_normalizer(normalizer)
                        .map_err(|m| unsupported(format!("normalizer: {m}")))?;
                }
            }
            match v.get("pre_tokenizer") {
                None | Some(Value::Null) => {}
                Some(_) if metaspace.is_some() && normalizer.is_null() => {}
                // Splitting on spaces after they all became `▁` splits nothing.
                Some(p) if is_space_split(p) => {}
                Some(p) => {
                    return Err(unsupported(format!(
                        "pre_tokenizer `{}` with byte_fallback (expected none, or a split on \
                         \" \", as Gemma's and Llama 2's tokenizer.json have)",
                        p.get("type").and_then(Value::as_str).unwrap_or("?")
                    )))
                }
            }
            PreTokenizer::Gpt2
        } else {
            match v.get("normalizer") {
                None | Some(Value::Null) => {}
                Some(n) if n.get("type").and_then(Value::as_str) == Some("NFC") => {}
                Some(n) => {
                    return Err(unsupported(format!(
                        "normalizer `{}`",
                        n.get("type").and_then(Value::as_str).unwrap_or("?")
                    )))
                }
            }
            pre_from_hf(v.get("pre_tokenizer").unwrap_or(&Value::Null))
                .map_err(|m| unsupported(format!("pre_tokenizer: {m}")))?
        };
        let vocab = model
            .get("vocab")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("model.vocab must be an object".into()))?;
        let mut slots: Vec<Option<(String, TokenKind)>> = Vec::new();
        let mut put = |id: u64, text: &str, kind: TokenKind, what: &str| -> Result<()> {
            let id = usize::try_from(id)
                .ok()
                .filter(|&i| i < (1 << 24))
                .ok_or_else(|| bad(format!("{what}: id {id} is too large")))?;
            if slots.len() <= id {
                slots.resize(id + 1, None);
            }
            match &mut slots[id] {
                Some((t, k)) if t == text => *k = kind,
                Some((t, _)) => {
                    return Err(bad(format!("{what}: id {id} is both {t:?} and {text:?}")))
                }
                slot => *slot = Some((text.to_string(), kind)),
            }
            Ok(())
        };
        for (text, id) in vocab {
            let id = id
                .as_u64()
                .ok_or_else(|| bad(format!("model.vocab[{text:?}] is not an id")))?;
            put(id, text, TokenKind::Normal, "model.vocab")?;
        }
        if let Some(added) = v.get("added_tokens").and_then(Value::as_array) {
            for (i, a) in added.iter().enumerate() {
                let id = a.get("id").and_then(Value::as_u64);
                let text = a.get("content").and_then(Value::as_str);
                let (Some(id), Some(text)) = (id, text) else {
                    return Err(bad(format!("added_tokens[{i}] needs `id` and `content`")));
                };
                for flag in ["lstrip", "rstrip", "single_word"] {
                    if a.get(flag).and_then(Value::as_bool) == Some(true) {
                        return Err(unsupported(format!(
                            "added_tokens[{i}] {text:?} with {flag} = true"
                        )));
                    }
                }
                let kind = if a.get("special").and_then(Value::as_bool).unwrap_or(false) {
                    TokenKind::Control
                } else {
                    TokenKind::UserDefined
                };
                put(id, text, kind, &format!("added_tokens[{i}]"))?;
            }
        }
        let (tokens, mut kinds): (Vec<String>, Vec<TokenKind>) = slots
            .into_iter()
            .map(|s| s.unwrap_or((String::new(), TokenKind::Unused)))
            .unzip();
        let merges_v = model
            .get("merges")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("model.merges must be an array".into()))?;
        let mut merges = Vec::with_capacity(merges_v.len());
        for (i, m) in merges_v.iter().enumerate() {
            let pair = match m {
                Value::String(s) => s
                    .char_indices()
                    .skip(1)
                    .find(|&(_, c)| c == ' ')
                    .map(|(sp, _)| (s[..sp].to_string(), s[sp + 1..].to_string())),
                Value::Array(a) => match a.as_slice() {
                    [Value::String(l), Value::String(r)] => Some((l.clone(), r.clone())),
                    _ => None,
                },
                _ => None,
            };
            merges.push(pair.ok_or_else(|| {
                bad(format!(
                    "model.merges[{i}] is not \"a b\" or [\"a\", \"b\"]"
                ))
            })?);
        }
        let mut t = if sentencepiece {
            if let Some(unk) = model.get("unk_token").and_then(Value::as_str) {
                if let Some(i) = tokens.iter().position(|t| t == unk) {
                    if kinds[i] == TokenKind::Normal {
                        kinds[i] = TokenKind::Unknown;
                    }
                }
            }
            let scores = spm_scores(&tokens, &merges).map_err(bad)?;
            let mut t = Self::sentencepiece(tokens, kinds, scores, space_prefix)?;
            if let Some(spm) = &mut t.spm {
                spm.prefix_first_only = first_only;
            }
            t
        } else {
            Self::from_pairs(tokens, kinds, &merges, pre)?
        };
        t.ignore_merges = model
            .get("ignore_merges")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if sentencepiece && t.ignore_merges {
            return Err(unsupported("model.ignore_merges with byte_fallback".into()));
        }
        // A post-processor that puts a special token first means "add BOS".
        if let Some(first) = v
            .get("post_processor")
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("TemplateProcessing"))
            .and_then(|p| p.get("single"))
            .and_then(Value::as_array)
            .and_then(|s| s.first())
            .and_then(|f| f.get("SpecialToken"))
            .and_then(|f| f.get("id"))
            .and_then(Value::as_str)
        {
            let id = t
                .lookup(first)
                .ok_or_else(|| bad(format!("post_processor adds unknown token {first:?}")))?;
            t.bos = Some(id);
            t.add_bos = true;
        }
        Ok(t)
    }

    /// Id of a token by its vocabulary string (special or not).
    pub fn lookup(&self, text: &str) -> Option<u32> {
        self.special_id(text).or_else(|| {
            self.sym_to_id
                .get(text)
                .copied()
                .filter(|&id| (id as usize) < self.tokens.len())
        })
    }

    /// The pre-tokenizer.
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        self.pre
    }

    /// This tokenizer as a Hugging Face `tokenizer.json` document (byte-level BPE, or BPE with byte fallback for a SentencePiece-style one), which
    /// [`Tokenizer::from_hf_json`] reads back to the same ids. Errors when two ids share a
    /// vocabulary string (a JSON object cannot hold both).
    pub fn to_hf_json(&self) -> Result<serde_json::Value> {
        use serde_json::{json, Map, Value};
        let mut vocab = Map::with_capacity(self.tokens.len());
        let mut added = Vec::new();
        for (i, (t, k)) in self.tokens.iter().zip(&self.kinds).enumerate() {
            if *k == TokenKind::Unused && t.is_empty() {
                continue;
            }
            if vocab.insert(t.clone(), json!(i)).is_some() {
                return Err(LlamaError::Unsupported(format!(
                    "token string {t:?} appears twice in the vocabulary; tokenizer.json cannot hold it"
                )));
            }
            if k.is_special() {
                added.push(
                    json!({"id": i, "content": t, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false,
                    "special": *k != TokenKind::UserDefined}),
                );
            }
        }
        if let Some(spm) = &self.spm {
            return Ok(self.spm_hf_json(spm, vocab, added));
        }
        let mut ranked: Vec<(u32, u32, u32)> = self
            .merges
            .iter()
            .map(|(&(l, r), &(rank, _))| (rank, l, r))
            .collect();
        ranked.sort_unstable();
        let merges: Vec<Value> = ranked
            .into_iter()
            .map(|(_, l, r)| json!([self.sym_strings[l as usize], self.sym_strings[r as usize]]))
            .collect();
        Ok(hf_document(HfParts {
            added,
            normalizer: Value::Null,
            pre_tokenizer: pre_to_hf(self.pre),
            post_processor: self.hf_post_processor(),
            decoder: json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}),
            model: json!({"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": self.ignore_merges,
                "vocab": vocab, "merges": merges}),
        }))
    }

    /// The `tokenizer.json` of a SentencePiece-style tokenizer: BPE with byte fallback, its
    /// merges from the piece scores ([`Spm::to_hf`]).
    fn spm_hf_json(
        &self,
        spm: &Spm,
        vocab: serde_json::Map<String, serde_json::Value>,
        added: Vec<serde_json::Value>,
    ) -> serde_json::Value {
        use serde_json::json;
        let hf = spm.to_hf(&self.tokens, &self.kinds);
        let merges: Vec<serde_json::Value> = hf
            .merges
            .iter()
            .map(|&(l, r)| json!([self.tokens[l as usize], self.tokens[r as usize]]))
            .collect();
        let unk = self
            .kinds
            .iter()
            .position(|&k| k == TokenKind::Unknown)
            .map(|i| self.tokens[i].clone());
        hf_document(HfParts {
            added,
            normalizer: hf.normalizer,
            pre_tokenizer: hf.pre_tokenizer,
            post_processor: self.hf_post_processor(),
            decoder: hf.decoder,
            model: json!({"type": "BPE", "dropout": null, "unk_token": unk,
                "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true,
                "byte_fallback": true, "ignore_merges": false,
                "vocab": vocab, "merges": merges}),
        })
    }

    /// BOS before every text where this tokenizer adds one (`TemplateProcessing`); otherwise
    /// nothing added.
    fn hf_post_processor(&self) -> serde_json::Value {
        use serde_json::json;
        match (self.add_bos, self.bos) {
            (true, Some(b)) => {
                let bt = &self.tokens[b as usize];
                json!({"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bt, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": bt, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": bt, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {bt.clone(): {"id": bt, "ids": [b], "tokens": [bt]}}})
            }
            // Byte-level BPE keeps its offsets processor; SentencePiece has none.
            _ if self.spm.is_some() => serde_json::Value::Null,
            _ => {
                json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
            }
        }
    }
}

/// The parts that differ between the byte-level and the SentencePiece-style `tokenizer.json`.
struct HfParts {
    added: Vec<serde_json::Value>,
    normalizer: serde_json::Value,
    pre_tokenizer: serde_json::Value,
    post_processor: serde_json::Value,
    decoder: serde_json::Value,
    model: serde_json::Value,
}

/// A `tokenizer.json` document (Hugging Face tokenizers' format, version 1.0).
fn hf_document(p: HfParts) -> serde_json::Value {
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": p.added,
        "normalizer": p.normalizer,
        "pre_tokenizer": p.pre_tokenizer,
        "post_processor": p.post_processor,
        "decoder": p.decoder,
        "model": p.model,
    })
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
    fn user_defined_tokens_match_without_parse_special_control_ones_do_not() {
        // GPT-2 byte-level vocabulary: every byte, then a control and a user-defined token.
        let byte_chars: Vec<String> = bytes_to_unicode().iter().map(|c| c.to_string()).collect();
        let mut tokens = byte_chars.clone();
        let mut kinds = vec![TokenKind::Normal; tokens.len()];
        tokens.push("<|im_end|>".into());
        kinds.push(TokenKind::Control);
        tokens.push("<tool_call>".into());
        kinds.push(TokenKind::UserDefined);
        let t = Tokenizer::new(tokens, kinds, &[], PreTokenizer::Gpt2).unwrap();
        let (end, call) = (256u32, 257u32);
        let plain = t.encode("<tool_call>x<|im_end|>", false, false);
        assert_eq!(plain[0], call, "{plain:?}");
        assert!(!plain.contains(&end), "{plain:?}");
        let special = t.encode("<tool_call>x<|im_end|>", false, true);
        assert_eq!(special, vec![call, t.encode("x", false, false)[0], end]);
    }

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

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn llama3_and_qwen2_split_like_their_regex() {
        let text = "Hello world's 12345 foo\n\n  bar\tbaz!!\r\n  x";
        let l3 = pre_tokenize(PreTokenizer::Llama3, text);
        assert_eq!(
            l3,
            vec![
                "Hello", " world", "'s", " ", "123", "45", " foo", "\n\n", " ", " bar", "\tbaz",
                "!!\r\n", " ", " x"
            ]
        );
        let q2 = pre_tokenize(PreTokenizer::Qwen2, text);
        assert_eq!(
            q2,
            vec![
                "Hello", " world", "'s", " ", "1", "2", "3", "4", "5", " foo", "\n\n", " ", " bar",
                "\tbaz", "!!\r\n", " ", " x"
            ]
        );
        // Case-insensitive contractions, a punctuation prefix glued to letters, trailing spaces.
        assert_eq!(
            pre_tokenize(PreTokenizer::Llama3, "IT'S a (x) 'hi  "),
            vec!["IT", "'S", " a", " (", "x", ")", " '", "hi", "  "]
        );
        // GPT-2 keeps digit runs and does not glue punctuation to words.
        assert_eq!(
            pre_tokenize(PreTokenizer::Gpt2, "IT'S 12345"),
            vec!["IT", "'", "S", " 12345"]
        );
        assert_eq!(
            PreTokenizer::from_gguf_name("qwen2").unwrap(),
            PreTokenizer::Qwen2
        );
        assert_eq!(
            PreTokenizer::from_gguf_name("llama-bpe").unwrap(),
            PreTokenizer::Llama3
        );
        assert!(matches!(
            PreTokenizer::from_gguf_name("deepseek-llm"),
            Err(LlamaError::Unsupported(_))
        ));
    }
}
