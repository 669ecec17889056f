//! Catalog -> Lark grammar (llguidance dialect).
//!
//! Generation is split in two so the expensive, catalog-dependent part is done once:
//!
//! * [`Template`]: every rule that depends only on (catalog, syntax, policy, tool choice,
//!   max calls). Request-dependent values appear as *holes*: rule names (`copy_N`, `ent_N`)
//!   the template references but does not define.
//! * [`Template::grammar`]: appends the hole definitions for one [`Request`] — copy spans as
//!   llguidance `%regex {"substring_chunks": ...}` lexemes, visible-entity labels as literal
//!   alternatives — a few lines of text, microseconds.
//!
//! Choices (documented contracts):
//! * keys come in schema property order (optional keys skippable, each at most once, required
//!   ones mandatory); unknown keys are impossible. The DSL flattens nested objects / arrays as
//!   dotted keys in the same depth-first order. DSL arrays enumerate indices up to `maxItems`
//!   or [`DSL_ARRAY_CAP`].
//! * JSON syntaxes are compact with an optional single space after `:` and `,`.
//! * Numbers are bounded to 15 integer digits and 6 fraction digits (no exponent), so every
//!   emitted number parses exactly in every consumer. Ranges are honoured; for non-integers
//!   the language is a subset of the interval (see [`crate::regex::number_range`]).
//! * The grammar is never looser than `Syntax::parse` + validation: where an exact encoding
//!   is impossible it is stricter (fewer outputs), never silently looser; a feature we cannot
//!   honour at all is a [`GrammarError::Unsupported`].

use std::collections::HashMap;
use std::fmt::Write as _;

use plansmith_core::policy::is_copied;
use plansmith_core::request::{Request, ToolChoice};
use plansmith_core::syntax::is_valid_dsl_value;
use plansmith_core::{Catalog, CopyUnit, Policy, Syntax};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::copyfilter::{CopyFilter, CopyKeys, HoleSpans};
use crate::error::GrammarError;
use crate::regex::{self as rx, lit, repeat, JSON_CHAR};

/// Largest array the DSL grammar can emit when the schema sets no `maxItems`.
pub const DSL_ARRAY_CAP: usize = 16;

const DSL_SAFE: &str = "[^()|=;\\n]";
/// A [`DSL_SAFE`] character that is not whitespace: the first and last of a copied value.
const DSL_SAFE_NON_SPACE: &str = "[^()|=;\\s]";

/// Everything about a constraint except the catalog and the request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Options {
    pub syntax: Syntax,
    pub policy: Policy,
    pub tool_choice: ToolChoice,
    /// Most calls in one plan (`parallel_tool_calls = false` -> 1).
    pub max_calls: usize,
}

