//! Sub-word pieces learned from the training corpus by byte-pair-style merges.
//!
//! A character model spends most of its compute on spelling out the DSL's structure
//! (`target.type=ui_element; `) one character at a time; pieces cut a Pace example from ~105
//! positions to ~43, so the same training minutes buy more epochs or a wider model.
//!
//! Text is first split into *words* that no piece may cross: a run of letters, digits and `_`;
//! a run of other characters (spaces, punctuation); or a lone `\n`. Keeping letters apart from
//! spaces and punctuation means a name is spelt with the same pieces in the request (`" Stop"`)
//! and in the plan (`label=Stop)`), which is what lets a tiny model learn to copy it. Keeping `\n`
//! alone makes encoding restart at every line, so a cached prefix ending in `\n` encodes the same
//! on its own as inside the full prompt.
//!
//! Ids: 0 pad, 1 unknown, then one id per known character, then one per merge in the order the
//! merges were learned. Encoding a word applies the earliest-learned merge available until none
//! applies, so it is deterministic and needs only the merge list.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::codec::{single_chars, Codec, EOS_CHAR, UNK_ID};
use crate::error::{LmError, Result};

/// Ids before the first character id (pad and unknown).
const SPECIALS: u32 = 2;

/// Learned sub-word codec. Serialized as `{"chars": [...], "merges": [[a, b], ...]}`.
/// The longest piece, in bytes. A run of thousands of one character in the training data would
/// otherwise merge into a piece too long for the constraint engine's token trie (llguidance's
/// toktrie asserts at 1,024 bytes); the shipped planners' longest piece is 17 bytes.
pub const MAX_PIECE_BYTES: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PieceCodecRepr", into = "PieceCodecRepr")]
pub struct PieceCodec {
    chars: Vec<char>,
    merges: Vec<[u32; 2]>,
    itos: Vec<String>,
    char_ids: HashMap<char, u32>,
    /// (left, right) -> the id the merge produces; a lower id is an earlier merge.
    merged: HashMap<(u32, u32), u32>,
    eos: u32,
}

#[derive(Serialize, Deserialize)]
struct PieceCodecRepr {
    chars: Vec<String>,
    merges: Vec<[u32; 2]>,
}

impl TryFrom<PieceCodecRepr> for PieceCodec {
    type Error = LmError;
    fn try_from(r: PieceCodecRepr) -> Result<Self> {
        PieceCodec::from_parts(single_chars("chars", &r.chars)?, r.merges)
    }
}

impl From<PieceCodec> for PieceCodecRepr {
    fn from(c: PieceCodec) -> Self {
        PieceCodecRepr {
            chars: c.chars.iter().map(|c| c.to_string()).collect(),
            merges: c.merges,
        }
    }
}

/// Which word class a character belongs to; words are maximal runs of one class.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Newline,
    Other,
}

fn class(c: char) -> Class {
    if c == '\n' {
        Class::Newline
    } else if c.is_alphanumeric() || c == '_' {
        Class::Word
    } else {
        Class::Other
    }
}

/// Split `text` into the words no piece crosses. A `.` between two word characters joins
/// them (`paypal.com`, `notes.txt`, `target.label`): split there, a model reads the end of
/// `paypal` as a likely end of the value.
fn words(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let class_at = |i: usize| -> Class {
        let c = chars[i].1;
        let joins = c == '.'
            && i > 0
            && class(chars[i - 1].1) == Class::Word
            && chars
                .get(i + 1)
                .is_some_and(|&(_, n)| class(n) == Class::Word);
        if joins {
            Class::Word
        } else {
            class(c)
        }
    };
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let here = class_at(i);
        if here != class_at(i - 1) || here == Class::Newline {
            out.push(&text[chars[start].0..chars[i].0]);
            start = i;
        }
    }
    if !chars.is_empty() {
        out.push(&text[chars[start].0..]);
    }
    out
}

