//! Importers and exporters for public tool-calling data formats.
//!
//! | format | direction | shape |
//! |---|---|---|
//! | xLAM | import, export | `{"id", "query", "tools": "<JSON string>", "answers": "<JSON string>"}`; answers are `[{"name", "arguments"}]` |
//! | OpenAI chat fine-tuning | import, export | `{"messages": [system?, user, assistant with tool_calls (arguments as a JSON string)], "tools": [...]}` |
//! | TRL SFT chat | export | the same with `arguments` as a JSON object (what chat templates expect) |
//! | BFCL | import | question file (`{"id", "question": [[messages]], "function": [...]}`) + possible answers (`{"id", "ground_truth": [{name: {param: [accepted...]}}]}`) |
//!
//! Inputs are JSONL (one record per line) or, for xLAM and BFCL, also a JSON array. A
//! malformed record is a [`LineError`] naming the file and the 1-based line (or record, for a
//! JSON array): with `strict` the first one fails the import, otherwise it is skipped and
//! reported in [`Imported::skipped`].

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use plansmith_core::bfcl::GoldCall;
use plansmith_core::{Call, Catalog, Trace, TraceSource};

use crate::DataError;

/// A malformed input record: file, 1-based line (record number for a JSON array) and reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{path}:{line}: {message}")]
pub struct LineError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// Why one input record could not be converted; its `Display` is the message a user sees,
/// prefixed by the file and line in a [`LineError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A field is missing or has the wrong JSON shape (the message names it).
    #[error("{0}")]
    Shape(String),
    /// A field meant to hold JSON text does not parse.
    #[error("`{field}` is not valid JSON: {reason}")]
    NotJson { field: String, reason: String },
    /// The record's tools (at `at`) are not a catalog plansmith accepts.
    #[error("{at}: {reason}")]
    Catalog { at: String, reason: String },
    /// A call names a tool the record's tools do not define.
    #[error("{at}[{index}] calls `{name}`, which is not in the record's tools")]
    UnknownTool {
        at: String,
        index: usize,
        name: String,
    },
}

impl From<String> for RecordError {
    fn from(message: String) -> Self {
        RecordError::Shape(message)
    }
}

impl From<&str> for RecordError {
    fn from(message: &str) -> Self {
        RecordError::Shape(message.to_string())
    }
}

/// A format name `data import` / `data export` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {direction} format `{name}` (expected {expected})")]
pub struct UnknownFormat {
    pub direction: &'static str,
    pub name: String,
    pub expected: &'static str,
}

/// The records read, and the ones skipped (non-strict mode).
#[derive(Debug, Clone, PartialEq)]
pub struct Imported<T> {
    pub items: Vec<T>,
    pub skipped: Vec<LineError>,
}

impl<T> Imported<T> {
    pub fn skipped_count(&self) -> usize {
        self.skipped.len()
    }
}

/// Input formats `plansmith data import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportFormat {
    Xlam,
    OpenAiChat,
    /// BFCL questions (answers from a second file).
    Bfcl,
}

/// Output formats `plansmith data export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    Xlam,
    OpenAiChat,
    /// TRL chat records in the model's own tool-calling format (`messages` + `tools`, the chat
    /// template renders them).
    Trl,
    /// TRL prompt-completion records in the prompt plansmith's pretrained planner reads (the
    /// tools in its system message, a JSON array of calls as the reply): an adapter trained
    /// on them plans under `--gguf BASE --lora ADAPTER` exactly as one trained here.
    TrlPlanner,
}

impl std::str::FromStr for ImportFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, UnknownFormat> {
        match s {
            "xlam" => Ok(ImportFormat::Xlam),
            "openai" | "openai_chat" | "openai-chat" => Ok(ImportFormat::OpenAiChat),
            "bfcl" => Ok(ImportFormat::Bfcl),
            other => Err(UnknownFormat {
                direction: "import",
                name: other.to_string(),
                expected: "xlam, openai or bfcl",
            }),
        }
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, UnknownFormat> {
        match s {
            "xlam" => Ok(ExportFormat::Xlam),
            "openai" | "openai_chat" | "openai-chat" => Ok(ExportFormat::OpenAiChat),
            "trl" => Ok(ExportFormat::Trl),
            "trl-planner" | "trl_planner" => Ok(ExportFormat::TrlPlanner),
            other => Err(UnknownFormat {
                direction: "export",
                name: other.to_string(),
                expected: "xlam, openai, trl or trl-planner",
            }),
        }
    }
}

