//! Tool catalogs: one canonical form, imported from the formats people already have.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::schema::{self, SchemaProblem, SchemaProblemKind};

/// One tool: a name, what it does, and a JSON Schema object for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub parameters: Value,
    /// Hints such as MCP's `readOnlyHint`; carried along, never part of the hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl Tool {
    /// `name(required, optional?)`.
    pub fn signature(&self) -> String {
        let required = self.required();
        let params: Vec<String> = self
            .param_names()
            .into_iter()
            .map(|p| {
                if required.contains(&p) {
                    p.to_string()
                } else {
                    format!("{p}?")
                }
            })
            .collect();
        format!("{}({})", self.name, params.join(", "))
    }

    /// The description's first sentence on one line, cut to `max_words` words.
    pub fn summary(&self, max_words: usize) -> String {
        let text = self
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let first = match text.find(". ") {
            Some(end) => &text[..=end],
            None => text.as_str(),
        };
        first
            .split(' ')
            .filter(|w| !w.is_empty())
            .take(max_words)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Names of the top-level parameters, in schema order.
    pub fn param_names(&self) -> Vec<&str> {
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    pub fn required(&self) -> Vec<&str> {
        self.parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
}

/// The source format a catalog was imported from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogFormat {
    /// OpenAI `tools` (`{"type":"function","function":{...}}`) or bare function objects.
    OpenAi,
    /// MCP `tools/list` result (`inputSchema`).
    Mcp,
    /// Anthropic (`input_schema`).
    Anthropic,
    /// BFCL function docs (`"type": "dict"`, `float`, `tuple`, `any`).
    Bfcl,
    /// xLAM flat parameter tables (`{"p": {"type": "str, optional"}}`).
    Xlam,
}

impl CatalogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogFormat::OpenAi => "openai",
            CatalogFormat::Mcp => "mcp",
            CatalogFormat::Anthropic => "anthropic",
            CatalogFormat::Bfcl => "bfcl",
            CatalogFormat::Xlam => "xlam",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read catalog {path}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("catalog is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{message} at {path}")]
    Invalid { path: String, message: String },
    #[error("duplicate tool name `{name}` at {path} (first defined at {first})")]
    Duplicate {
        name: String,
        path: String,
        first: String,
    },
    #[error("{0}")]
    Schema(SchemaProblem),
}

impl CatalogError {
    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        CatalogError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The JSON path the error points at, when it has one.
    pub fn path(&self) -> Option<&str> {
        match self {
            CatalogError::Invalid { path, .. } | CatalogError::Duplicate { path, .. } => Some(path),
            CatalogError::Schema(p) => Some(&p.path),
            _ => None,
        }
    }
}

/// A validated tool catalog. Tool order is kept (it is the order tools appear in prompts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    pub format: CatalogFormat,
}

impl Catalog {
    pub fn from_file(path: impl AsRef<Path>) -> Result<Catalog, CatalogError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Catalog::from_json_str(&text)
    }

    pub fn from_json_str(text: &str) -> Result<Catalog, CatalogError> {
        let value: Value = serde_json::from_str(text)?;
        Catalog::from_value(&value)
    }

    /// Import any supported format, detected from its shape.
    pub fn from_value(value: &Value) -> Result<Catalog, CatalogError> {
        let (items, base): (Vec<&Value>, &str) = match value {
            Value::Array(a) => (a.iter().collect(), "$"),
            Value::Object(m) => match m.get("tools") {
                Some(Value::Array(a)) => (a.iter().collect(), "$.tools"),
                Some(_) => {
                    return Err(CatalogError::invalid("$.tools", "`tools` must be an array"))
                }
                // A single tool object (e.g. one BFCL function doc).
                None => (vec![value], "$"),
            },
            _ => {
                return Err(CatalogError::invalid(
                    "$",
                    "a catalog must be an array of tools or {\"tools\": [...]}",
                ))
            }
        };
        let mut tools = Vec::with_capacity(items.len());
        let mut format = None;
        for (i, item) in items.iter().enumerate() {
            let path = if matches!(value, Value::Object(m) if !m.contains_key("tools")) {
                base.to_string()
            } else {
                format!("{base}[{i}]")
            };
            let (tool, f) = import_tool(item, &path)?;
            // Mixed lists are fine as long as each item is recognisable; report the first.
            format.get_or_insert(f);
            tools.push((tool, path));
        }
        let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for (tool, path) in &tools {
            if let Some(first) = seen.get(&tool.name) {
                return Err(CatalogError::Duplicate {
                    name: tool.name.clone(),
                    path: path.clone(),
                    first: first.clone(),
                });
            }
            seen.insert(tool.name.clone(), path.clone());
        }
        Ok(Catalog {
            tools: tools.into_iter().map(|(t, _)| t).collect(),
            format: format.unwrap_or(CatalogFormat::OpenAi),
        })
    }

    /// Build from already-canonical tools (checks names and schemas like an import does).
    pub fn from_tools(tools: Vec<Tool>) -> Result<Catalog, CatalogError> {
        let value = Value::Array(
            tools
                .into_iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
                .collect(),
        );
        Catalog::from_value(&value)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// Stable SHA-256 (hex) of the canonical tools: names, descriptions and parameter
    /// schemas with sorted keys. Independent of key order, whitespace and source format;
    /// dependent on tool order, because prompts list tools in order.
    pub fn hash(&self) -> String {
        let canonical = Value::Array(
            self.tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
                .collect(),
        );
        let digest = Sha256::digest(schema::canonical_json(&canonical).as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The canonical JSON form: `[{name, description, parameters, annotations?}]`.
    pub fn to_canonical_json(&self) -> Value {
        serde_json::to_value(&self.tools).unwrap_or(Value::Null)
    }

    /// OpenAI `tools` form, for chat templates and teachers.
    pub fn to_openai(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters}})
                })
                .collect(),
        )
    }

    /// The compact one-line catalog for tools-in-prompt DSL planners:
    /// `tools: open(target) set(target, value) wait(condition, timeout_seconds?)`.
    pub fn compact_line(&self) -> String {
        let mut line = String::from("tools:");
        for tool in &self.tools {
            line.push(' ');
            line.push_str(&tool.signature());
        }
        line
    }

    /// The catalog for tools-in-prompt planners that read descriptions too: a tool per line,
    /// its signature then the first sentence of its description (at most 16 words, so one
    /// verbose tool cannot crowd out the request):
    /// `tools:\nwait(condition, timeout_seconds?) Pause until an event happens or a time passes.`
    pub fn described_lines(&self) -> String {
        let mut text = String::from("tools:");
        for tool in &self.tools {
            text.push('\n');
            text.push_str(&tool.signature());
            let summary = tool.summary(16);
            if !summary.is_empty() {
                text.push(' ');
                text.push_str(&summary);
            }
        }
        text
    }
}