impl PieceCodec {
    /// Learn pieces from `texts`: every character they contain (plus `\n`) gets an id, then the
    /// most frequent adjacent pair inside a word is merged, repeatedly, until the vocabulary has
    /// `max_vocab` ids or no pair occurs `min_count` times. Ties go to the pair with the smaller
    /// ids, so the result depends only on the corpus.
    pub fn learn<'a, I: IntoIterator<Item = &'a str>>(
        texts: I,
        max_vocab: usize,
        min_count: u64,
    ) -> Self {
        let mut counts: HashMap<&'a str, u64> = HashMap::new();
        let mut set: BTreeSet<char> = BTreeSet::new();
        set.insert(EOS_CHAR);
        for t in texts {
            set.extend(t.chars());
            for w in words(t) {
                *counts.entry(w).or_insert(0) += 1;
            }
        }
        // \x00 and \x01 stand for the specials in a character table; never ordinary characters
        set.remove(&'\u{0}');
        set.remove(&'\u{1}');
        let chars: Vec<char> = set.into_iter().collect();
        let char_ids: HashMap<char, u32> = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, SPECIALS + i as u32))
            .collect();
        // Words sorted so that pair counting visits them in a fixed order.
        let mut corpus: Vec<(Vec<u32>, u64)> = counts
            .into_iter()
            .map(|(w, n)| (w.chars().map(|c| char_ids[&c]).collect(), n))
            .collect();
        corpus.sort();
        let mut merges: Vec<[u32; 2]> = Vec::new();
        let mut next_id = SPECIALS + chars.len() as u32;
        // Bytes per id, to keep pieces within MAX_PIECE_BYTES.
        let mut piece_len: Vec<usize> = [0, 0]
            .into_iter()
            .chain(chars.iter().map(|c| c.len_utf8()))
            .collect();
        while (next_id as usize) < max_vocab {
            let mut pairs: HashMap<(u32, u32), u64> = HashMap::new();
            for (ids, n) in &corpus {
                for p in ids.windows(2) {
                    if piece_len[p[0] as usize] + piece_len[p[1] as usize] <= MAX_PIECE_BYTES {
                        *pairs.entry((p[0], p[1])).or_insert(0) += n;
                    }
                }
            }
            let Some((&best, &count)) = pairs
                .iter()
                .max_by(|(pa, ca), (pb, cb)| ca.cmp(cb).then_with(|| pb.cmp(pa)))
            else {
                break;
            };
            if count < min_count.max(2) {
                break;
            }
            for (ids, _) in &mut corpus {
                merge_pair(ids, best, next_id);
            }
            merges.push([best.0, best.1]);
            piece_len.push(piece_len[best.0 as usize] + piece_len[best.1 as usize]);
            next_id += 1;
        }
        Self::from_parts(chars, merges).expect("learned tables are consistent")
    }

    /// Build from the persisted parts, checking that every merge refers to earlier ids.
    pub fn from_parts(chars: Vec<char>, merges: Vec<[u32; 2]>) -> Result<Self> {
        let mut char_ids = HashMap::with_capacity(chars.len());
        let mut itos = vec![String::new(), String::new()];
        for (i, &c) in chars.iter().enumerate() {
            if c == '\u{0}' || c == '\u{1}' {
                return Err(LmError::Codec(format!(
                    "chars[{i}] is a reserved special character"
                )));
            }
            if char_ids.insert(c, SPECIALS + i as u32).is_some() {
                return Err(LmError::Codec(format!("chars[{i}] repeats {c:?}")));
            }
            itos.push(c.to_string());
        }
        let eos = *char_ids
            .get(&EOS_CHAR)
            .ok_or_else(|| LmError::Codec("chars lack the end-of-completion '\\n'".into()))?;
        let mut merged = HashMap::with_capacity(merges.len());
        for (i, &[a, b]) in merges.iter().enumerate() {
            let id = itos.len() as u32;
            if a < SPECIALS || b < SPECIALS || a >= id || b >= id {
                return Err(LmError::Codec(format!(
                    "merges[{i}] = [{a}, {b}] must name two earlier piece ids (2..{id})"
                )));
            }
            if merged.insert((a, b), id).is_some() {
                return Err(LmError::Codec(format!("merges[{i}] repeats [{a}, {b}]")));
            }
            let piece = format!("{}{}", itos[a as usize], itos[b as usize]);
            if piece.len() > MAX_PIECE_BYTES {
                return Err(LmError::Codec(format!(
                    "merges[{i}] would make a piece of {} bytes (at most {MAX_PIECE_BYTES})",
                    piece.len()
                )));
            }
            if piece.contains('\n') {
                return Err(LmError::Codec(format!(
                    "merges[{i}] would make a piece containing '\\n'"
                )));
            }
            itos.push(piece);
        }
        Ok(Self {
            chars,
            merges,
            itos,
            char_ids,
            merged,
            eos,
        })
    }

    /// The text of every id (empty for the two specials).
    pub fn pieces(&self) -> &[String] {
        &self.itos
    }

    /// Number of learned merges.
    pub fn merge_count(&self) -> usize {
        self.merges.len()
    }

    /// One id per character of `word`, before any merge.
    fn char_ids_of(&self, word: &str) -> Vec<u32> {
        word.chars()
            .map(|c| self.char_ids.get(&c).copied().unwrap_or(UNK_ID))
            .collect()
    }

    fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        let mut ids = self.char_ids_of(word);
        loop {
            let best = ids
                .windows(2)
                .filter_map(|p| self.merged.get(&(p[0], p[1])).map(|&m| (m, (p[0], p[1]))))
                .min();
            match best {
                Some((id, pair)) => merge_pair(&mut ids, pair, id),
                None => break,
            }
        }
        out.extend(ids);
    }
}