fn read_text(path: &Path) -> Result<String, DataError> {
    std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))
}

/// Split input into (line number, record): JSONL, or a JSON array (numbered by record).
/// Numbered records and the lines that were not JSON.
type Records = (Vec<(usize, Value)>, Vec<LineError>);

fn records(text: &str, name: &str, strict: bool) -> Result<Records, DataError> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let items: Vec<Value> = serde_json::from_str(trimmed).map_err(|e| {
            DataError::Line(LineError {
                path: name.into(),
                line: e.line(),
                message: format!("invalid JSON array: {e}"),
            })
        })?;
        return Ok((
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i + 1, v))
                .collect(),
            bad,
        ));
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => out.push((i + 1, v)),
            Err(e) => {
                let err = LineError {
                    path: name.into(),
                    line: i + 1,
                    message: format!("invalid JSON: {e}"),
                };
                if strict {
                    return Err(err.into());
                }
                bad.push(err);
            }
        }
    }
    Ok((out, bad))
}

/// Convert each record; collect or fail on the first bad one.
fn convert<T>(
    text: &str,
    name: &str,
    strict: bool,
    mut f: impl FnMut(&Value) -> Result<T, RecordError>,
) -> Result<Imported<T>, DataError> {
    let (recs, mut skipped) = records(text, name, strict)?;
    let mut items = Vec::with_capacity(recs.len());
    for (line, rec) in recs {
        match f(&rec) {
            Ok(t) => items.push(t),
            Err(why) => {
                let err = LineError {
                    path: name.into(),
                    line,
                    message: why.to_string(),
                };
                if strict {
                    return Err(err.into());
                }
                skipped.push(err);
            }
        }
    }
    skipped.sort_by_key(|e| e.line);
    Ok(Imported { items, skipped })
}

/// A field that is JSON, or a string holding JSON (xLAM stores `tools` and `answers` so).
fn json_field(rec: &Value, key: &str) -> Result<Value, RecordError> {
    match rec.get(key) {
        Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| RecordError::NotJson {
            field: key.to_string(),
            reason: e.to_string(),
        }),
        Some(v) => Ok(v.clone()),
        None => Err(format!("missing `{key}`").into()),
    }
}

fn str_field<'a>(rec: &'a Value, key: &str) -> Result<&'a str, RecordError> {
    rec.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RecordError::Shape(format!("missing string `{key}`")))
}

fn catalog_of(tools: &Value, at: &str) -> Result<Catalog, RecordError> {
    Catalog::from_value(tools).map_err(|e| RecordError::Catalog {
        at: at.to_string(),
        reason: e.to_string(),
    })
}

fn check_names(calls: &[Call], catalog: &Catalog, at: &str) -> Result<(), RecordError> {
    for (i, c) in calls.iter().enumerate() {
        if catalog.get(&c.name).is_none() {
            return Err(RecordError::UnknownTool {
                at: at.to_string(),
                index: i,
                name: c.name.clone(),
            });
        }
    }
    Ok(())
}

fn arguments_of(v: Option<&Value>, at: &str) -> Result<Map<String, Value>, RecordError> {
    match v {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(format!("{at}.arguments is not a JSON object").into()),
            Err(e) => Err(format!("{at}.arguments is not valid JSON: {e}").into()),
        },
        Some(_) => Err(format!("{at}.arguments must be an object or a JSON string").into()),
    }
}

// ---------------------------------------------------------------------------------------------
// xLAM

