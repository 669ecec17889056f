//! SentencePiece-style tokenization from GGUF metadata (`tokenizer.ggml.model = "llama"`:
//! Gemma, Llama 1/2, Mistral): spaces become `▁`, the text starts as one symbol per character,
//! and the adjacent pair whose concatenation is the highest-scoring vocabulary entry is merged
//! until none is left; a character with no entry of its own falls back to `<0xXX>` byte tokens.
//! This is llama.cpp's `llm_tokenizer_spm`, tie-breaking included (equal scores: leftmost pair).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// The word-boundary mark that stands for a space in the vocabulary.
pub(crate) const SPACE_MARK: char = '\u{2581}';

/// What SentencePiece tokenization needs beyond the vocabulary strings.
#[derive(Debug, Clone)]
pub(crate) struct Spm {
    /// Merge priority of each token (higher merges first).
    scores: Vec<f32>,
    /// `<0xXX>` token of each byte, if the vocabulary has it.
    byte_ids: [Option<u32>; 256],
    /// Put a space before text that starts the input or follows a special token
    /// (`tokenizer.ggml.add_space_prefix`; Llama 2: yes, Gemma: no).
    pub add_space_prefix: bool,
    /// With `add_space_prefix`: only before the input's own start, and not when the input
    /// already starts with a space (a `tokenizer.json` `Metaspace` pre-tokenizer with
    /// `prepend_scheme: "first"`, as non-legacy Llama tokenizers are converted).
    pub prefix_first_only: bool,
}

/// A candidate merge of the symbols `left` and `right`, of `size` bytes.
#[derive(Debug, PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    /// Highest score first; on ties, the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A run of the escaped text, linked to its neighbours (`usize::MAX`: none).
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

impl Spm {
    /// From the vocabulary strings and their scores (same length).
    pub(crate) fn new(tokens: &[String], scores: Vec<f32>, add_space_prefix: bool) -> Self {
        let mut byte_ids = [None; 256];
        for (id, t) in tokens.iter().enumerate() {
            if let Some(b) = byte_token(t) {
                byte_ids[b as usize].get_or_insert(id as u32);
            }
        }
        Self {
            scores,
            byte_ids,
            add_space_prefix,
            prefix_first_only: false,
        }
    }

    /// The raw bytes a vocabulary entry stands for: `▁` is a space, `<0xXX>` one byte.
    pub(crate) fn token_bytes(text: &str) -> Vec<u8> {
        match byte_token(text) {
            Some(b) => vec![b],
            None => text.replace(SPACE_MARK, " ").into_bytes(),
        }
    }

