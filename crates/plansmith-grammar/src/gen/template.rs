//! The request-independent template of a grammar, its copy and entity holes, and filling
//! them for one request.

use super::*;
use llguidance::derivre::Regex;
use std::sync::{Arc, OnceLock};

/// A regex compiled on first use and shared by every request a template serves. Each use
/// takes a clone: matching grows the regex's lazily built automaton (`&mut`), so requests
/// cannot share one. Compiling the hole regexes afresh for each request was ~6% of the tiny
/// planner's request time. Compared, hashed and printed by its source.
#[derive(Clone)]
pub(crate) struct SharedRegex {
    source: String,
    compiled: Arc<OnceLock<Option<Regex>>>,
}

impl SharedRegex {
    pub(super) fn new(source: String) -> Self {
        Self {
            source,
            compiled: Arc::default(),
        }
    }

    /// The pattern, as written into the grammar.
    pub(super) fn source(&self) -> &str {
        &self.source
    }

    /// A fresh copy of the compiled regex; `None` when the pattern does not compile.
    fn regex(&self) -> Option<Regex> {
        self.compiled
            .get_or_init(|| Regex::new(&self.source).ok())
            .clone()
    }
}

impl PartialEq for SharedRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for SharedRegex {}

impl std::hash::Hash for SharedRegex {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.source.hash(state);
    }
}

impl std::fmt::Debug for SharedRegex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "/{}/", self.source)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CopyHole {
    /// JSON string (chunks are JSON-escaped and the span is quoted) or bare text.
    pub(super) quoted: bool,
    /// How to tell whether the request has any span for this hole.
    pub(super) check: HoleCheck,
    /// Regex the span is intersected with (DSL safety, lengths, integer shape...).
    pub(super) conj: SharedRegex,
}