/// Characters a tool name may use: every syntax can carry these unquoted.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
}

/// Characters a parameter name may use: no DSL separators, no `.` (it nests), no whitespace.
pub fn is_valid_param_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "()|=;.\"".contains(c))
}

fn import_tool(item: &Value, path: &str) -> Result<(Tool, CatalogFormat), CatalogError> {
    let obj = item
        .as_object()
        .ok_or_else(|| CatalogError::invalid(path, "a tool must be a JSON object"))?;
    let (format, body, body_path): (CatalogFormat, &Map<String, Value>, String) =
        if let Some(function) = obj.get("function") {
            let f = function.as_object().ok_or_else(|| {
                CatalogError::invalid(format!("{path}.function"), "`function` must be an object")
            })?;
            (CatalogFormat::OpenAi, f, format!("{path}.function"))
        } else if obj.contains_key("inputSchema") {
            (CatalogFormat::Mcp, obj, path.to_string())
        } else if obj.contains_key("input_schema") {
            (CatalogFormat::Anthropic, obj, path.to_string())
        } else {
            (
                detect_parameters_format(obj.get("parameters")),
                obj,
                path.to_string(),
            )
        };
    if format == CatalogFormat::OpenAi {
        if let Some(t) = obj.get("type") {
            if obj.contains_key("function") && t != "function" {
                return Err(CatalogError::invalid(
                    format!("{path}.type"),
                    format!("unsupported tool type {t} (only \"function\" tools)"),
                ));
            }
        }
    }
    let name = match body.get("name") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(CatalogError::invalid(
                format!("{body_path}.name"),
                "tool name must be a string",
            ))
        }
        None => {
            return Err(CatalogError::invalid(
                body_path.clone(),
                "tool has no `name`",
            ))
        }
    };
    if name.is_empty() {
        return Err(CatalogError::invalid(
            format!("{body_path}.name"),
            "tool name is empty",
        ));
    }
    if !is_valid_tool_name(&name) {
        return Err(CatalogError::invalid(
            format!("{body_path}.name"),
            format!("tool name `{name}` has characters a plan cannot carry (use letters, digits, `_`, `-`, `.`)"),
        ));
    }
    let description = match body.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(CatalogError::invalid(
                format!("{body_path}.description"),
                "description must be a string",
            ))
        }
    };
    let (key, raw) = match format {
        CatalogFormat::Mcp => ("inputSchema", body.get("inputSchema")),
        CatalogFormat::Anthropic => ("input_schema", body.get("input_schema")),
        _ => ("parameters", body.get("parameters")),
    };
    let schema_path = format!("{body_path}.{key}");
    let raw = raw
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let converted = match format {
        CatalogFormat::Bfcl => {
            schema::from_bfcl(&raw, &schema_path).map_err(CatalogError::Schema)?
        }
        CatalogFormat::Xlam => {
            let table = raw.as_object().cloned().unwrap_or_default();
            schema::from_xlam(&table, &schema_path).map_err(CatalogError::Schema)?
        }
        _ => raw,
    };
    schema::check_object_schema(&converted, &schema_path).map_err(CatalogError::Schema)?;
    let mut parameters =
        schema::normalize(&converted, &schema_path).map_err(CatalogError::Schema)?;
    if let Value::Object(m) = &mut parameters {
        m.insert("type".into(), json!("object"));
        m.entry("properties").or_insert_with(|| json!({}));
        m.remove("$schema");
        m.remove("strict");
    }
    check_meta_schema(&parameters, &schema_path)?;
    check_patterns(&parameters, &schema_path)?;
    check_param_names(&parameters, &schema_path)?;
    check_required_declared(&parameters, &schema_path)?;
    let annotations = obj.get("annotations").cloned();
    Ok((
        Tool {
            name,
            description,
            parameters,
            annotations,
        },
        format,
    ))
}