impl Options {
    pub fn new(syntax: Syntax) -> Self {
        let policy = if syntax == Syntax::Dsl {
            Policy::copy_free_strings()
        } else {
            Policy::default()
        };
        Options {
            syntax,
            policy,
            tool_choice: ToolChoice::Auto,
            max_calls: 4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CopyHole {
    /// JSON string (chunks are JSON-escaped and the span is quoted) or bare text.
    quoted: bool,
    /// How to tell whether the request has any span for this hole.
    check: HoleCheck,
    /// Regex the span is intersected with (DSL safety, lengths, integer shape...).
    conj: String,
}

impl EntityHole {
    /// The visible labels of this type that the value rules allow, sorted, deduplicated.
    fn labels<'r>(&self, request: &'r Request, unit: CopyUnit) -> Vec<&'r str> {
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

    fn alternatives(&self, labels: &[&str]) -> String {
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
    /// `quoted`).
    Regex {
        regex: String,
        max_len: usize,
        quoted: bool,
    },
}

impl HoleCheck {
    /// Whether some span of `chunks` (contiguous, whole chunks) satisfies the check.
    fn satisfiable(&self, chunks: &[&str]) -> bool {
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
            } => {
                let Ok(mut rx) = llguidance::derivre::Regex::new(regex) else {
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
    quoted: bool,
    entity_type: String,
    /// Expression used when no visible entity of this type qualifies.
    fallback: String,
    /// Label must also be copied from the request (policy).
    copy: bool,
    min_len: usize,
    max_len: Option<usize>,
}

/// What a DSL key's value is, over every place the grammar writes that key for a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Plain,
    /// Fills this copy hole.
    Copied(usize),
    /// Copied in one place and not in another, or a mix inside one value: not trackable.
    Mixed,
}

/// The request-independent part of a grammar (see the module docs).
#[derive(Debug, Clone)]
pub struct Template {
    lark: String,
    copy_holes: Vec<CopyHole>,
    entity_holes: Vec<EntityHole>,
    /// DSL only: which keys take copied values, when that is unambiguous per (tool, key) —
    /// then copy spans are checked by a [`crate::copyfilter::CopyFilter`] beside one shared
    /// compiled grammar instead of compiled into a grammar per request.
    copy_keys: Option<std::sync::Arc<CopyKeys>>,
    copy_unit: CopyUnit,
    catalog: std::sync::Arc<Catalog>,
    options: Options,
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
            let _ = writeln!(out, "copy_{i}: COPY_{i}\nCOPY_{i}: /{}/", h.conj);
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
        let impossible = (0..self.copy_holes.len())
            .filter(|&i| !self.copy_holes[i].check.satisfiable(&raw))
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
        let mut holes = Vec::with_capacity(self.copy_holes.len());
        for h in &self.copy_holes {
            let mut pattern = llguidance::derivre::Regex::new(&h.conj).ok()?;
            let spans = HoleSpans::find(&request.text, chunks, &mut pattern);
            if spans.is_empty() {
                return None;
            }
            holes.push(spans);
        }
        Some(CopyFilter::new(keys.clone(), &request.text, holes))
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
            let impossible: Vec<CopyHole> = self
                .copy_holes
                .iter()
                .filter(|h| !h.check.satisfiable(&raw))
                .cloned()
                .collect();
            if !impossible.is_empty() {
                let variant = generate(&self.catalog, &self.options, impossible, Some(request))?;
                return Ok(variant.fill(request));
            }
        }
        Ok(self.fill(request))
    }

    fn fill(&self, request: &Request) -> String {
        let mut out = String::with_capacity(self.lark.len() + 256 + request.text.len() * 4);
        out.push_str(&self.lark);
        if self.copy_holes.is_empty() && self.entity_holes.is_empty() {
            return out;
        }
        out.push_str("\n// ---- per-request ----\n");
        if !self.copy_holes.is_empty() {
            let raw = chunks(&request.text, self.copy_unit);
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
                        h.conj
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "copy_{i}: COPY_{i}\nCOPY_{i}: %regex {{\"substring_chunks\": {raw_json}}} & /{}/",
                        h.conj
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
/// classes as `plansmith_core::policy::is_word_char`) or single characters.
fn chunks(text: &str, unit: CopyUnit) -> Vec<&str> {
    match unit {
        CopyUnit::Chars => text
            .char_indices()
            .map(|(i, c)| &text[i..i + c.len_utf8()])
            .collect(),
        CopyUnit::Words => {
            let class = |c: char| {
                if c.is_whitespace() {
                    0
                } else if plansmith_core::policy::is_word_char(c) {
                    1
                } else {
                    2
                }
            };
            let mut out = Vec::new();
            let mut start = 0;
            let mut prev = None;
            for (i, c) in text.char_indices() {
                let k = class(c);
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Surface {
    Dsl,
    Json,
}

struct Gen<'a> {
    surface: Surface,
    policy: &'a Policy,
    rules: String,
    token_defs: String,
    n: usize,
    tokens: HashMap<String, String>,
    leaf_memo: HashMap<String, String>,
    copy_holes: Vec<CopyHole>,
    entity_holes: Vec<EntityHole>,
    /// DSL keys per tool and what their values are (see [`Template`]'s `copy_keys`).
    dsl_keys: HashMap<(String, String), KeyKind>,
    /// Holes known to have no span in the request (regeneration for one request).
    impossible: Vec<CopyHole>,
    /// The request, when generating for one request (entity branches decided now).
    request: Option<(&'a Request, CopyUnit)>,
}

/// Internal: a typed refusal, or "no value exists for this request" (a copy span with no
/// match), which enclosing optional keys / branches / tools absorb.
#[derive(Debug)]
enum GenErr {
    Grammar(GrammarError),
    Impossible,
}

impl From<GrammarError> for GenErr {
    fn from(e: GrammarError) -> Self {
        GenErr::Grammar(e)
    }
}

type R<T> = Result<T, GenErr>;

fn unsupported(tool: &str, path: &str, feature: impl Into<String>) -> GenErr {
    GenErr::Grammar(GrammarError::Unsupported {
        tool: tool.to_string(),
        path: if path.is_empty() {
            "(arguments)".into()
        } else {
            path.to_string()
        },
        feature: feature.into(),
    })
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a Lark expression names a copy or entity hole (`copy_3`, `ent_0`) outside its
/// string literals and regexes.
fn refers_to_a_hole(expr: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut word = String::new();
    let is_hole = |w: &str| {
        ["copy_", "ent_"].iter().any(|p| {
            w.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    for c in expr.chars().chain(std::iter::once(' ')) {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if is_hole(&word) {
            return true;
        }
        word.clear();
        if c == '"' || c == '/' {
            quote = Some(c);
        }
    }
    false
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The entity types of an EntityRef object: `{type: enum[...], label: free string}`.
fn entity_ref_types(schema: &Value) -> Option<Vec<String>> {
    let props = schema.get("properties")?.as_object()?;
    let t = props.get("type")?;
    let label = props.get("label")?;
    if types(t) != ["string"] || types(label) != ["string"] {
        return None;
    }
    if ["enum", "const", "pattern", "format"]
        .iter()
        .any(|k| label.get(k).is_some())
    {
        return None;
    }
    let values: Vec<String> = t
        .get("enum")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    (!values.is_empty()).then_some(values)
}

fn json_type_ok(ts: &[&str], v: &Value) -> bool {
    ts.is_empty()
        || ts.iter().any(|t| match *t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            _ => false,
        })
}

fn get_usize(schema: &Value, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|v| v as usize)
}

/// (lower, upper) bounds with exclusivity, from minimum/maximum/exclusive* (draft 4 and 6+).
type Bound = Option<(f64, bool)>;
fn bounds(schema: &Value) -> (Bound, Bound) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool).unwrap_or(false);
    let tighter = |a: Bound, b: Bound, lower: bool| match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) => {
            let pick_x = if x.0 == y.0 {
                x.1
            } else if lower {
                x.0 > y.0
            } else {
                x.0 < y.0
            };
            Some(if pick_x { x } else { y })
        }
    };
    let lo = num("minimum").map(|v| (v, flag("exclusiveMinimum")));
    let lo = tighter(lo, num("exclusiveMinimum").map(|v| (v, true)), true);
    let hi = num("maximum").map(|v| (v, flag("exclusiveMaximum")));
    let hi = tighter(hi, num("exclusiveMaximum").map(|v| (v, true)), false);
    (lo, hi)
}

fn int_bounds(schema: &Value) -> (Option<i64>, Option<i64>) {
    let (lo, hi) = bounds(schema);
    let clamp = |f: f64| f.clamp(-1e16, 1e16) as i64;
    let lo = lo.map(|(v, ex)| {
        if ex {
            clamp(v.floor()) + 1
        } else {
            clamp(v.ceil())
        }
    });
    let hi = hi.map(|(v, ex)| {
        if ex {
            clamp(v.ceil()) - 1
        } else {
            clamp(v.floor())
        }
    });
    (lo, hi)
}

impl<'a> Gen<'a> {
    fn new(surface: Surface, policy: &'a Policy) -> Self {
        Gen {
            surface,
            policy,
            rules: String::new(),
            token_defs: String::new(),
            n: 0,
            tokens: HashMap::new(),
            leaf_memo: HashMap::new(),
            copy_holes: Vec::new(),
            entity_holes: Vec::new(),
            dsl_keys: HashMap::new(),
            impossible: Vec::new(),
            request: None,
        }
    }

    fn rule(&mut self, prefix: &str, expr: &str) -> String {
        self.n += 1;
        let name = format!("{prefix}_{}", self.n);
        let _ = writeln!(self.rules, "{name}: {expr}");
        name
    }

    /// A named lexeme for a Lark token body (deduplicated).
    fn token(&mut self, body: String) -> String {
        if let Some(name) = self.tokens.get(&body) {
            return name.clone();
        }
        self.n += 1;
        let name = format!("T{}", self.n);
        let _ = writeln!(self.token_defs, "{name}: {body}");
        self.tokens.insert(body, name.clone());
        name
    }

    fn copy_hole(&mut self, quoted: bool, conj: String, check: HoleCheck) -> R<String> {
        let hole = CopyHole {
            quoted,
            conj,
            check,
        };
        if self.impossible.contains(&hole) {
            return Err(GenErr::Impossible);
        }
        let i = match self.copy_holes.iter().position(|h| *h == hole) {
            Some(i) => i,
            None => {
                self.copy_holes.push(hole);
                self.copy_holes.len() - 1
            }
        };
        Ok(format!("copy_{i}"))
    }

    fn entity_hole(&mut self, hole: EntityHole) -> String {
        let i = match self.entity_holes.iter().position(|h| *h == hole) {
            Some(i) => i,
            None => {
                self.entity_holes.push(hole);
                self.entity_holes.len() - 1
            }
        };
        format!("ent_{i}")
    }

    /// `key=value` in the DSL, noting whether `key` of `tool` takes a copied value.
    fn dsl_pair(&mut self, tool: &str, key: &str, value: &str) -> String {
        let hole = |prefix: &str| {
            value
                .strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
        };
        let kind = if let Some(i) = hole("copy_") {
            KeyKind::Copied(i)
        } else if let Some(i) = hole("ent_") {
            // without visible entities the label is the hole's fallback expression
            match self.entity_holes.get(i).map(|h| h.fallback.as_str()) {
                Some(f) => match f
                    .strip_prefix("copy_")
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(j) => KeyKind::Copied(j),
                    None if !refers_to_a_hole(f) => KeyKind::Plain,
                    None => KeyKind::Mixed,
                },
                None => KeyKind::Mixed,
            }
        } else if refers_to_a_hole(value) {
            KeyKind::Mixed
        } else {
            KeyKind::Plain
        };
        self.dsl_keys
            .entry((tool.to_string(), key.to_string()))
            .and_modify(|k| {
                if *k != kind {
                    *k = KeyKind::Mixed
                }
            })
            .or_insert(kind);
        format!("{} {value}", lit(&format!("{key}=")))
    }

    fn sep(&self) -> &'static str {
        match self.surface {
            Surface::Dsl => "\"; \"",
            Surface::Json => "COMMA",
        }
    }

    /// Ordered sequence of segments separated by `sep`: required ones mandatory, optional
    /// ones skippable. Returns the expression for a *non-empty* sequence (None if impossible)
    /// and whether the empty sequence is allowed.
    fn sequence(&mut self, segs: &[(String, bool)]) -> (Option<String>, bool) {
        let n = segs.len();
        let sep = self.sep();
        // ne[i] (a non-empty sequence drawn from segments i..) is needed when every segment
        // before i is optional; tail[i] (segments i.., each prefixed by the separator) when
        // ne[i-1] or tail[i-1] is.
        let mut ne_needed = vec![false; n];
        ne_needed[0] = true;
        for i in 1..n {
            ne_needed[i] = ne_needed[i - 1] && !segs[i - 1].1;
        }
        let mut tail_needed = vec![false; n + 1];
        for i in 1..=n {
            tail_needed[i] = ne_needed[i - 1] || tail_needed[i - 1];
        }
        let mut tail = vec![String::new(); n + 1];
        for i in (1..n).rev() {
            if !tail_needed[i] {
                continue;
            }
            let (seg, req) = &segs[i];
            let item = if *req {
                format!("{sep} {seg}")
            } else {
                format!("({sep} {seg})?")
            };
            tail[i] = if tail[i + 1].is_empty() {
                item
            } else {
                self.rule("tl", &format!("{item} {}", tail[i + 1]))
            };
        }
        let mut nonempty: Option<String> = None;
        for i in (0..n).rev() {
            if !ne_needed[i] {
                continue;
            }
            let (seg, req) = &segs[i];
            let here = format!("{seg} {}", tail[i + 1]).trim().to_string();
            let expr = match (&nonempty, req) {
                (Some(rest), false) => format!("{here} | {rest}"),
                _ => here,
            };
            nonempty = Some(self.rule("ne", &expr));
        }
        let allow_empty = segs.iter().all(|(_, r)| !r);
        (nonempty, allow_empty)
    }

    // ---------------------------------------------------------------- leaves

    /// Expression for a leaf value (and, for JSON, any value).
    fn value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        if let Some(any) = schema.get("anyOf") {
            return self.any_of(tool, path, schema, any);
        }
        if schema.as_bool() == Some(true) || schema.as_object().is_some_and(|m| m.is_empty()) {
            return match self.surface {
                Surface::Dsl => Ok(self.token(format!("/{DSL_SAFE}+/"))),
                Surface::Json => Err(unsupported(tool, path, "schema without a type (any value)")),
            };
        }
        let ts = types(schema);
        let copy = self.policy.requires_copy(tool, path, schema)
            && ts.len() == 1
            && matches!(ts[0], "string" | "integer" | "number")
            && schema.get("enum").is_none()
            && schema.get("const").is_none();
        if copy {
            return self.copy_value(tool, path, schema, ts[0]);
        }
        let copy_enum = self.policy.requires_copy(tool, path, schema)
            && (schema.get("enum").is_some() || schema.get("const").is_some());
        if copy_enum {
            return self.copy_enum(tool, path, schema);
        }
        if schema.get("enum").is_some() || schema.get("const").is_some() {
            return self.enum_value(tool, path, schema);
        }
        // memoize request-independent leaves by schema text
        let key = format!(
            "{}|{}",
            self.surface as u8,
            plansmith_core::schema::canonical_json(schema)
        );
        if let Some(e) = self.leaf_memo.get(&key) {
            return Ok(e.clone());
        }
        let e = self.typed_value(tool, path, schema, &ts)?;
        if !ts.iter().any(|t| *t == "object" || *t == "array") {
            self.leaf_memo.insert(key, e.clone());
        }
        Ok(e)
    }

    fn typed_value(&mut self, tool: &str, path: &str, schema: &Value, ts: &[&str]) -> R<String> {
        if ts.is_empty() {
            return match self.surface {
                // untyped DSL values stay strings and validate against a typeless schema
                Surface::Dsl => Ok(self.token(format!("/{DSL_SAFE}+/"))),
                Surface::Json => Err(unsupported(tool, path, "schema without a `type`")),
            };
        }
        if self.surface == Surface::Dsl && ts.contains(&"string") {
            // DSL values of a type union containing string are typed as strings
            return self.string_value(tool, path, schema);
        }
        let mut alts = Vec::new();
        for t in ts {
            let e = match *t {
                "string" => self.string_value(tool, path, schema)?,
                "integer" => {
                    let (lo, hi) = int_bounds(schema);
                    match rx::integer_range(lo, hi) {
                        Some(r) => self.token(format!("/{r}/")),
                        None => continue,
                    }
                }
                "number" => {
                    let (lo, hi) = bounds(schema);
                    match rx::number_range(lo, hi) {
                        Some(r) => self.token(format!("/{r}/")),
                        None => continue,
                    }
                }
                "boolean" => "(\"true\" | \"false\")".to_string(),
                "null" => "\"null\"".to_string(),
                "object" | "array" if self.surface == Surface::Json => {
                    if *t == "object" {
                        self.json_object(tool, path, schema)?
                    } else {
                        self.json_array(tool, path, schema)?
                    }
                }
                other => {
                    return Err(unsupported(
                        tool,
                        path,
                        format!("type `{other}` as a DSL value"),
                    ))
                }
            };
            alts.push(e);
        }
        if alts.is_empty() {
            return Err(unsupported(tool, path, "numeric range admits no value"));
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            format!("({})", alts.join(" | "))
        })
    }

    fn any_of(&mut self, tool: &str, path: &str, schema: &Value, any: &Value) -> R<String> {
        if self.surface == Surface::Dsl {
            return Err(unsupported(
                tool,
                path,
                "`anyOf` in the plan DSL (values are typed from one schema)",
            ));
        }
        let constraining = schema.as_object().is_some_and(|m| {
            m.keys().any(|k| {
                !matches!(
                    k.as_str(),
                    "anyOf" | "description" | "title" | "default" | "examples" | "$comment"
                )
            })
        });
        if constraining {
            return Err(unsupported(
                tool,
                path,
                "`anyOf` next to other constraining keywords",
            ));
        }
        let branches = any
            .as_array()
            .ok_or_else(|| unsupported(tool, path, "`anyOf` must be an array"))?;
        let mut alts = Vec::new();
        for b in branches {
            match self.value(tool, path, b) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if alts.is_empty() {
            return Err(if branches.is_empty() {
                unsupported(tool, path, "empty `anyOf`")
            } else {
                GenErr::Impossible
            });
        }
        Ok(format!("({})", alts.join(" | ")))
    }

    fn enum_value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let kept = self.enum_texts(tool, path, schema)?;
        let mut alts: Vec<String> = kept
            .iter()
            .map(|v| match (self.surface, v) {
                (Surface::Dsl, Value::String(s)) => lit(s),
                (Surface::Dsl, v) => lit(&v.to_string()),
                (Surface::Json, v) => lit(&v.to_string()),
            })
            .collect();
        alts.sort();
        alts.dedup();
        Ok(format!("({})", alts.join(" | ")))
    }

    /// The enum/const values representable (and typed back correctly) in this syntax.
    fn enum_texts(&mut self, tool: &str, path: &str, schema: &Value) -> R<Vec<Value>> {
        let values: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
            (Some(Value::Array(a)), None) => a.iter().collect(),
            (None, Some(c)) => vec![c],
            (Some(Value::Array(a)), Some(c)) => a.iter().filter(|v| *v == c).collect(),
            _ => return Err(unsupported(tool, path, "`enum` must be an array")),
        };
        let ts = types(schema);
        let mut alts = Vec::new();
        for v in values {
            match self.surface {
                Surface::Dsl => {
                    let s = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
                        _ => continue,
                    };
                    if is_valid_dsl_value(&s)
                        && plansmith_core::validate::type_string(schema, &s) == *v
                    {
                        alts.push(v.clone());
                    }
                }
                Surface::Json => {
                    if json_type_ok(&ts, v) {
                        alts.push(v.clone());
                    }
                }
            }
        }
        if alts.is_empty() {
            return Err(unsupported(
                tool,
                path,
                "no `enum`/`const` value is representable in this syntax",
            ));
        }
        Ok(alts)
    }

    /// An enum/const value the policy also wants copied: a copy span that must equal one of
    /// the values.
    fn copy_enum(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let alts = self.enum_texts(tool, path, schema)?;
        let quoted = self.surface == Surface::Json && alts.iter().all(|v| v.is_string());
        let mut texts = Vec::new();
        for v in &alts {
            let t = match (v, self.surface) {
                (Value::String(s), Surface::Dsl) => s.clone(),
                (Value::String(s), Surface::Json) if quoted => rx::json_escape_body(s),
                (Value::Number(_), _) => v.to_string(),
                _ => continue,
            };
            texts.push(t);
        }
        if texts.is_empty() {
            return Err(unsupported(
                tool,
                path,
                "copy-from-request on an enum with no copyable value",
            ));
        }
        let max_len = texts.iter().map(String::len).max().unwrap_or(0);
        let regex = format!(
            "(?:{})",
            texts
                .iter()
                .map(|t| rx::escape_literal(t))
                .collect::<Vec<_>>()
                .join("|")
        );
        self.copy_hole(
            quoted,
            regex.clone(),
            HoleCheck::Regex {
                regex,
                max_len,
                quoted,
            },
        )
    }

    fn lengths(&self, tool: &str, path: &str, schema: &Value) -> R<(usize, Option<usize>)> {
        let min = get_usize(schema, "minLength").unwrap_or(0);
        let max = get_usize(schema, "maxLength");
        let min = if self.surface == Surface::Dsl {
            min.max(1)
        } else {
            min
        };
        if max.is_some_and(|m| m < min) {
            return Err(unsupported(
                tool,
                path,
                "string length bounds admit no value in this syntax",
            ));
        }
        Ok((min, max))
    }

    fn string_value(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let (min, max) = self.lengths(tool, path, schema)?;
        let mut shapes = Vec::new();
        if let Some(p) = schema.get("pattern") {
            let p = p
                .as_str()
                .ok_or_else(|| unsupported(tool, path, "`pattern` must be a string"))?;
            shapes.push(rx::anchored_pattern(p));
        }
        if let Some(f) = schema.get("format") {
            let f = f.as_str().unwrap_or("");
            let r = rx::format_regex(f)
                .ok_or_else(|| unsupported(tool, path, format!("string format `{f}`")))?;
            shapes.push(format!("(?:{r})"));
        }
        let body = match self.surface {
            Surface::Dsl => {
                let mut parts = vec![format!("/{DSL_SAFE}{}/", repeat(min, max))];
                parts.extend(shapes.iter().map(|s| format!("/{s}/")));
                parts.join(" & ")
            }
            Surface::Json if shapes.is_empty() => format!("/\"{JSON_CHAR}{}\"/", repeat(min, max)),
            Surface::Json => {
                // shaped strings carry no escapes, so raw text == decoded text
                let mut parts = vec![format!("/\"[^\"\\\\\\x00-\\x1F]{}\"/", repeat(min, max))];
                parts.extend(shapes.iter().map(|s| format!("/\"{s}\"/")));
                parts.join(" & ")
            }
        };
        Ok(self.token(body))
    }

    fn copy_value(&mut self, tool: &str, path: &str, schema: &Value, ty: &str) -> R<String> {
        let quoted = self.surface == Surface::Json && ty == "string";
        let conj: (String, HoleCheck) = match ty {
            "integer" => {
                let (lo, hi) = int_bounds(schema);
                let r = rx::integer_range(lo, hi)
                    .ok_or_else(|| unsupported(tool, path, "numeric range admits no value"))?;
                return self.copy_hole(
                    quoted,
                    r.clone(),
                    HoleCheck::Regex {
                        regex: r,
                        max_len: 24,
                        quoted: false,
                    },
                );
            }
            "number" => {
                let (lo, hi) = bounds(schema);
                let r = rx::number_range(lo, hi)
                    .ok_or_else(|| unsupported(tool, path, "numeric range admits no value"))?;
                return self.copy_hole(
                    quoted,
                    r.clone(),
                    HoleCheck::Regex {
                        regex: r,
                        max_len: 24,
                        quoted: false,
                    },
                );
            }
            _ => {
                if schema.get("pattern").is_some() || schema.get("format").is_some() {
                    return Err(unsupported(
                        tool,
                        path,
                        "copy-from-request on a string with `pattern`/`format`",
                    ));
                }
                let (min, max) = self.lengths(tool, path, schema)?;
                let min = min.max(1);
                let check = HoleCheck::Str {
                    dsl: self.surface == Surface::Dsl,
                    min,
                    max,
                };
                let conj = match self.surface {
                    Surface::Dsl => rx::edged_repeat(DSL_SAFE, DSL_SAFE_NON_SPACE, min, max),
                    Surface::Json => rx::edged_repeat(JSON_CHAR, rx::JSON_NON_SPACE, min, max),
                };
                (conj, check)
            }
        };
        self.copy_hole(quoted, conj.0, conj.1)
    }

    // ---------------------------------------------------------------- JSON containers

    fn json_object(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        if let Some(ent_types) = entity_ref_types(schema) {
            return self.entity(tool, path, schema, &ent_types, None);
        }
        self.object_like(tool, path, schema, None)
    }

    fn json_array(&mut self, tool: &str, path: &str, schema: &Value) -> R<String> {
        let items = schema
            .get("items")
            .ok_or_else(|| unsupported(tool, path, "array without `items`"))?;
        let min = get_usize(schema, "minItems").unwrap_or(0);
        let item = match self.value(tool, path, items) {
            Ok(i) => i,
            Err(GenErr::Impossible) if min == 0 => return Ok("\"[\" \"]\"".into()),
            Err(e) => return Err(e),
        };
        let item = if item.contains(' ') {
            self.rule("it", &item)
        } else {
            item
        };
        let max = get_usize(schema, "maxItems");
        if max.is_some_and(|m| m < min) {
            return Err(unsupported(tool, path, "minItems > maxItems"));
        }
        if max == Some(0) {
            return Ok("\"[\" \"]\"".into());
        }
        let more_min = min.saturating_sub(1);
        let more_max = max.map(|m| m - 1);
        let rest = match (more_min, more_max) {
            (_, Some(0)) => String::new(),
            (m, x) => format!("(COMMA {item}){}", repeat(m, x)),
        };
        let inner = format!("{item} {rest}").trim().to_string();
        Ok(if min == 0 {
            format!("\"[\" [{inner}] \"]\"")
        } else {
            format!("\"[\" {inner} \"]\"")
        })
    }

    /// EntityRef objects: one branch per entity type, whose label is an entity hole (or, when
    /// generating for one request whose copy spans cannot produce a label, the visible labels
    /// themselves, or no branch). `dsl_prefix`: the dotted key prefix in the DSL.
    fn entity(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ent_types: &[String],
        dsl_prefix: Option<&str>,
    ) -> R<String> {
        let label_schema = &schema["properties"]["label"];
        let label_path = join_path(path, "label");
        let fallback = match self.value(tool, &label_path, label_schema) {
            Ok(e) => Some(e),
            Err(GenErr::Impossible) => None,
            Err(e) => return Err(e),
        };
        let copy = self.policy.requires_copy(tool, &label_path, label_schema);
        let (min_len, max_len) = self.lengths(tool, &label_path, label_schema)?;
        let type_required = schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v == "type"));
        let quoted = self.surface == Surface::Json;
        let mut alts = Vec::new();
        for t in ent_types {
            let hole = EntityHole {
                quoted,
                entity_type: t.clone(),
                fallback: fallback.clone().unwrap_or_default(),
                copy,
                min_len,
                max_len,
            };
            let label = if fallback.is_some() {
                self.entity_hole(hole)
            } else {
                let labels = self
                    .request
                    .map(|(r, unit)| hole.labels(r, unit))
                    .unwrap_or_default();
                if labels.is_empty() {
                    continue;
                }
                format!("({})", hole.alternatives(&labels))
            };
            let mut branch = schema.clone();
            branch["properties"]["type"] = serde_json::json!({"type": "string", "const": t});
            match self.entity_branch(tool, path, &branch, Some(("label", label)), dsl_prefix) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if !type_required {
            let mut branch = schema.clone();
            if let Some(p) = branch["properties"].as_object_mut() {
                p.remove("type");
            }
            match self.entity_branch(tool, path, &branch, None, dsl_prefix) {
                Ok(e) => alts.push(e),
                Err(GenErr::Impossible) => {}
                Err(e) => return Err(e),
            }
        }
        if alts.is_empty() {
            return Err(GenErr::Impossible);
        }
        Ok(match dsl_prefix {
            Some(_) => self.rule("ent_obj", &alts.join(" | ")),
            None => format!("({})", alts.join(" | ")),
        })
    }

    fn entity_branch(
        &mut self,
        tool: &str,
        path: &str,
        branch: &Value,
        ov: Option<(&str, String)>,
        dsl_prefix: Option<&str>,
    ) -> R<String> {
        match dsl_prefix {
            None => self.object_like(tool, path, branch, ov),
            Some(prefix) => match self.object_body(tool, path, prefix, branch, ov)? {
                (Some(ne), _) => Ok(ne),
                (None, _) => Err(GenErr::Impossible),
            },
        }
    }

    /// A JSON object with an optional value override for one property.
    fn object_like(
        &mut self,
        tool: &str,
        path: &str,
        schema: &Value,
        ov: Option<(&str, String)>,
    ) -> R<String> {
        let body = self.object_body(tool, path, "", schema, ov)?;
        Ok(match body {
            (Some(ne), true) => format!("\"{{\" [{ne}] \"}}\""),
            (Some(ne), false) => format!("\"{{\" {ne} \"}}\""),
            (None, _) => "\"{\" \"}\"".to_string(),
        })
    }

    /// Pairs of an object's properties in schema order. `key_prefix` is the DSL dotted prefix.
    /// Returns (non-empty sequence, empty allowed).
    fn object_body(
        &mut self,
        tool: &str,
        path: &str,
        key_prefix: &str,
        schema: &Value,
        ov: Option<(&str, String)>,
    ) -> R<(Option<String>, bool)> {
        let empty = serde_json::Map::new();
        let props = match schema.get("properties") {
            Some(Value::Object(p)) => p,
            Some(_) => return Err(unsupported(tool, path, "`properties` must be an object")),
            None => &empty,
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
            return Err(unsupported(
                tool,
                path,
                format!("required key `{missing}` has no schema in `properties`"),
            ));
        }
        let mut segs = Vec::new();
        for (k, sub) in props {
            let req = required.contains(&k.as_str());
            let child_path = join_path(path, k);
            let seg = match self.surface {
                Surface::Json => {
                    let v = match &ov {
                        Some((name, e)) if *name == k => Ok(e.clone()),
                        _ => self.value(tool, &child_path, sub),
                    };
                    let key = lit(&serde_json::to_string(k).unwrap_or_default());
                    v.map(|v| Some(format!("{key} COLON {v}")))
                }
                Surface::Dsl => {
                    let key = format!("{key_prefix}{k}");
                    match &ov {
                        Some((name, e)) if *name == k => Ok(Some(self.dsl_pair(tool, &key, e))),
                        _ => self.dsl_segment(tool, &child_path, &key, sub),
                    }
                }
            };
            let seg = match seg {
                Ok(s) => s,
                Err(GenErr::Impossible) if !req => None,
                Err(e) => return Err(e),
            };
            match seg {
                Some(s) => {
                    let s = if s.contains('|') {
                        self.rule("kv", &s)
                    } else {
                        s
                    };
                    segs.push((s, req));
                }
                None if req && self.impossible.is_empty() => {
                    return Err(unsupported(
                        tool,
                        &child_path,
                        "required value cannot be written in the DSL (empty object or array)",
                    ))
                }
                None if req => return Err(GenErr::Impossible),
                None => {}
            }
        }
        if segs.is_empty() {
            return Ok((None, true));
        }
        let (ne, allow_empty) = self.sequence(&segs);
        Ok((ne, allow_empty))
    }

    // ---------------------------------------------------------------- DSL segments

    /// The DSL pairs for `key` (non-empty), or None if nothing can be written for it.
    fn dsl_segment(
        &mut self,
        tool: &str,
        path: &str,
        key: &str,
        schema: &Value,
    ) -> R<Option<String>> {
        let ts = types(schema);
        let is_object = ts == ["object"] || (ts.is_empty() && schema.get("properties").is_some());
        if is_object {
            if schema.get("anyOf").is_some() {
                return Err(unsupported(tool, path, "`anyOf` in the plan DSL"));
            }
            if let Some(ent) = entity_ref_types(schema) {
                let prefix = format!("{key}.");
                return self
                    .entity(tool, path, schema, &ent, Some(&prefix))
                    .map(Some);
            }
            let prefix = format!("{key}.");
            return Ok(self.object_body(tool, path, &prefix, schema, None)?.0);
        }
        if ts == ["array"] {
            return self.dsl_array(tool, path, key, schema);
        }
        if ts.iter().any(|t| *t == "object" || *t == "array") {
            return Err(unsupported(
                tool,
                path,
                "a type union with object/array in the plan DSL",
            ));
        }
        let v = self.value(tool, path, schema)?;
        Ok(Some(self.dsl_pair(tool, key, &v)))
    }

    fn dsl_array(
        &mut self,
        tool: &str,
        path: &str,
        key: &str,
        schema: &Value,
    ) -> R<Option<String>> {
        let items = schema
            .get("items")
            .ok_or_else(|| unsupported(tool, path, "array without `items`"))?;
        let min = get_usize(schema, "minItems").unwrap_or(0).max(1);
        let cap = get_usize(schema, "maxItems")
            .unwrap_or(DSL_ARRAY_CAP)
            .min(DSL_ARRAY_CAP.max(min));
        if cap == 0 {
            return Ok(None);
        }
        if min > cap {
            return Err(unsupported(tool, path, "minItems > maxItems"));
        }
        let mut segs = Vec::with_capacity(cap);
        for i in 0..cap {
            match self.dsl_segment(tool, path, &format!("{key}.{i}"), items)? {
                Some(s) => segs.push(if s.contains('|') {
                    self.rule("el", &s)
                } else {
                    s
                }),
                None => return Ok(None),
            }
        }
        // item_0 ("; " item_1 ("; " item_2 ...)?)? with the first `min` mandatory
        let mut expr = segs[cap - 1].clone();
        for i in (0..cap - 1).rev() {
            let inner = if cap - i > 3 {
                self.rule("ar", &expr)
            } else {
                expr
            };
            expr = if i + 1 < min {
                format!("{} \"; \" {inner}", segs[i])
            } else {
                format!("{} (\"; \" {inner})?", segs[i])
            };
        }
        Ok(Some(expr))
    }
}

/// Generate the request-independent template for `catalog` under `options`.
pub fn template(catalog: &Catalog, options: &Options) -> Result<Template, GrammarError> {
    generate(catalog, options, Vec::new(), None)
}

fn generate(
    catalog: &Catalog,
    options: &Options,
    impossible: Vec<CopyHole>,
    request: Option<&Request>,
) -> Result<Template, GrammarError> {
    let tools: Vec<&plansmith_core::Tool> = match &options.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Named(name) => {
            vec![catalog
                .get(name)
                .ok_or_else(|| GrammarError::UnknownTool(name.clone()))?]
        }
        ToolChoice::Auto | ToolChoice::Required => catalog.tools.iter().collect(),
    };
    let may_skip = matches!(options.tool_choice, ToolChoice::None | ToolChoice::Auto);
    if !may_skip && options.max_calls == 0 {
        return Err(GrammarError::Invalid(
            "max_calls = 0 with a tool_choice that requires a call".into(),
        ));
    }
    if !may_skip && tools.is_empty() {
        return Err(GrammarError::Invalid(
            "tool_choice requires a call but the catalog has no tools".into(),
        ));
    }
    let surface = if options.syntax == Syntax::Dsl {
        Surface::Dsl
    } else {
        Surface::Json
    };
    let mut g = Gen::new(surface, &options.policy);
    g.impossible = impossible;
    g.request = request.map(|r| (r, options.policy.copy_unit));