/// One xLAM record -> a trace whose `tools` is the catalog in OpenAI form.
pub fn xlam_record_to_trace(rec: &Value) -> Result<Trace, RecordError> {
    let query = str_field(rec, "query")?;
    let catalog = catalog_of(
        &xlam_tools_to_json_schema(&json_field(rec, "tools")?)?,
        "tools",
    )?;
    let answers = json_field(rec, "answers")?;
    let answers = answers.as_array().ok_or("`answers` must be a JSON array")?;
    let mut calls = Vec::with_capacity(answers.len());
    for (i, a) in answers.iter().enumerate() {
        let name = a
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("answers[{i}] has no `name`"))?;
        calls.push(Call::new(
            name,
            arguments_of(a.get("arguments"), &format!("answers[{i}]"))?,
        ));
    }
    check_names(&calls, &catalog, "answers")?;
    Ok(Trace {
        request: query.to_string(),
        calls,
        tools: Some(catalog.to_openai()),
        source: TraceSource::Teacher,
        spoken_text: None,
    })
}

/// Convert xLAM parameter tables (`{"p": {"type": "str, optional", ...}}`) to JSON Schema
/// here, where the format is known: shape detection alone would mistake a table with a
/// parameter named `type` (common in xLAM) for a schema. Tools whose `parameters` already are
/// a JSON Schema pass through.
fn xlam_tools_to_json_schema(tools: &Value) -> Result<Value, RecordError> {
    let list = tools.as_array().ok_or("`tools` must be a JSON array")?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let mut t = t
            .as_object()
            .ok_or_else(|| format!("tools[{i}] must be an object"))?
            .clone();
        if let Some(Value::Object(p)) = t.get("parameters") {
            let is_schema =
                p.get("type").is_some_and(Value::is_string) || p.contains_key("properties");
            if !is_schema {
                let converted =
                    plansmith_core::schema::from_xlam(p, &format!("tools[{i}].parameters"))
                        .map_err(|e| e.to_string())?;
                t.insert("parameters".into(), converted);
            }
        }
        out.push(Value::Object(t));
    }
    Ok(Value::Array(out))
}

/// Import xLAM records (JSONL or the published JSON array) from text; `name` is used in errors.
pub fn import_xlam(text: &str, name: &str, strict: bool) -> Result<Imported<Trace>, DataError> {
    convert(text, name, strict, xlam_record_to_trace)
}

pub fn read_xlam(path: &Path, strict: bool) -> Result<Imported<Trace>, DataError> {
    import_xlam(&read_text(path)?, &path.display().to_string(), strict)
}

/// A trace as an xLAM record (`tools` and `answers` as JSON strings; tools in canonical form).
pub fn trace_to_xlam(
    trace: &Trace,
    id: usize,
    default_catalog: Option<&Catalog>,
) -> Result<Value, RecordError> {
    let catalog = trace_catalog(trace, default_catalog)?;
    let tools: Vec<Value> = catalog
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    let answers: Vec<Value> = trace
        .calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    Ok(json!({
        "id": id,
        "query": trace.request,
        "tools": Value::Array(tools).to_string(),
        "answers": Value::Array(answers).to_string(),
    }))
}

// ---------------------------------------------------------------------------------------------
// OpenAI chat fine-tuning

