//! BFCL data: items, gold calls, model calls, and the loader for BFCL's directory layout.
//!
//! Layout (BFCL v4, also any directory laid out the same way, with any category name):
//!
//! ```text
//! <dir>/BFCL_v4_<category>.json                   JSONL: {"id", "question", "function"}
//! <dir>/possible_answer/BFCL_v4_<category>.json   JSONL: {"id", "ground_truth"}
//! ```
//!
//! `question` is a list of turns, each a list of `{role, content}` messages; `function` is a
//! list of BFCL function docs (kept as raw JSON); `ground_truth` is a list of
//! `{function_name: {param: [accepted values...]}}`. A category whose name contains
//! `irrelevance` needs no possible-answer file (no call is the correct answer); one whose name
//! contains `relevance` (but not `irrelevance`) needs none either (any call is correct).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::checker::python_type_for;
use crate::error::EvalError;

/// File-name prefix of BFCL v4 data files.
pub const VERSION_PREFIX: &str = "BFCL_v4";

/// The four categories whose mean is BFCL's "non-live AST" summary used in this project.
pub const NON_LIVE_AST_CATEGORIES: [&str; 4] =
    ["simple_python", "multiple", "parallel", "parallel_multiple"];

/// One chat message of a BFCL question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// One gold call, parsed by plansmith-core (the workspace's one gold parser).
pub use plansmith_core::bfcl::GoldCall;

/// A decoded output that is not BFCL's call-list shape; `at` is a JSON path into it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct CallListError {
    pub at: String,
    pub message: String,
}

/// A call made by the model under evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclCall {
    pub name: String,
    pub args: Map<String, Value>,
}

impl BfclCall {
    pub fn new(name: impl Into<String>, args: Map<String, Value>) -> Self {
        BfclCall {
            name: name.into(),
            args,
        }
    }

    /// BFCL's decoded-output shape for one call: `{name: {param: value}}`.
    pub fn to_bfcl(&self) -> Value {
        let mut m = Map::new();
        m.insert(self.name.clone(), Value::Object(self.args.clone()));
        Value::Object(m)
    }

    /// A list of calls in BFCL's decoded-output shape.
    pub fn list_to_bfcl(calls: &[BfclCall]) -> Value {
        Value::Array(calls.iter().map(BfclCall::to_bfcl).collect())
    }

    /// Parses BFCL's decoded-output shape `[{name: {param: value}}, ...]`, with the same
    /// format rules as BFCL's `is_function_calling_format_output` (a list of one-key objects
    /// whose value is an object). `[{}]` is BFCL's "empty output" and parses as no call.
    pub fn list_from_bfcl(value: &Value) -> Result<Vec<BfclCall>, CallListError> {
        let Value::Array(items) = value else {
            return Err(CallListError {
                at: "$".into(),
                message: format!(
                    "expected a list of {{name: {{param: value}}}}, got {}",
                    kind(value)
                ),
            });
        };
        if items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty) {
            return Ok(Vec::new());
        }
        let mut calls = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::Object(m) = item else {
                return Err(CallListError {
                    at: format!("$[{i}]"),
                    message: format!("expected an object, got {}", kind(item)),
                });
            };
            if m.len() != 1 {
                return Err(CallListError {
                    at: format!("$[{i}]"),
                    message: format!(
                        "expected exactly one key (the function name), got {}",
                        m.len()
                    ),
                });
            }
            let (name, args) = m.iter().next().expect("one key");
            let Value::Object(args) = args else {
                return Err(CallListError {
                    at: format!("$[{i}].{name}"),
                    message: format!("expected an object of arguments, got {}", kind(args)),
                });
            };
            calls.push(BfclCall::new(name.clone(), args.clone()));
        }
        Ok(calls)
    }
}

/// How an item is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckMode {
    /// Exactly one call, checked against the first function doc and the first gold call.
    Simple,
    /// Exactly one call, checked against the doc named by the gold call.
    Multiple,
    /// As many calls as gold calls, matched in any order (BFCL's greedy matching).
    Parallel,
    /// No call is correct (irrelevance).
    NoCall,
    /// Any well-formed call is correct (relevance).
    AnyCall,
}

impl CheckMode {
    /// BFCL's routing by category name (`parallel` before `multiple`, everything else is
    /// simple), extended for category names that carry none of BFCL's words: several gold
    /// calls mean parallel, several function docs mean multiple.
    pub fn for_category(category: &str, gold_calls: usize, n_functions: usize) -> CheckMode {
        if category.contains("irrelevance") {
            CheckMode::NoCall
        } else if category.contains("relevance") {
            CheckMode::AnyCall
        } else if category.contains("parallel") {
            CheckMode::Parallel
        } else if category.contains("multiple") {
            CheckMode::Multiple
        } else if category.contains("simple") || (gold_calls <= 1 && n_functions <= 1) {
            CheckMode::Simple
        } else if gold_calls > 1 {
            CheckMode::Parallel
        } else {
            CheckMode::Multiple
        }
    }