/// Encodes like [`PieceCodec::encode`] but skips each available merge with probability `p`
/// (BPE-dropout, Provilkov et al. 2020), so one word is cut into different pieces across
/// examples. Trained on these, a planner has seen every spelling of a name in smaller pieces,
/// and copies a new tool's name even when its canonical pieces never began a name in training
/// (README, "Held-out verb"). Only for training: planning encodes canonically.
pub struct DropoutEncoder<'a> {
    codec: &'a PieceCodec,
    p: f64,
    rng: rand::rngs::StdRng,
}

impl<'a> DropoutEncoder<'a> {
    /// Whether `p` is a dropout rate: in [0, 1) (at 1 no merge would ever apply).
    pub fn check_rate(p: f64) -> Result<()> {
        if (0.0..1.0).contains(&p) {
            Ok(())
        } else {
            Err(LmError::Config(format!(
                "piece dropout must be in [0, 1), got {p}"
            )))
        }
    }

    /// `p` in [0, 1): 0 encodes canonically.
    pub fn new(codec: &'a PieceCodec, p: f64, seed: u64) -> Result<Self> {
        Self::check_rate(p)?;
        Ok(DropoutEncoder {
            codec,
            p,
            rng: <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed),
        })
    }

    pub fn encode(&mut self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 2 + 1);
        for w in words(text) {
            self.encode_word(w, &mut out);
        }
        out
    }

    /// One merge at a time, the earliest-learned among those not dropped this round, at its
    /// leftmost position; with nothing dropped this is the canonical encoding.
    fn encode_word(&mut self, word: &str, out: &mut Vec<u32>) {
        use rand::Rng;
        let c = self.codec;
        let mut ids = c.char_ids_of(word);
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..ids.len().saturating_sub(1) {
                if let Some(&m) = c.merged.get(&(ids[i], ids[i + 1])) {
                    if self.p > 0.0 && self.rng.random::<f64>() < self.p {
                        continue;
                    }
                    if best.is_none_or(|(b, _)| m < b) {
                        best = Some((m, i));
                    }
                }
            }
            match best {
                Some((m, i)) => {
                    ids[i] = m;
                    ids.remove(i + 1);
                }
                None => break,
            }
        }
        out.extend(ids);
    }
}

/// Replace every non-overlapping occurrence of `pair` in `ids` (left to right) with `id`.
fn merge_pair(ids: &mut Vec<u32>, pair: (u32, u32), id: u32) {
    if ids.len() < 2 {
        return;
    }
    let mut out = 0;
    let mut i = 0;
    while i < ids.len() {
        if i + 1 < ids.len() && (ids[i], ids[i + 1]) == pair {
            ids[out] = id;
            i += 2;
        } else {
            ids[out] = ids[i];
            i += 1;
        }
        out += 1;
    }
    ids.truncate(out);
}