/// One OpenAI chat fine-tuning record -> a trace. The request is the last user message before
/// the first assistant message; that assistant message gives the calls (`tool_calls`, or the
/// legacy `function_call`) and its text content becomes `spoken_text`.
pub fn openai_chat_to_trace(rec: &Value) -> Result<Trace, RecordError> {
    let messages = rec
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("missing `messages` array")?;
    let first_assistant = messages
        .iter()
        .position(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .ok_or("no assistant message")?;
    let user = messages[..first_assistant]
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .ok_or("no user message before the assistant message")?;
    let request =
        content_text(user.get("content")).ok_or("the user message has no text content")?;
    let assistant = &messages[first_assistant];
    let at = format!("messages[{first_assistant}]");
    let mut calls = Vec::new();
    if let Some(tcs) = assistant.get("tool_calls").filter(|v| !v.is_null()) {
        let tcs = tcs
            .as_array()
            .ok_or_else(|| format!("{at}.tool_calls must be an array"))?;
        for (i, tc) in tcs.iter().enumerate() {
            let here = format!("{at}.tool_calls[{i}]");
            let f = tc
                .get("function")
                .ok_or_else(|| format!("{here} has no `function`"))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{here}.function has no `name`"))?;
            calls.push(Call::new(
                name,
                arguments_of(f.get("arguments"), &format!("{here}.function"))?,
            ));
        }
    } else if let Some(f) = assistant.get("function_call").filter(|v| !v.is_null()) {
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{at}.function_call has no `name`"))?;
        calls.push(Call::new(
            name,
            arguments_of(f.get("arguments"), &format!("{at}.function_call"))?,
        ));
    }
    let spoken_text = content_text(assistant.get("content")).filter(|s| !s.is_empty());
    let tools = match (rec.get("tools"), rec.get("functions")) {
        (Some(t), _) if !t.is_null() => Some(t.clone()),
        (_, Some(Value::Array(fs))) => Some(Value::Array(fs.clone())),
        _ => None,
    };
    let tools = match tools {
        Some(t) => {
            let catalog = catalog_of(&t, "tools")?;
            check_names(&calls, &catalog, &format!("{at}.tool_calls"))?;
            Some(catalog.to_openai())
        }
        None => None,
    };
    Ok(Trace {
        request,
        calls,
        tools,
        source: TraceSource::Teacher,
        spoken_text,
    })
}

/// Message content as text: a string, or the text parts of a content array.
fn content_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join(""))
        }
        _ => None,
    }
}

pub fn import_openai_chat(
    text: &str,
    name: &str,
    strict: bool,
) -> Result<Imported<Trace>, DataError> {
    convert(text, name, strict, openai_chat_to_trace)
}

pub fn read_openai_chat(path: &Path, strict: bool) -> Result<Imported<Trace>, DataError> {
    import_openai_chat(&read_text(path)?, &path.display().to_string(), strict)
}

fn trace_catalog(trace: &Trace, default_catalog: Option<&Catalog>) -> Result<Catalog, RecordError> {
    match (&trace.tools, default_catalog) {
        (Some(Value::String(file)), _) => {
            Catalog::from_file(file).map_err(|e| RecordError::Catalog {
                at: format!("tools file `{file}`"),
                reason: e.to_string(),
            })
        }
        (Some(t), _) => catalog_of(t, "tools"),
        (None, Some(c)) => Ok(c.clone()),
        (None, None) => Err(RecordError::from(
            "the trace has no `tools` and no default catalog was given",
        )),
    }
}

/// A trace as a chat record. `arguments_as_string`: OpenAI fine-tuning wants a JSON string,
/// TRL / Hugging Face chat templates want an object.
fn trace_to_chat(
    trace: &Trace,
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
    arguments_as_string: bool,
) -> Result<Value, RecordError> {
    let catalog = trace_catalog(trace, default_catalog)?;
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": trace.request}));
    let mut assistant = Map::new();
    assistant.insert("role".into(), json!("assistant"));
    if trace.calls.is_empty() {
        assistant.insert(
            "content".into(),
            json!(trace.spoken_text.clone().unwrap_or_default()),
        );
    } else {
        assistant.insert(
            "content".into(),
            trace
                .spoken_text
                .clone()
                .map(Value::String)
                .unwrap_or(Value::Null),
        );
        let tool_calls: Vec<Value> = trace
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let args = Value::Object(c.arguments.clone());
                let args = if arguments_as_string { Value::String(args.to_string()) } else { args };
                json!({"id": format!("call_{i}"), "type": "function", "function": {"name": c.name, "arguments": args}})
            })
            .collect();
        assistant.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    messages.push(Value::Object(assistant));
    Ok(json!({"messages": messages, "tools": catalog.to_openai()}))
}

pub fn trace_to_openai_chat(
    trace: &Trace,
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
) -> Result<Value, RecordError> {
    trace_to_chat(trace, default_catalog, system, true)
}

pub fn trace_to_trl(
    trace: &Trace,
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
) -> Result<Value, RecordError> {
    trace_to_chat(trace, default_catalog, system, false)
}