    /// True when the category needs a possible-answer file.
    pub fn needs_answers(category: &str) -> bool {
        !category.contains("relevance")
    }
}

/// What the item expects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "calls")]
pub enum Expected {
    /// No call is correct.
    NoCall,
    /// Any call is correct.
    AnyCall,
    /// These gold calls (one for simple/multiple, several for parallel).
    Calls(Vec<GoldCall>),
}

/// One BFCL test item with its expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BfclItem {
    pub id: String,
    pub category: String,
    /// Turns, each a list of messages.
    pub question: Vec<Vec<Message>>,
    /// BFCL function docs, as in the file.
    pub functions: Vec<Value>,
    pub mode: CheckMode,
    pub expected: Expected,
}

impl BfclItem {
    /// The gold calls (empty for relevance and irrelevance items).
    pub fn gold(&self) -> &[GoldCall] {
        match &self.expected {
            Expected::Calls(c) => c,
            _ => &[],
        }
    }

    /// The last user message of the last turn (the request text), if any.
    pub fn request(&self) -> Option<&str> {
        self.question
            .iter()
            .rev()
            .flat_map(|turn| turn.iter().rev())
            .find(|m| m.role == "user")
            .map(|m| m.content.as_str())
    }
}

#[derive(Deserialize)]
struct RawItem {
    id: String,
    question: Vec<Vec<Message>>,
    function: Vec<Value>,
}

#[derive(Deserialize)]
struct RawAnswer {
    id: String,
    ground_truth: Vec<Value>,
}

/// Path of a category's data file.
pub fn data_file(dir: &Path, category: &str) -> PathBuf {
    dir.join(format!("{VERSION_PREFIX}_{category}.json"))
}

/// Path of a category's possible-answer file.
pub fn answer_file(dir: &Path, category: &str) -> PathBuf {
    dir.join("possible_answer")
        .join(format!("{VERSION_PREFIX}_{category}.json"))
}