    /// Tokenize one fragment of plain text (no special tokens in it) onto `out`.
    /// `after_special`: the fragment starts the input or follows a special token;
    /// `at_start`: it starts the input.
    pub(crate) fn encode(
        &self,
        vocab: &HashMap<String, u32>,
        fragment: &str,
        after_special: bool,
        at_start: bool,
        out: &mut Vec<u32>,
    ) {
        let mut text = String::with_capacity(fragment.len() + 3);
        let prefix = if self.prefix_first_only {
            at_start && !fragment.starts_with([' ', SPACE_MARK])
        } else {
            after_special
        };
        if self.add_space_prefix && prefix {
            text.push(SPACE_MARK);
        }
        for c in fragment.chars() {
            text.push(if c == ' ' { SPACE_MARK } else { c });
        }
        let mut syms: Vec<Symbol> = text
            .char_indices()
            .enumerate()
            .map(|(i, (start, c))| Symbol {
                start,
                len: c.len_utf8(),
                prev: if i == 0 { NONE } else { i - 1 },
                next: i + 1,
            })
            .collect();
        if let Some(last) = syms.last_mut() {
            last.next = NONE;
        }
        let mut heap = BinaryHeap::new();
        let lookup = |s: &str| {
            vocab
                .get(s)
                .copied()
                .filter(|&id| (id as usize) < self.scores.len())
        };
        let bigram = |syms: &[Symbol], left: usize, right: usize| -> Option<Bigram> {
            if left == NONE || right == NONE {
                return None;
            }
            let (a, b) = (syms[left], syms[right]);
            let id = lookup(&text[a.start..b.start + b.len])?;
            let score = self.scores[id as usize];
            // A piece no merge makes (a `tokenizer.json` vocabulary) is never merged into.
            if score == f32::NEG_INFINITY {
                return None;
            }
            Some(Bigram {
                score,
                left,
                right,
                size: a.len + b.len,
            })
        };
        for i in 1..syms.len() {
            heap.extend(bigram(&syms, i - 1, i));
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (syms[bg.left], syms[bg.right]);
            // Stale: one side has been merged into something else since.
            if l.len == 0 || r.len == 0 || l.len + r.len != bg.size {
                continue;
            }
            syms[bg.left].len += r.len;
            syms[bg.right].len = 0;
            syms[bg.left].next = r.next;
            if r.next != NONE {
                syms[r.next].prev = bg.left;
            }
            heap.extend(bigram(&syms, l.prev, bg.left));
            heap.extend(bigram(&syms, bg.left, syms[bg.left].next));
        }
        let mut i = if syms.is_empty() { NONE } else { 0 };
        while i != NONE {
            let s = syms[i];
            let piece = &text[s.start..s.start + s.len];
            match lookup(piece) {
                Some(id) => out.push(id),
                // A symbol is a vocabulary entry unless it is a single character the vocabulary
                // lacks (merges only ever form entries): spell it in bytes.
                None => out.extend(piece.bytes().filter_map(|b| self.byte_ids[b as usize])),
            }
            i = s.next;
        }
    }
}

/// The parts of a Hugging Face `tokenizer.json` that say how a SentencePiece-style tokenizer
/// treats text: `normalizer`, `pre_tokenizer`, `decoder`, and the BPE `merges` (pairs of token
/// ids, best first). They are what `Tokenizer::from_hf_json` reads back to the same scoring.
pub(crate) struct HfSpm {
    pub normalizer: serde_json::Value,
    pub pre_tokenizer: serde_json::Value,
    pub decoder: serde_json::Value,
    pub merges: Vec<(u32, u32)>,
}

impl Spm {
    /// This tokenizer in `tokenizer.json` terms. A BPE model ranks pair merges where
    /// SentencePiece scores the pieces they make, so every split of a piece into two vocabulary
    /// entries becomes a merge, pieces ranked by score (best first; equal scores by id). What a
    /// merge list cannot say is left out, as Hugging Face's converter leaves it out: a merge
    /// into a control, unknown or byte token, and a piece made from a character the vocabulary
    /// lacks. Two pieces of equal score come back ranked by id (SentencePiece's own models score
    /// every piece differently).
    pub(crate) fn to_hf(&self, tokens: &[String], kinds: &[crate::TokenKind]) -> HfSpm {
        use crate::TokenKind;
        use serde_json::json;
        let index: HashMap<&str, u32> = tokens
            .iter()
            .enumerate()
            .filter(|&(i, t)| !t.is_empty() && kinds[i] != TokenKind::Unused)
            .map(|(i, t)| (t.as_str(), i as u32))
            .collect();
        let mut made: Vec<(f32, u32)> = tokens
            .iter()
            .enumerate()
            .filter(|&(i, t)| {
                matches!(kinds[i], TokenKind::Normal | TokenKind::UserDefined)
                    && self.scores[i] != f32::NEG_INFINITY
                    && byte_token(t).is_none()
                    && t.chars().nth(1).is_some()
            })
            .map(|(i, _)| (self.scores[i], i as u32))
            .collect();
        made.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut merges = Vec::new();
        for (_, id) in made {
            let piece = tokens[id as usize].as_str();
            for (cut, _) in piece.char_indices().skip(1) {
                if let (Some(&l), Some(&r)) = (index.get(&piece[..cut]), index.get(&piece[cut..])) {
                    merges.push((l, r));
                }
            }
        }
        let mark = SPACE_MARK.to_string();
        let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": mark});
        let (normalizer, pre_tokenizer) = match (self.add_space_prefix, self.prefix_first_only) {
            // Non-legacy Llama: `Metaspace` writes the spaces and the first one.
            (true, true) => (
                serde_json::Value::Null,
                json!({"type": "Metaspace", "replacement": mark, "prepend_scheme": "first",
                       "split": false}),
            ),
            // Llama 2: a `▁` before the text, then every space as `▁`.
            (true, false) => (
                json!({"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": mark}, replace]}),
                serde_json::Value::Null,
            ),
            // Gemma: every space as `▁`, nothing prepended.
            (false, _) => (replace, serde_json::Value::Null),
        };
        let mut decoders = vec![
            json!({"type": "Replace", "pattern": {"String": mark}, "content": " "}),
            json!({"type": "ByteFallback"}),
            json!({"type": "Fuse"}),
        ];
        if self.add_space_prefix {
            decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        }
        HfSpm {
            normalizer,
            pre_tokenizer,
            decoder: json!({"type": "Sequence", "decoders": decoders}),
            merges,
        }
    }
}