    // per-tool argument expressions
    let mut calls: Vec<(String, String)> = Vec::new(); // (tool name, args expr)
    for tool in &tools {
        let args = match surface {
            Surface::Json => g.json_object(&tool.name, "", &tool.parameters),
            Surface::Dsl => g
                .object_body(&tool.name, "", "", &tool.parameters, None)
                .map(|b| match b {
                    (Some(ne), true) => format!("[{ne}]"),
                    (Some(ne), false) => ne,
                    (None, _) => String::new(),
                }),
        };
        match args {
            Ok(args) => calls.push((tool.name.clone(), args)),
            // a value this request cannot supply: the tool cannot be called for it
            Err(GenErr::Impossible) => {}
            Err(GenErr::Grammar(e)) => return Err(e),
        }
    }
    if calls.is_empty() && !may_skip {
        return Err(GrammarError::NoCallableTool);
    }
    let tools_left = calls.len();

    let max_calls = if tools_left == 0 {
        0
    } else {
        options.max_calls
    };
    let mut top = String::new();
    let mut alts: Vec<String> = Vec::new();
    match options.syntax {
        Syntax::Dsl => {
            let call_alts: Vec<String> = calls
                .iter()
                .map(|(name, args)| format!("{} {args} \")\"", lit(&format!("{name}("))))
                .collect();
            if may_skip {
                alts.push("\"done\\n\"".into());
            }
            if max_calls > 0 {
                let call = g.rule("call", &call_alts.join("\n    | "));
                let more = if max_calls > 1 {
                    format!(" (\" | \" {call}){}", repeat(0, Some(max_calls - 1)))
                } else {
                    String::new()
                };
                alts.push(format!("{call}{more} \"\\n\""));
            }
        }
        Syntax::Envelope => {
            let spoken = g.token(format!("/\"{JSON_CHAR}*\"/"));
            let tail = format!("[COMMA \"\\\"spoken_text\\\"\" COLON {spoken}]");
            if may_skip {
                alts.push(format!("\"{{\\\"verb\\\"\" COLON \"null\" {tail} \"}}\""));
            }
            if max_calls > 0 {
                let heads: Vec<String> = calls
                    .iter()
                    .map(|(name, args)| {
                        let verb = lit(&serde_json::to_string(name).unwrap_or_default());
                        format!(
                            "\"{{\\\"verb\\\"\" COLON {verb} COMMA \"\\\"args\\\"\" COLON {args}"
                        )
                    })
                    .collect();
                let head = g.rule("env", &heads.join("\n    | "));
                let first = g.rule("env_first", &format!("{head} {tail} \"}}\""));
                alts.push(first.clone());
                if max_calls > 1 {
                    let rest = g.rule("env_rest", &format!("{head} \"}}\""));
                    alts.push(format!(
                        "\"[\" {first} (COMMA {rest}){} \"]\"",
                        repeat(0, Some(max_calls - 1))
                    ));
                }
            }
        }
        Syntax::JsonArray | Syntax::OpenAi => {
            let items: Vec<String> = calls
                .iter()
                .map(|(name, args)| {
                    let n = lit(&serde_json::to_string(name).unwrap_or_default());
                    if options.syntax == Syntax::JsonArray {
                        format!("\"{{\\\"name\\\"\" COLON {n} COMMA \"\\\"arguments\\\"\" COLON {args} \"}}\"")
                    } else {
                        format!(
                            "\"{{\\\"type\\\"\" COLON \"\\\"function\\\"\" COMMA \"\\\"function\\\"\" COLON \"{{\\\"name\\\"\" COLON {n} COMMA \"\\\"arguments\\\"\" COLON {args} \"}}\" \"}}\""
                        )
                    }
                })
                .collect();
            let list = if max_calls > 0 {
                let item = g.rule("call", &items.join("\n    | "));
                let list = if max_calls > 1 {
                    format!("{item} (COMMA {item}){}", repeat(0, Some(max_calls - 1)))
                } else {
                    item
                };
                if may_skip {
                    format!("\"[\" [{list}] \"]\"")
                } else {
                    format!("\"[\" {list} \"]\"")
                }
            } else {
                "\"[\" \"]\"".to_string()
            };
            if options.syntax == Syntax::JsonArray {
                alts.push(list);
            } else {
                let content = g.token(format!("/\"{JSON_CHAR}*\"/"));
                alts.push(format!(
                    "\"{{\\\"content\\\"\" COLON (\"null\" | {content}) COMMA \"\\\"tool_calls\\\"\" COLON {list} \"}}\""
                ));
            }
        }
    }
    if alts.is_empty() {
        return Err(GrammarError::Invalid(
            "no output is possible with these options".into(),
        ));
    }
    let _ = writeln!(
        top,
        "%llguidance {{}}\n\nstart: {}\n",
        alts.join("\n    | ")
    );
    let mut lark = top;
    lark.push_str(&g.rules);
    lark.push('\n');
    if surface == Surface::Json {
        lark.push_str("COLON: /: ?/\nCOMMA: /, ?/\n");
    }
    lark.push_str(&g.token_defs);
    let trackable = surface == Surface::Dsl
        && !g.copy_holes.is_empty()
        && g.copy_holes.iter().all(|h| !h.quoted)
        && g.dsl_keys.values().all(|k| *k != KeyKind::Mixed);
    let copy_keys = trackable.then(|| {
        let mut keys = CopyKeys::new();
        for ((tool, key), kind) in &g.dsl_keys {
            keys.entry(tool.clone()).or_default().insert(
                key.clone(),
                match kind {
                    KeyKind::Copied(i) => Some(*i),
                    _ => None,
                },
            );
        }
        std::sync::Arc::new(keys)
    });
    Ok(Template {
        lark,
        copy_holes: g.copy_holes,
        entity_holes: g.entity_holes,
        copy_keys,
        copy_unit: options.policy.copy_unit,
        catalog: std::sync::Arc::new(catalog.clone()),
        options: options.clone(),
    })
}

/// The full grammar text for one request (what `plansmith grammar` prints).
pub fn grammar_text(
    catalog: &Catalog,
    options: &Options,
    request: &Request,
) -> Result<String, GrammarError> {
    template(catalog, options)?.grammar(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hole_references_are_whole_names_outside_literals() {
        assert!(refers_to_a_hole("copy_0"));
        assert!(refers_to_a_hole("(copy_12 | T3)"));
        assert!(refers_to_a_hole("ent_1"));
        assert!(!refers_to_a_hole("(\"current_screen\" | \"copy_0\")"));
        assert!(!refers_to_a_hole("/ent_[0-9]/ | T4"));
        assert!(!refers_to_a_hole("xcopy_0 | copy_ | copy_x"));
    }

    #[test]
    fn word_chunks_follow_core_classes() {
        assert_eq!(
            chunks("press cmd+s, now!", CopyUnit::Words),
            vec!["press", " ", "cmd", "+", "s", ",", " ", "now", "!"]
        );
        assert_eq!(chunks("ab", CopyUnit::Chars), vec!["a", "b"]);
        assert!(chunks("", CopyUnit::Words).is_empty());
    }
}
