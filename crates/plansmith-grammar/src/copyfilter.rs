//! Copy spans checked while decoding, for the plan DSL.
//!
//! A copy policy says "this value is a span of the request". Written into the grammar, that
//! means one llguidance compile per request (~2 ms: most of a tiny planner's `plan()`). In the
//! DSL the spans can be checked beside the grammar instead: the catalog's grammar is compiled
//! once with each copied value as its request-independent lexeme (DSL-safe text of the right
//! shape), and a [`CopyFilter`] follows the output — tool name, key, value — and removes the
//! tokens after which the value can no longer become one of the request's spans that also
//! match the value's own pattern. Checking the two apart would not do: a value can be a prefix
//! of a span and a prefix of the pattern and still a prefix of no span matching it (`-` in
//! "x-ray" for an integer), a dead end the per-request grammar never enters.
//!
//! The tracking is exact because the DSL separates names, keys and values with characters no
//! value can contain (`(`, `=`, `;`, `)`, `|`, newline). `tests/property.rs` checks that the
//! shared grammar plus this filter allow exactly the tokens the request's own grammar allows,
//! at every step of random walks over random catalogs.

use std::collections::HashMap;
use std::sync::Arc;

use llguidance::toktrie::{TokTrie, TrieNode};

/// For each tool, its DSL keys (`target.label`, `choices.3`) and the copy hole their value
/// fills, if any.
pub(crate) type CopyKeys = HashMap<String, HashMap<String, Option<usize>>>;

/// The values one copy hole may take in one request: spans of whole consecutive chunks that
/// match the hole's pattern, grouped by start offset.
#[derive(Debug, Clone, Default)]
pub(crate) struct HoleSpans {
    /// Byte offsets where at least one valid span starts.
    starts: Vec<usize>,
    /// For each start, the ascending byte offsets where a valid span from it ends.
    ends: Vec<Vec<usize>>,
}

impl HoleSpans {
    /// Spans of `chunks` (consecutive slices of `request`) that `pattern` matches in full.
    pub(crate) fn find(
        request: &str,
        chunks: &[&str],
        pattern: &mut llguidance::derivre::Regex,
    ) -> HoleSpans {
        let bytes = request.as_bytes();
        let mut chunk_at = Vec::with_capacity(chunks.len() + 1);
        let mut at = 0;
        for c in chunks {
            chunk_at.push(at);
            at += c.len();
        }
        chunk_at.push(at);
        let mut spans = HoleSpans::default();
        for (a, &start) in chunk_at[..chunks.len()].iter().enumerate() {
            let mut state = pattern.initial_state();
            let mut ends = Vec::new();
            let mut pos = start;
            for &end in &chunk_at[a + 1..] {
                state = pattern.transition_bytes(state, &bytes[pos..end]);
                pos = end;
                if state.is_dead() {
                    break;
                }
                if pattern.is_accepting(state) {
                    ends.push(end);
                }
            }
            if !ends.is_empty() {
                spans.starts.push(start);
                spans.ends.push(ends);
            }
        }
        spans
    }

    /// A literal value at `start..start + len` of the filter's text (see
    /// `Template::copy_filter`: stated numbers appended after the request).
    pub(crate) fn push_literal(&mut self, start: usize, len: usize) {
        self.starts.push(start);
        self.ends.push(vec![start + len]);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

/// Where in the DSL output the filter stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum At {
    /// Reading a tool name (or `done`), as bytes (names may be any UTF-8).
    Name(Vec<u8>),
    /// Inside a call, reading a key.
    Key { tool: Vec<u8>, key: Vec<u8> },
    /// Reading a value. For a copied one: its hole, the spans (indices into the hole's
    /// [`HoleSpans`]) the value so far is a prefix of, and its length in bytes.
    Value {
        tool: Vec<u8>,
        copied: Option<(usize, Vec<usize>, usize)>,
    },
    /// After a call's `)`.
    AfterCall,
}

/// The copy-span check for one request.
#[derive(Debug, Clone)]
pub(crate) struct CopyFilter {
    keys: Arc<CopyKeys>,
    request: Vec<u8>,
    holes: Arc<Vec<HoleSpans>>,
    at: At,
}

impl CopyFilter {
    pub(crate) fn new(keys: Arc<CopyKeys>, request: &str, holes: Vec<HoleSpans>) -> CopyFilter {
        CopyFilter {
            keys,
            request: request.as_bytes().to_vec(),
            holes: Arc::new(holes),
            at: At::Name(Vec::new()),
        }
    }