/// The byte of a `<0xXX>` vocabulary entry.
fn byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(entries: &[(&str, f32)]) -> (Vec<String>, HashMap<String, u32>, Spm) {
        let tokens: Vec<String> = entries.iter().map(|(t, _)| t.to_string()).collect();
        let map = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let spm = Spm::new(&tokens, entries.iter().map(|e| e.1).collect(), false);
        (tokens, map, spm)
    }

    #[test]
    fn a_score_list_of_the_wrong_length_is_refused() {
        let tokens: Vec<String> = ["a", "b", "ab"].iter().map(|t| t.to_string()).collect();
        let kinds = vec![crate::TokenKind::Normal; 3];
        let Err(err) = crate::Tokenizer::sentencepiece(tokens, kinds, vec![0.0; 2], true) else {
            panic!("a short score list was accepted");
        };
        let err = err.to_string();
        assert!(
            err.contains("scores has 2 entries") && err.contains("has 3"),
            "{err}"
        );
    }

    fn pieces(entries: &[(&str, f32)], text: &str, prefix: bool) -> Vec<String> {
        let (tokens, map, mut spm) = vocab(entries);
        spm.add_space_prefix = prefix;
        let mut out = Vec::new();
        spm.encode(&map, text, true, true, &mut out);
        out.iter().map(|&i| tokens[i as usize].clone()).collect()
    }

    #[test]
    fn merges_the_best_scoring_pair_first() {
        let v = [
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
            ("abc", -3.0),
        ];
        // "bc" outscores "ab"; then "a" + "bc" = "abc" exists.
        assert_eq!(pieces(&v, "abc", false), ["abc"]);
        let v = [
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
        ];
        assert_eq!(pieces(&v, "abc", false), ["a", "bc"]);
        // Equal scores: the leftmost pair.
        let v = [
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -1.0),
            ("bc", -1.0),
        ];
        assert_eq!(pieces(&v, "abc", false), ["ab", "c"]);
    }

    #[test]
    fn spaces_become_marks_and_unknown_characters_bytes() {
        let v = [
            ("<0xC3>", 0.0),
            ("<0xA9>", 0.0),
            ("h", 0.0),
            ("i", 0.0),
            ("\u{2581}", 0.0),
            ("\u{2581}h", -1.0),
            ("\u{2581}hi", -0.5),
        ];
        assert_eq!(
            pieces(&v, "hi hi é", false),
            ["h", "i", "\u{2581}hi", "\u{2581}", "<0xC3>", "<0xA9>"]
        );
        assert_eq!(pieces(&v, "hi", true), ["\u{2581}hi"]);
        assert_eq!(pieces(&v, "", false), Vec::<String>::new());
        assert_eq!(Spm::token_bytes("<0x0A>"), b"\n");
        assert_eq!(Spm::token_bytes("\u{2581}hi"), b" hi");
        assert_eq!(byte_token("<0xZZ>"), None);
    }
}