/// The categories present in `dir` (from `BFCL_v4_<category>.json` file names), sorted.
pub fn available_categories(dir: &Path) -> Result<Vec<String>, EvalError> {
    let rd = std::fs::read_dir(dir).map_err(|e| EvalError::io(dir, e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| EvalError::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(cat) = name
            .strip_prefix(VERSION_PREFIX)
            .and_then(|s| s.strip_prefix('_'))
            .and_then(|s| s.strip_suffix(".json"))
        {
            if entry.path().is_file() {
                out.push(cat.to_string());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Why a category cannot be scored here, if it cannot.
pub fn unsupported_reason(category: &str) -> Option<&'static str> {
    if category.contains("multi_turn") {
        Some("multi-turn categories are scored by state checking, not by the AST checker")
    } else if category.contains("memory") || category.contains("web_search") {
        Some("agentic categories are scored by their own checkers")
    } else if category.contains("format_sensitivity") {
        Some("format-sensitivity cases are built from other categories by BFCL's runner")
    } else if category.contains("java") {
        Some("Java/JavaScript categories need BFCL's string type converters (only the Python path is implemented)")
    } else {
        None
    }
}

/// Loads one category from `dir` (BFCL's layout, any category name).
pub fn load_category(dir: &Path, category: &str) -> Result<Vec<BfclItem>, EvalError> {
    if let Some(reason) = unsupported_reason(category) {
        return Err(EvalError::UnsupportedCategory {
            category: category.to_string(),
            reason: reason.to_string(),
        });
    }
    let path = data_file(dir, category);
    let raw_items = read_jsonl(&path, |line, s| {
        serde_json::from_str::<RawItem>(s).map_err(|e| malformed(&path, line, e.to_string()))
    })?;
    let mut seen = HashMap::new();
    for (line, item) in &raw_items {
        if let Some(prev) = seen.insert(item.id.clone(), *line) {
            return Err(malformed(
                &path,
                *line,
                format!("duplicate id {:?} (first on line {prev})", item.id),
            ));
        }
    }

    if !CheckMode::needs_answers(category) {
        let expected = if category.contains("irrelevance") {
            Expected::NoCall
        } else {
            Expected::AnyCall
        };
        return Ok(raw_items
            .into_iter()
            .map(|(_, r)| {
                let mode = CheckMode::for_category(category, 0, r.function.len());
                BfclItem {
                    id: r.id,
                    category: category.to_string(),
                    question: r.question,
                    functions: r.function,
                    mode,
                    expected: expected.clone(),
                }
            })
            .collect());
    }

    let apath = answer_file(dir, category);
    if !apath.is_file() {
        return Err(EvalError::AnswerMismatch {
            path: apath,
            message: format!(
                "category {category:?} needs a possible-answer file (only categories whose name contains \"relevance\" do without)"
            ),
        });
    }
    let answers = read_jsonl(&apath, |line, s| {
        let raw: RawAnswer =
            serde_json::from_str(s).map_err(|e| malformed(&apath, line, e.to_string()))?;
        let gold = raw
            .ground_truth
            .iter()
            .enumerate()
            .map(|(i, g)| {
                GoldCall::parse(g, &format!("ground_truth[{i}]"))
                    .map_err(|e| malformed(&apath, line, e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((raw.id, gold))
    })?;
    let mut by_id: HashMap<String, (usize, Vec<GoldCall>)> = HashMap::new();
    for (line, (id, gold)) in answers {
        if let Some((prev, _)) = by_id.get(&id) {
            return Err(malformed(
                &apath,
                line,
                format!("duplicate id {id:?} (first on line {prev})"),
            ));
        }
        by_id.insert(id, (line, gold));
    }

    let mut items = Vec::with_capacity(raw_items.len());
    for (line, r) in raw_items {
        let Some((aline, gold)) = by_id.remove(&r.id) else {
            return Err(EvalError::AnswerMismatch {
                path: apath.clone(),
                message: format!(
                    "no possible answer for id {:?} ({}:{line})",
                    r.id,
                    path.display()
                ),
            });
        };
        let mode = CheckMode::for_category(category, gold.len(), r.function.len());
        validate_ast_item(&r.function, &gold, mode).map_err(|m| {
            malformed(
                &path,
                line,
                format!("id {:?}: {m} (answer line {aline})", r.id),
            )
        })?;
        items.push(BfclItem {
            id: r.id,
            category: category.to_string(),
            question: r.question,
            functions: r.function,
            mode,
            expected: Expected::Calls(gold),
        });
    }
    if let Some((id, (line, _))) = by_id.into_iter().min_by_key(|(_, (l, _))| *l) {
        return Err(malformed(
            &apath,
            line,
            format!(
                "possible answer for id {id:?} has no item in {}",
                path.display()
            ),
        ));
    }
    Ok(items)
}

/// Loads several categories; see [`load_category`].
pub fn load_categories(dir: &Path, categories: &[&str]) -> Result<Vec<BfclItem>, EvalError> {
    let mut all = Vec::new();
    for c in categories {
        all.extend(load_category(dir, c)?);
    }
    Ok(all)
}

/// Checks that the function docs and gold calls have what BFCL's checker reads (where the
/// Python checker would crash, we refuse at load time instead).
fn validate_ast_item(
    functions: &[Value],
    gold: &[GoldCall],
    mode: CheckMode,
) -> Result<(), String> {
    if gold.is_empty() {
        return Err("ground_truth is empty".into());
    }
    if functions.is_empty() {
        return Err("no function docs".into());
    }
    for (i, f) in functions.iter().enumerate() {
        validate_doc(f).map_err(|m| format!("function[{i}]: {m}"))?;
    }
    if mode != CheckMode::Simple {
        for g in gold {
            if !functions
                .iter()
                .any(|f| f.get("name").and_then(Value::as_str) == Some(g.name.as_str()))
            {
                return Err(format!("gold call {:?} names no function doc", g.name));
            }
        }
    }
    Ok(())
}

fn validate_doc(f: &Value) -> Result<(), String> {
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or("missing string \"name\"")?;
    let params = f
        .get("parameters")
        .ok_or_else(|| format!("{name}: missing \"parameters\""))?;
    let props = params
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{name}: missing object parameters.properties"))?;
    let required = params
        .get("required")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{name}: missing list parameters.required"))?;
    if let Some(r) = required.iter().find(|r| !r.is_string()) {
        return Err(format!(
            "{name}: parameters.required holds a non-string {r}"
        ));
    }
    for (p, spec) in props {
        let ty = spec
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{name}.{p}: missing string \"type\""))?;
        if python_type_for(ty).is_none() {
            return Err(format!(
                "{name}.{p}: type {ty:?} is not one of BFCL's Python types"
            ));
        }
        if ty == "array" || ty == "tuple" {
            let ity = spec
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{name}.{p}: {ty} without items.type"))?;
            if python_type_for(ity).is_none() {
                return Err(format!(
                    "{name}.{p}: items type {ity:?} is not one of BFCL's Python types"
                ));
            }
        }
    }
    Ok(())
}

fn read_jsonl<T>(
    path: &Path,
    mut parse: impl FnMut(usize, &str) -> Result<T, EvalError>,
) -> Result<Vec<(usize, T)>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push((i + 1, parse(i + 1, line)?));
    }
    Ok(out)
}

fn malformed(path: &Path, line: usize, message: String) -> EvalError {
    EvalError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    }
}

pub(crate) use plansmith_core::bfcl::json_kind as kind;

/// The assets directory: `$PLANSMITH_ASSETS`, else `<workspace>/assets`.
pub fn assets_dir() -> PathBuf {
    match std::env::var_os("PLANSMITH_ASSETS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets"),
    }
}

/// `assets/bfcl`, or an error telling the reader to run `scripts/assets.sh`.
pub fn bfcl_dir() -> Result<PathBuf, EvalError> {
    let dir = assets_dir().join("bfcl");
    if data_file(&dir, "simple_python").is_file() {
        Ok(dir)
    } else {
        Err(EvalError::AssetsMissing {
            what: "BFCL v4 data".into(),
            path: dir,
        })
    }
}