fn export_with(
    traces: &[Trace],
    f: impl Fn(usize, &Trace) -> Result<Value, RecordError>,
) -> Result<String, DataError> {
    let mut out = String::new();
    for (i, t) in traces.iter().enumerate() {
        let v = f(i, t).map_err(|m| DataError::Invalid(format!("trace {}: {m}", i + 1)))?;
        out.push_str(&v.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// Traces -> OpenAI chat fine-tuning JSONL. `default_catalog` serves traces without `tools`.
pub fn export_openai_chat(
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
) -> Result<String, DataError> {
    export_with(traces, |_, t| {
        trace_to_openai_chat(t, default_catalog, system)
    })
}

/// Traces -> the chat JSONL TRL's `SFTTrainer` takes (`messages` + `tools`, arguments as objects).
pub fn export_trl(
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
) -> Result<String, DataError> {
    export_with(traces, |_, t| trace_to_trl(t, default_catalog, system))
}

/// Traces -> xLAM JSONL (ids are 0-based positions).
pub fn export_xlam(
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
) -> Result<String, DataError> {
    export_with(traces, |i, t| trace_to_xlam(t, i, default_catalog))
}

/// Traces -> TRL prompt-completion JSONL in a planner's own prompt: `system_for` writes the
/// system message for a catalog (the planner's tools prompt), the completion is the plan as a
/// JSON array, so TRL's completion-only loss trains what plansmith's own LoRA training does.
pub fn export_trl_planner(
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
    system_for: &dyn Fn(&Catalog) -> Result<String, String>,
) -> Result<String, DataError> {
    export_with(traces, |_, t| {
        let catalog = trace_catalog(t, default_catalog)?;
        let system = system_for(&catalog).map_err(RecordError::from)?;
        let plan = plansmith_core::Plan {
            calls: t.calls.clone(),
            spoken_text: None,
        };
        Ok(json!({
            "prompt": [
                {"role": "system", "content": system},
                {"role": "user", "content": t.request},
            ],
            "completion": [
                {"role": "assistant", "content": plansmith_core::Syntax::JsonArray.render(&plan)},
            ],
        }))
    })
}

/// What `plansmith data export` runs. [`ExportFormat::TrlPlanner`] needs the planner's prompt
/// ([`export_trl_planner`]), which this crate does not write.
pub fn export_traces(
    format: ExportFormat,
    traces: &[Trace],
    default_catalog: Option<&Catalog>,
    system: Option<&str>,
) -> Result<String, DataError> {
    match format {
        ExportFormat::Xlam => export_xlam(traces, default_catalog),
        ExportFormat::OpenAiChat => export_openai_chat(traces, default_catalog, system),
        ExportFormat::Trl => export_trl(traces, default_catalog, system),
        ExportFormat::TrlPlanner => Err(DataError::Invalid(
            "trl-planner records carry the planner's tools prompt: build them with export_trl_planner".into(),
        )),
    }
}

/// What `plansmith data import` runs: any format to traces (`answers` is BFCL's possible-answer
/// file; without it BFCL items expect no call).
pub fn import_traces(
    format: ImportFormat,
    path: &Path,
    answers: Option<&Path>,
    strict: bool,
) -> Result<Imported<Trace>, DataError> {
    match format {
        ImportFormat::Xlam => read_xlam(path, strict),
        ImportFormat::OpenAiChat => read_openai_chat(path, strict),
        ImportFormat::Bfcl => {
            let items = read_bfcl(path, answers, strict)?;
            Ok(Imported {
                items: items.items.iter().map(EvalItem::to_trace).collect(),
                skipped: items.skipped,
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// BFCL

/// One BFCL question with its expected calls (first accepted value per parameter).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalItem {
    pub id: String,
    pub request: String,
    /// The functions, converted to OpenAI form (JSON Schema).
    pub tools: Value,
    /// Expected calls; empty when no call is right (e.g. irrelevance).
    pub expected: Vec<Call>,
}

impl EvalItem {
    pub fn to_trace(&self) -> Trace {
        Trace {
            request: self.request.clone(),
            calls: self.expected.clone(),
            tools: Some(self.tools.clone()),
            source: TraceSource::Teacher,
            spoken_text: None,
        }
    }
}

/// BFCL ground truth -> calls: for each parameter the first accepted value; a first value of
/// `""` means "may be omitted", so the parameter is left out. Nested dicts are resolved the
/// same way, key by key. The parsing is plansmith-core's ([`GoldCall`]), shared with
/// evaluation.
pub fn bfcl_expected_calls(ground_truth: &Value) -> Result<Vec<Call>, RecordError> {
    let gold = GoldCall::parse_list(ground_truth).map_err(|e| RecordError::Shape(e.to_string()))?;
    gold.iter()
        .map(|g| {
            g.first_accepted()
                .map_err(|e| RecordError::Shape(format!("ground_truth: {e}")))
        })
        .collect()
}

/// One BFCL question record -> (id, request, tools).
fn bfcl_question(rec: &Value) -> Result<(String, String, Value), RecordError> {
    let id = str_field(rec, "id")?.to_string();
    let turns = rec
        .get("question")
        .and_then(Value::as_array)
        .ok_or("missing `question` array")?;
    if turns.len() != 1 {
        return Err(format!(
            "{} turns: only single-turn questions are supported",
            turns.len()
        )
        .into());
    }
    let turn = &turns[0];
    let messages: Vec<&Value> = match turn {
        Value::Array(ms) => ms.iter().collect(),
        Value::Object(_) => vec![turn],
        _ => return Err("question[0] must be a list of messages".into()),
    };
    let request = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| content_text(m.get("content")))
        .ok_or("no user message in question[0]")?;
    let functions = rec.get("function").ok_or("missing `function`")?;
    let functions = match functions {
        Value::Array(_) => functions.clone(),
        other => Value::Array(vec![other.clone()]),
    };
    let catalog = catalog_of(&functions, "function")?;
    Ok((id, request, catalog.to_openai()))
}

/// Import BFCL questions, with their possible answers when given (`answers_text`, JSONL keyed
/// by `id`; a question without an answer there is an error).
pub fn import_bfcl(
    questions_text: &str,
    questions_name: &str,
    answers_text: Option<(&str, &str)>,
    strict: bool,
) -> Result<Imported<EvalItem>, DataError> {
    let mut answers: HashMap<String, Vec<Call>> = HashMap::new();
    let mut skipped = Vec::new();
    if let Some((text, name)) = answers_text {
        let parsed = convert(text, name, strict, |rec| {
            let id = str_field(rec, "id")?.to_string();
            let gt = rec.get("ground_truth").ok_or("missing `ground_truth`")?;
            Ok((id, bfcl_expected_calls(gt)?))
        })?;
        answers.extend(parsed.items);
        skipped.extend(parsed.skipped);
    }
    let have_answers = answers_text.is_some();
    let mut imported = convert(questions_text, questions_name, strict, |rec| {
        let (id, request, tools) = bfcl_question(rec)?;
        let expected = match answers.get(&id) {
            Some(calls) => calls.clone(),
            None if have_answers => return Err(format!("no possible answer for `{id}`").into()),
            None => Vec::new(),
        };
        let catalog = Catalog::from_value(&tools).map_err(|e| e.to_string())?;
        check_names(&expected, &catalog, "ground_truth")?;
        Ok(EvalItem {
            id,
            request,
            tools,
            expected,
        })
    })?;
    skipped.append(&mut imported.skipped);
    Ok(Imported {
        items: imported.items,
        skipped,
    })
}

pub fn read_bfcl(
    questions: &Path,
    answers: Option<&Path>,
    strict: bool,
) -> Result<Imported<EvalItem>, DataError> {
    let q = read_text(questions)?;
    let a = match answers {
        Some(p) => Some((read_text(p)?, p.display().to_string())),
        None => None,
    };
    import_bfcl(
        &q,
        &questions.display().to_string(),
        a.as_ref().map(|(t, n)| (t.as_str(), n.as_str())),
        strict,
    )
}