    /// Whether value bytes `part` (ending the value when `ends`) keep some span of `hole`
    /// among `cands` possible after `len` bytes.
    fn fits(&self, hole: usize, cands: &[usize], len: usize, part: &[u8], ends: bool) -> bool {
        let spans = &self.holes[hole];
        cands.iter().any(|&i| {
            let from = spans.starts[i] + len;
            let to = from + part.len();
            self.request[from..].starts_with(part)
                && if ends {
                    spans.ends[i].binary_search(&to).is_ok()
                } else {
                    spans.ends[i].last().is_some_and(|&e| e >= to)
                }
        })
    }

    /// Whether appending `bytes` keeps every copied value possible. Cheap for the common
    /// case (no new value starts inside `bytes`); otherwise a full step on a copy.
    pub(crate) fn accepts(&self, bytes: &[u8]) -> bool {
        let new_value = |rest: &[u8]| rest.contains(&b'=');
        match &self.at {
            At::Value {
                copied: Some((hole, cands, len)),
                ..
            } => {
                let end = bytes.iter().position(|b| matches!(b, b';' | b')'));
                let part = &bytes[..end.unwrap_or(bytes.len())];
                if !self.fits(*hole, cands, *len, part, end.is_some()) {
                    return false;
                }
                match end {
                    Some(e) if new_value(&bytes[e..]) => self.step(&self.at, bytes).is_some(),
                    _ => true,
                }
            }
            _ if new_value(bytes) => self.step(&self.at, bytes).is_some(),
            _ => true,
        }
    }

    /// Inside a copied value, calls `allow` with every token [`Self::accepts`] allows (some
    /// more than once) and returns true: found by walking the token trie along the request's
    /// possible continuations, not by checking each token the grammar allows (inside a value
    /// that is most of a 150k vocabulary). Outside copied values returns false: only tokens
    /// holding `=` can break a copy there.
    pub(crate) fn value_tokens(&self, trie: &TokTrie, allow: &mut impl FnMut(u32)) -> bool {
        let At::Value {
            copied: Some((hole, cands, len)),
            ..
        } = &self.at
        else {
            return false;
        };
        let spans = &self.holes[*hole];
        // spans sharing a prefix reach the same closing subtrees: enumerate each once
        let mut closed: Vec<*const TrieNode> = Vec::new();
        for &i in cands {
            let from = spans.starts[i] + len;
            let last = spans.ends[i].last().copied().unwrap_or(from);
            let mut node = trie.root();
            let mut d = 0;
            loop {
                if d > 0 {
                    if let Some(t) = node.token_id() {
                        allow(t);
                    }
                }
                if len + d > 0 && spans.ends[i].binary_search(&(from + d)).is_ok() {
                    // the value may end here: tokens that close it and go on
                    for end in [b';', b')'] {
                        if let Some(n) = trie.child_at_byte(node, end) {
                            if !closed.contains(&(n as *const TrieNode)) {
                                closed.push(n);
                                self.subtree_tokens(trie, n, d, allow);
                            }
                        }
                    }
                }
                if from + d >= last {
                    break;
                }
                match trie.child_at_byte(node, self.request[from + d]) {
                    Some(n) => node = n,
                    None => break,
                }
                d += 1;
            }
        }
        true
    }

    /// Tokens at or below `node` (whose bytes close the value after `d` value bytes); those
    /// that also start another value get the full check.
    fn subtree_tokens(
        &self,
        trie: &TokTrie,
        node: &TrieNode,
        d: usize,
        allow: &mut impl FnMut(u32),
    ) {
        if let Some(t) = node.token_id() {
            let bytes = trie.token(t);
            if !bytes[d..].contains(&b'=') || self.accepts(bytes) {
                allow(t);
            }
        }
        for child in trie.node_children(node) {
            self.subtree_tokens(trie, child, d, allow);
        }
    }

    /// Append committed bytes; false (and no change) when they rule out a copied value.
    pub(crate) fn commit(&mut self, bytes: &[u8]) -> bool {
        match self.step(&self.at, bytes) {
            Some(at) => {
                self.at = at;
                true
            }
            None => false,
        }
    }