impl EntityHole {
    /// The visible labels of this type that the value rules allow, sorted, deduplicated.
    pub(super) fn labels<'r>(&self, request: &'r Request, unit: CopyUnit) -> Vec<&'r str> {
        let mut labels: Vec<&str> = request
            .entities
            .iter()
            .filter(|e| e.entity_type == self.entity_type)
            .map(|e| e.label.as_str())
            .filter(|l| {
                let n = l.chars().count();
                n >= self.min_len.max(1)
                    && self.max_len.is_none_or(|m| n <= m)
                    && (self.quoted || is_valid_dsl_value(l))
                    && (!self.copy || is_copied(l, &request.text, unit))
            })
            .collect();
        labels.sort_unstable();
        labels.dedup();
        labels
    }

    pub(super) fn alternatives(&self, labels: &[&str]) -> String {
        let alts: Vec<String> = labels
            .iter()
            .map(|l| {
                if self.quoted {
                    lit(&serde_json::to_string(l).unwrap_or_default())
                } else {
                    lit(l)
                }
            })
            .collect();
        alts.join(" | ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum HoleCheck {
    /// A string of `min..=max` characters; `dsl`: none of the DSL's reserved characters.
    Str {
        dsl: bool,
        min: usize,
        max: Option<usize>,
    },
    /// A span matching this regex, at most `max_len` bytes long (on the escaped text when
    /// `quoted`). `numbers`: an integer or number, which may also be a number the request
    /// states in a way no span spells ("1,000" -> 1000, "three" -> 3: the
    /// [`number_literals`] matching the regex).
    Regex {
        regex: SharedRegex,
        max_len: usize,
        quoted: bool,
        numbers: bool,
    },
}

impl HoleCheck {
    /// Whether the hole is a number, which may also take the request's [`number_literals`].
    fn takes_numbers(&self) -> bool {
        matches!(self, HoleCheck::Regex { numbers: true, .. })
    }

    /// The literals a hole of this check may take besides spans of the request.
    fn literals<'l>(&self, literals: &'l [String]) -> Vec<&'l str> {
        match self {
            HoleCheck::Regex {
                regex,
                numbers: true,
                ..
            } => match regex.regex() {
                Some(mut rx) => literals
                    .iter()
                    .filter(|l| rx.is_match(l))
                    .map(String::as_str)
                    .collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Whether some span of `chunks` (contiguous, whole chunks) or one of the request's
    /// `literals` ([`number_literals`]) satisfies the check.
    pub(super) fn satisfiable(&self, chunks: &[&str], literals: &[String]) -> bool {
        if !self.literals(literals).is_empty() {
            return true;
        }
        match self {
            HoleCheck::Str { dsl, min, max } => {
                // A value neither starts nor ends with whitespace; chunks are all-whitespace or
                // none (`chunks`), so only whole chunks need checking.
                let blank = |c: &str| c.chars().all(char::is_whitespace);
                for i in 0..chunks.len() {
                    if blank(chunks[i]) {
                        continue;
                    }
                    let mut len = 0;
                    for c in &chunks[i..] {
                        if *dsl && c.contains(plansmith_core::syntax::DSL_FORBIDDEN) {
                            break;
                        }
                        len += c.chars().count();
                        if max.is_some_and(|m| len > m) {
                            break;
                        }
                        if len >= *min && !blank(c) {
                            return true;
                        }
                    }
                }
                false
            }
            HoleCheck::Regex {
                regex,
                max_len,
                quoted,
                ..
            } => {
                let Some(mut rx) = regex.regex() else {
                    return true;
                };
                for i in 0..chunks.len() {
                    let mut span = String::new();
                    for c in &chunks[i..] {
                        if *quoted {
                            span.push_str(&rx::json_escape_body(c));
                        } else {
                            span.push_str(c);
                        }
                        if span.len() > *max_len {
                            break;
                        }
                        if rx.is_match(&span) {
                            return true;
                        }
                    }
                }
                false
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct EntityHole {
    pub(super) quoted: bool,
    pub(super) entity_type: String,
    /// Expression used when no visible entity of this type qualifies.
    pub(super) fallback: String,
    /// Label must also be copied from the request (policy).
    pub(super) copy: bool,
    pub(super) min_len: usize,
    pub(super) max_len: Option<usize>,
}

/// What a DSL key's value is, over every place the grammar writes that key for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyKind {
    Plain,
    /// Fills this copy hole.
    Copied(usize),
    /// Copied in one place and not in another, or a mix inside one value: not trackable.
    Mixed,
}

/// The request-independent part of a grammar (see the module docs).
#[derive(Debug, Clone)]
pub struct Template {
    pub(super) lark: String,
    pub(super) copy_holes: Vec<CopyHole>,
    pub(super) entity_holes: Vec<EntityHole>,
    /// DSL only: which keys take copied values, when that is unambiguous per (tool, key) —
    /// then copy spans are checked by a [`crate::copyfilter::CopyFilter`] beside one shared
    /// compiled grammar instead of compiled into a grammar per request.
    pub(super) copy_keys: Option<std::sync::Arc<CopyKeys>>,
    pub(super) copy_unit: CopyUnit,
    pub(super) catalog: std::sync::Arc<Catalog>,
    pub(super) options: Options,
}

impl Template {
    /// Whether the grammar is the same for every request (no copy spans, no entity labels):
    /// then a compiled matcher can be cached and cloned.
    pub fn is_request_independent(&self) -> bool {
        self.copy_holes.is_empty() && self.entity_holes.is_empty()
    }

    /// Whether this request changes the grammar: copy spans always do; entities only when
    /// one has a type some EntityRef uses.
    pub fn depends_on(&self, request: &Request) -> bool {
        !self.copy_holes.is_empty()
            || request.entities.iter().any(|e| {
                self.entity_holes
                    .iter()
                    .any(|h| h.entity_type == e.entity_type)
            })
    }

    /// Whether some requests share one compiled grammar (no copy spans): those whose
    /// entities do not touch the EntityRefs.
    pub(crate) fn has_shared_form(&self) -> bool {
        self.copy_holes.is_empty()
    }

    /// Whether requests share compiled grammars with copy spans checked while decoding.
    pub(crate) fn checks_copies_while_decoding(&self) -> bool {
        self.copy_keys.is_some()
    }

    /// The grammar every request shares when a [`CopyFilter`] checks its copy spans (DSL
    /// templates whose copied keys are unambiguous): copy holes as their request-independent
    /// lexemes, entity labels as their fallbacks.
    pub(crate) fn filtered_grammar(&self) -> Option<String> {
        self.copy_keys.as_ref()?;
        let mut out = self.lark.clone();
        out.push_str("\n// ---- copy spans are checked while decoding ----\n");
        for (i, h) in self.copy_holes.iter().enumerate() {
            let _ = writeln!(out, "copy_{i}: COPY_{i}\nCOPY_{i}: /{}/", h.conj.source());
        }
        for (i, h) in self.entity_holes.iter().enumerate() {
            let _ = writeln!(out, "ent_{i}: {}", h.fallback);
        }
        Some(out)
    }

    /// The copy holes `request` has no span for (their values are left out of its grammar),
    /// when its copy spans can be checked while decoding: a DSL template whose copied keys are
    /// unambiguous, a non-empty request, and no visible entity of a type an EntityRef uses.
    /// Returns them with the request's chunks, which [`Self::copy_filter`] takes.
    pub(crate) fn impossible_holes<'r>(
        &self,
        request: &'r Request,
    ) -> Option<(Vec<usize>, Vec<&'r str>)> {
        self.copy_keys.as_ref()?;
        let entity_labels = request.entities.iter().any(|e| {
            self.entity_holes
                .iter()
                .any(|h| h.entity_type == e.entity_type)
        });
        let raw = chunks(&request.text, self.copy_unit);
        if entity_labels || raw.is_empty() {
            return None;
        }
        let literals = number_literals(&request.text);
        let impossible = (0..self.copy_holes.len())
            .filter(|&i| !self.copy_holes[i].check.satisfiable(&raw, &literals))
            .collect();
        Some((impossible, raw))
    }

    /// The template with some copy holes' values left out (what [`Self::grammar`] builds for
    /// a request with no span for them), shared by every request with the same such holes.
    pub(crate) fn without_holes(&self, impossible: &[usize]) -> Result<Template, GrammarError> {
        let holes = impossible
            .iter()
            .filter_map(|&i| self.copy_holes.get(i).cloned())
            .collect();
        generate(&self.catalog, &self.options, holes, None)
    }

    /// The copy filter for `request` (cut into `chunks`) over [`Self::filtered_grammar`]:
    /// this template must be the one without the request's impossible holes (see
    /// [`Self::impossible_holes`]), so every hole left has a span.
    pub(crate) fn copy_filter(&self, request: &Request, chunks: &[&str]) -> Option<CopyFilter> {
        let keys = self.copy_keys.as_ref()?;
        // Stated numbers no span spells are appended to the text the filter copies from, each
        // after a NUL no span can cross, as spans of their own.
        let literals = number_literals(&request.text);
        let mut text = request.text.clone();
        let mut literal_at = Vec::with_capacity(literals.len());
        for l in &literals {
            text.push('\0');
            literal_at.push(text.len());
            text.push_str(l);
        }
        let mut holes = Vec::with_capacity(self.copy_holes.len());
        for h in &self.copy_holes {
            let mut pattern = h.conj.regex()?;
            let mut spans = HoleSpans::find(&request.text, chunks, &mut pattern);
            if h.check.takes_numbers() {
                for (l, &at) in literals.iter().zip(&literal_at) {
                    if pattern.is_match(l) {
                        spans.push_literal(at, l.len());
                    }
                }
            }
            if spans.is_empty() {
                return None;
            }
            holes.push(spans);
        }
        Some(CopyFilter::new(keys.clone(), &text, holes))
    }

    /// The request-independent Lark text (holes referenced, not defined).
    pub fn template_text(&self) -> &str {
        &self.lark
    }

    /// The complete Lark grammar for one request.
    ///
    /// Usually the template plus a few hole definitions. When a copy hole has no span in the
    /// request (e.g. an integer to copy and no number in the request), the grammar is
    /// regenerated for this request with that value impossible — optional keys dropped,
    /// tools that need it removed — so decoding never walks into a dead end. That fails only
    /// when a call is required and no tool can be called.
    pub fn grammar(&self, request: &Request) -> Result<String, GrammarError> {
        if !self.copy_holes.is_empty() {
            let raw = chunks(&request.text, self.copy_unit);
            let literals = number_literals(&request.text);
            let impossible: Vec<CopyHole> = self
                .copy_holes
                .iter()
                .filter(|h| !h.check.satisfiable(&raw, &literals))
                .cloned()
                .collect();
            if !impossible.is_empty() {
                let variant = generate(&self.catalog, &self.options, impossible, Some(request))?;
                return Ok(variant.fill(request));
            }
        }
        Ok(self.fill(request))
    }

    pub(super) fn fill(&self, request: &Request) -> String {
        let mut out = String::with_capacity(self.lark.len() + 256 + request.text.len() * 4);
        out.push_str(&self.lark);
        if self.copy_holes.is_empty() && self.entity_holes.is_empty() {
            return out;
        }
        out.push_str("\n// ---- per-request ----\n");
        if !self.copy_holes.is_empty() {
            let raw = chunks(&request.text, self.copy_unit);
            let literals = number_literals(&request.text);
            let raw_json = serde_json::to_string(&raw).unwrap_or_else(|_| "[]".into());
            let esc: Vec<String> = raw.iter().map(|c| rx::json_escape_body(c)).collect();
            let esc_json = serde_json::to_string(&esc).unwrap_or_else(|_| "[]".into());
            for (i, h) in self.copy_holes.iter().enumerate() {
                if raw.is_empty() {
                    // nothing to copy from: a lexeme that cannot match anything we emit
                    let _ = writeln!(out, "copy_{i}: COPY_{i}\nCOPY_{i}: /[a]/ & /[b]/");
                } else if h.quoted {
                    let _ = writeln!(
                        out,
                        "copy_{i}: COPY_{i}\nCOPY_{i}: \"\\\"\" (%regex {{\"substring_chunks\": {esc_json}}} & /{}/) \"\\\"\"",
                        h.conj.source()
                    );
                } else {
                    let extra: String = h
                        .check
                        .literals(&literals)
                        .iter()
                        .map(|l| format!(" | {}", lit(l)))
                        .collect();
                    let _ = writeln!(
                        out,
                        "copy_{i}: COPY_{i}\nCOPY_{i}: (%regex {{\"substring_chunks\": {raw_json}}} & /{}/){extra}",
                        h.conj.source()
                    );
                }
            }
        }
        for (i, h) in self.entity_holes.iter().enumerate() {
            let labels = h.labels(request, self.copy_unit);
            if labels.is_empty() {
                let _ = writeln!(out, "ent_{i}: {}", h.fallback);
            } else {
                let _ = writeln!(out, "ent_{i}: {}", h.alternatives(&labels));
            }
        }
        out
    }
}

/// Word chunks (runs of word characters, of whitespace, of other characters — the same
/// classes as `plansmith_core::policy::is_word_char`, with a number's `.` / `,` between digits
/// inside its word, as `plansmith_core::policy::is_number_separator` says) or single characters.
pub(super) fn chunks(text: &str, unit: CopyUnit) -> Vec<&str> {
    match unit {
        CopyUnit::Chars => text
            .char_indices()
            .map(|(i, c)| &text[i..i + c.len_utf8()])
            .collect(),
        CopyUnit::Words => {
            use plansmith_core::policy::{is_number_separator, is_word_char};
            let chars: Vec<(usize, char)> = text.char_indices().collect();
            let class = |j: usize| {
                let c = chars[j].1;
                let around = |k: Option<usize>| k.and_then(|k| chars.get(k)).map(|&(_, c)| c);
                if c.is_whitespace() {
                    0
                } else if is_word_char(c)
                    || is_number_separator(around(j.checked_sub(1)), c, around(Some(j + 1)))
                {
                    1
                } else {
                    2
                }
            };
            let mut out = Vec::new();
            let mut start = 0;
            let mut prev = None;
            for (j, &(i, _)) in chars.iter().enumerate() {
                let k = class(j);
                if prev.is_some_and(|p| p != k) {
                    out.push(&text[start..i]);
                    start = i;
                }
                prev = Some(k);
            }
            if start < text.len() {
                out.push(&text[start..]);
            }
            out
        }
    }
}