impl Codec for PieceCodec {
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 2 + 1);
        for w in words(text) {
            self.encode_word(w, &mut out);
        }
        out
    }
    fn decode(&self, ids: &[u32]) -> String {
        ids.iter()
            .filter_map(|&i| self.itos.get(i as usize))
            .map(String::as_str)
            .collect()
    }
    fn vocab_size(&self) -> usize {
        self.itos.len()
    }
    fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.itos
            .get(id as usize)
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default()
    }
    fn eos_id(&self) -> u32 {
        self.eos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: [&str; 4] = [
        "click Stop\n=> ",
        "perform(action=click; target.label=Stop)\n",
        "click Play\n=> ",
        "perform(action=click; target.label=Play)\n",
    ];

    #[test]
    fn words_split_by_class_and_keep_newlines_alone() {
        let w = words("a.label=Stop Now)\n\n=> x_1. .b paypal.com.");
        assert_eq!(
            w,
            [
                "a.label",
                "=",
                "Stop",
                " ",
                "Now",
                ")",
                "\n",
                "\n",
                "=> ",
                "x_1",
                ". .",
                "b",
                " ",
                "paypal.com",
                "."
            ]
        );
        assert!(words("").is_empty());
    }

    #[test]
    fn learned_pieces_round_trip_and_compress() {
        let c = PieceCodec::learn(CORPUS, 200, 2);
        assert!(c.merge_count() > 0);
        for t in CORPUS {
            let ids = c.encode(t);
            assert_eq!(c.decode(&ids), t);
            assert!(ids.len() < t.chars().count(), "{t:?} was not compressed");
        }
        // a name is the same pieces in a request and in a plan
        let request = c.encode(" Stop");
        let plan = c.encode("=Stop)");
        assert_eq!(&request[1..], &plan[1..plan.len() - 1]);
        // unknown characters become UNK; unseen words still spell out
        let ids = c.encode("click Pop€");
        assert_eq!(*ids.last().unwrap(), UNK_ID);
        assert_eq!(c.decode(&ids), "click Pop");
        assert_eq!(c.token_bytes(c.eos_id()), b"\n");
        assert!(c.token_bytes(UNK_ID).is_empty());
    }

    #[test]
    fn a_prefix_ending_in_newline_encodes_the_same_alone() {
        let c = PieceCodec::learn(CORPUS, 200, 2);
        let prefix = "perform(action=click)\n";
        let rest = "click Stop\n=> ";
        let mut split = c.encode(prefix);
        split.extend(c.encode(rest));
        assert_eq!(split, c.encode(&format!("{prefix}{rest}")));
    }

    #[test]
    fn learning_is_deterministic_and_respects_the_vocabulary_cap() {
        let a = PieceCodec::learn(CORPUS, 40, 2);
        let b = PieceCodec::learn(CORPUS, 40, 2);
        assert_eq!(a, b);
        assert!(a.vocab_size() <= 40);
        let json = serde_json::to_string(&a).unwrap();
        let back: PieceCodec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.encode(CORPUS[1]), a.encode(CORPUS[1]));
    }

    #[test]
    fn a_very_long_word_never_becomes_one_piece() {
        // 30,000 x's, as a pasted blob in a request would bring: merges stop at the cap, and
        // a table that goes past it is refused (the token trie cannot hold such a piece).
        let long = "x".repeat(30_000);
        let c = PieceCodec::learn([long.as_str(), long.as_str(), "\n"], 1024, 2);
        let longest = (0..c.vocab_size() as u32)
            .map(|id| c.token_bytes(id).len())
            .max()
            .unwrap();
        assert_eq!(longest, MAX_PIECE_BYTES);
        assert_eq!(c.decode(&c.encode(&long)), long);
        let x = SPECIALS + 1;
        let merges: Vec<[u32; 2]> = (0..7).map(|i| [x + i, x + i]).collect();
        let err = PieceCodec::from_parts(vec!['\n', 'x'], merges).unwrap_err();
        assert!(
            err.to_string()
                .contains("merges[6] would make a piece of 128 bytes"),
            "{err}"
        );
    }

    #[test]
    fn dropout_cuts_words_differently_but_always_spells_the_same_text() {
        let texts: Vec<&str> = CORPUS.iter().copied().cycle().take(64).collect();
        let codec = PieceCodec::learn(texts, 200, 2);
        let text = "perform(action=click; target.label=Stop)\n";
        let canonical = codec.encode(text);
        let mut none = DropoutEncoder::new(&codec, 0.0, 1).unwrap();
        for t in CORPUS
            .iter()
            .chain(&["Stoooop StopStop aaaaaaa", "clickclick Play\n=> "])
        {
            assert_eq!(none.encode(t), codec.encode(t), "{t:?}");
        }
        let mut some = DropoutEncoder::new(&codec, 0.3, 1).unwrap();
        let cuts: Vec<Vec<u32>> = (0..50).map(|_| some.encode(text)).collect();
        for ids in &cuts {
            assert_eq!(codec.decode(ids), text);
            assert!(ids.len() >= canonical.len());
        }
        assert!(cuts.iter().any(|ids| ids.len() > canonical.len()));
        // Deterministic per seed.
        let mut again = DropoutEncoder::new(&codec, 0.3, 1).unwrap();
        let replay: Vec<Vec<u32>> = (0..50).map(|_| again.encode(text)).collect();
        assert_eq!(cuts, replay);
        assert!(DropoutEncoder::new(&codec, 1.0, 1).is_err());
        assert!(DropoutEncoder::new(&codec, -0.1, 1).is_err());
    }

    #[test]
    fn bad_tables_are_rejected_with_the_entry_named() {
        let bad = |json: &str| {
            serde_json::from_str::<PieceCodec>(json)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(r#"{"chars":["\n","ab"],"merges":[]}"#).contains("chars[1]"));
        assert!(bad(r#"{"chars":["a"],"merges":[]}"#).contains("'\\n'"));
        assert!(bad(r#"{"chars":["\n","a"],"merges":[[3,9]]}"#).contains("merges[0]"));
        assert!(bad(r#"{"chars":["\n","a"],"merges":[[2,3]]}"#).contains("'\\n'"));
        assert!(bad(r#"{"chars":["\n","a","a"],"merges":[]}"#).contains("repeats"));
    }
}