    fn step(&self, at: &At, bytes: &[u8]) -> Option<At> {
        let mut at = at.clone();
        for &c in bytes {
            at = match at {
                At::Name(mut name) => match c {
                    b'(' => At::Key {
                        tool: name,
                        key: Vec::new(),
                    },
                    b' ' | b'|' => At::Name(name),
                    _ => {
                        name.push(c);
                        At::Name(name)
                    }
                },
                At::Key { tool, mut key } => match c {
                    b'=' => {
                        let text = |b: &[u8]| std::str::from_utf8(b).unwrap_or("").to_owned();
                        let hole = self
                            .keys
                            .get(&text(&tool))
                            .and_then(|k| k.get(&text(&key)))
                            .copied()
                            .flatten();
                        let copied =
                            hole.map(|h| (h, (0..self.holes[h].starts.len()).collect(), 0));
                        At::Value { tool, copied }
                    }
                    b')' => At::AfterCall,
                    b' ' => At::Key { tool, key },
                    _ => {
                        key.push(c);
                        At::Key { tool, key }
                    }
                },
                At::Value { tool, copied } => match c {
                    b';' | b')' => {
                        if let Some((hole, cands, len)) = &copied {
                            if !self.fits(*hole, cands, *len, b"", true) {
                                return None;
                            }
                        }
                        if c == b')' {
                            At::AfterCall
                        } else {
                            At::Key {
                                tool,
                                key: Vec::new(),
                            }
                        }
                    }
                    _ => match copied {
                        Some((hole, mut cands, len)) => {
                            let spans = &self.holes[hole];
                            cands.retain(|&i| {
                                let p = spans.starts[i] + len;
                                self.request.get(p) == Some(&c)
                                    && spans.ends[i].last().is_some_and(|&e| e > p)
                            });
                            if cands.is_empty() {
                                return None;
                            }
                            At::Value {
                                tool,
                                copied: Some((hole, cands, len + 1)),
                            }
                        }
                        None => At::Value { tool, copied: None },
                    },
                },
                At::AfterCall => match c {
                    b'|' => At::Name(Vec::new()),
                    _ => At::AfterCall,
                },
            };
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(request: &str, chunks: &[&str], pattern: &str) -> CopyFilter {
        let mut keys = CopyKeys::new();
        let say = keys.entry("say".into()).or_default();
        say.insert("text".into(), Some(0));
        say.insert("voice".into(), None);
        let mut rx = llguidance::derivre::Regex::new(pattern).unwrap();
        let spans = HoleSpans::find(request, chunks, &mut rx);
        CopyFilter::new(Arc::new(keys), request, vec![spans])
    }

    #[test]
    fn copied_values_are_whole_consecutive_chunks() {
        let chunks = ["say", " ", "hello", " ", "world"];
        let mut f = filter("say hello world", &chunks, "[^()|=;\n]+");
        assert!(f.commit(b"say(text="));
        assert!(f.accepts(b"hello"));
        assert!(f.accepts(b"hel"), "a prefix of a chunk is fine mid-value");
        assert!(
            !f.accepts(b"hel)"),
            "but the value cannot end inside a chunk"
        );
        assert!(!f.accepts(b"bye"));
        assert!(f.accepts(b"hello world)"));
        assert!(f.commit(b"hello"));
        assert!(!f.accepts(b"world"), "consecutive chunks only");
        assert!(f.accepts(b" world; voice=anything"));
        assert!(f.commit(b" world; voice=anything)"));
        assert!(f.accepts(b" | say(text=say)\n"));
        assert!(!f.accepts(b" | say(text=sa)\n"));
        assert!(
            !f.accepts(b" | say(text=)\n"),
            "a copied value is never empty"
        );
    }

    #[test]
    fn tool_and_key_names_may_be_any_utf8() {
        let mut keys = CopyKeys::new();
        keys.entry("größe".into())
            .or_default()
            .insert("wert".into(), Some(0));
        let chunks = ["setze", " ", "blau"];
        let mut rx = llguidance::derivre::Regex::new("[^()|=;\n]+").unwrap();
        let spans = HoleSpans::find("setze blau", &chunks, &mut rx);
        let mut f = CopyFilter::new(Arc::new(keys), "setze blau", vec![spans]);
        assert!(f.commit("größe(wert=".as_bytes()));
        assert!(!f.accepts(b"rot"), "the copied key is recognised");
        assert!(f.accepts(b"blau)"));
    }

    #[test]
    fn a_value_must_stay_a_prefix_of_a_span_that_matches_the_pattern() {
        // an integer copied from "x-ray 42": `-` starts a span ("-ray") and an integer ("-4"),
        // but no span that is an integer
        let chunks = ["x", "-", "ray", " ", "42"];
        let f = filter("x-ray 42", &chunks, "-?[0-9]+");
        let mut f = f;
        assert!(f.commit(b"say(text="));
        assert!(!f.accepts(b"-"));
        assert!(f.accepts(b"4"));
        assert!(!f.accepts(b"4)"));
        assert!(f.accepts(b"42)"));
    }
}