fn detect_parameters_format(parameters: Option<&Value>) -> CatalogFormat {
    match parameters {
        Some(Value::Object(p)) => {
            if p.get("type").and_then(Value::as_str) == Some("dict") {
                CatalogFormat::Bfcl
            } else if !p.is_empty()
                && p.get("type").is_none_or(|t| !t.is_string())
                && p.get("properties").is_none_or(|v| v.get("type").is_some())
                && p.values()
                    .all(|v| v.get("type").is_some_and(Value::is_string))
            {
                CatalogFormat::Xlam
            } else {
                CatalogFormat::OpenAi
            }
        }
        _ => CatalogFormat::OpenAi,
    }
}

fn check_param_names(schema: &Value, path: &str) -> Result<(), CatalogError> {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let here = format!("{path}.properties.{name}");
            if !is_valid_param_name(name) {
                return Err(CatalogError::Schema(SchemaProblem {
                    path: here,
                    kind: SchemaProblemKind::Invalid(format!(
                        "parameter name `{name}` has characters a plan cannot carry"
                    )),
                }));
            }
            check_param_names(sub, &here)?;
        }
    }
    if let Some(items) = schema.get("items") {
        check_param_names(items, &format!("{path}.items"))?;
    }
    Ok(())
}

fn check_required_declared(schema: &Value, path: &str) -> Result<(), CatalogError> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let (Some(req), Some(props)) = (schema.get("required").and_then(Value::as_array), props) {
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        for r in req.iter().filter_map(Value::as_str) {
            if closed && !props.contains_key(r) {
                return Err(CatalogError::invalid(
                    format!("{path}.required"),
                    format!("required parameter `{r}` is not declared in `properties`"),
                ));
            }
        }
    }
    if let Some(props) = props {
        for (name, sub) in props {
            check_required_declared(sub, &format!("{path}.properties.{name}"))?;
        }
    }
    Ok(())
}

/// Every `pattern` must be an ECMA-262 regex where the grammar and the validator could read it
/// differently (see [`crate::pattern`]).
fn check_patterns(schema: &Value, path: &str) -> Result<(), CatalogError> {
    match schema {
        Value::Object(m) => {
            for (k, v) in m {
                let here = format!("{path}.{k}");
                if let (true, Value::String(p)) = (k == "pattern", v) {
                    if let Some(why) = crate::pattern::nothing_to_repeat(p) {
                        return Err(CatalogError::invalid(
                            here,
                            format!("`pattern` {p:?} is not an ECMA-262 regex: {why}"),
                        ));
                    }
                } else {
                    check_patterns(v, &here)?;
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                check_patterns(v, &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schema must be valid JSON Schema (a `description` that is a number, a `minimum` that is
/// a string): the plan validator compiles it later, and a catalog it cannot compile must be
/// refused here, naming the place, rather than fail at planning time.
fn check_meta_schema(parameters: &Value, schema_path: &str) -> Result<(), CatalogError> {
    let e = match jsonschema::meta::validate(parameters) {
        Err(e) => e,
        // The meta-schema does not check that a `pattern` is a regex; compiling does.
        Ok(()) if parameters.to_string().contains("\"pattern") => {
            match jsonschema::validator_for(parameters) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            }
        }
        Ok(()) => return Ok(()),
    };
    let mut path = schema_path.to_string();
    for seg in e.instance_path().to_string().split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            path.push_str(&format!("[{seg}]"));
        } else {
            path.push('.');
            path.push_str(&seg);
        }
    }
    Err(CatalogError::invalid(
        path,
        format!("not valid JSON Schema: {}", e.masked()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_line_marks_optional() {
        let c = Catalog::from_json_str(
            r#"[{"name":"wait","parameters":{"type":"object","properties":{"condition":{"type":"string"},"timeout_seconds":{"type":"integer"}},"required":["condition"]}}]"#,
        )
        .unwrap();
        assert_eq!(c.compact_line(), "tools: wait(condition, timeout_seconds?)");
    }

    #[test]
    fn described_lines_keep_one_short_sentence_per_tool() {
        let c = Catalog::from_json_str(
            r#"[{"name":"wait","description":"Pause until an event happens.\n More text here.",
                 "parameters":{"type":"object","properties":{"condition":{"type":"string"}},"required":["condition"]}},
                {"name":"ping","parameters":{"type":"object","properties":{}}},
                {"name":"essay","description":"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen",
                 "parameters":{"type":"object","properties":{}}}]"#,
        )
        .unwrap();
        assert_eq!(
            c.described_lines(),
            "tools:\nwait(condition) Pause until an event happens.\nping()\n\
             essay() one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
        );
    }
}
