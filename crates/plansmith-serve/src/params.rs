//! Reading request JSON by hand, so every error names the parameter (a JSON path) at fault.

use std::sync::Arc;

use plansmith_core::{Catalog, CatalogError};
use plansmith_core::{Entity, ToolChoice};
use serde_json::{Map, Value};

use crate::error::ApiError;

pub type Object = Map<String, Value>;

/// The body must be a JSON object.
pub fn parse_object(bytes: &[u8]) -> Result<Object, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_body(
            "request body is empty: expected a JSON object",
        ));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(ApiError::bad_body(format!(
            "request body must be a JSON object, not {}",
            kind(&other)
        ))),
        Err(e) => Err(ApiError::bad_body(format!(
            "request body is not valid JSON: {e}"
        ))),
    }
}

/// `array`, `string`, ... as a reader would say it.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The value of `key`, with `null` read as absent.
pub fn field<'a>(obj: &'a Object, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

pub fn opt_bool(obj: &Object, key: &str) -> Result<Option<bool>, ApiError> {
    match field(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ApiError::invalid(
            key,
            format!("`{key}` must be a boolean, not {}", kind(v)),
        )),
    }
}

/// Refuse any field not in `allowed`, naming it (routes of our own; the OpenAI route is lenient).
pub fn only_fields(obj: &Object, allowed: &[&str]) -> Result<(), ApiError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(
            k,
            format!(
                "unknown field `{k}` (expected one of {})",
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

pub fn opt_str<'a>(obj: &'a Object, key: &str) -> Result<Option<&'a str>, ApiError> {
    match field(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(ApiError::invalid(
            key,
            format!("`{key}` must be a string, not {}", kind(v)),
        )),
    }
}

/// A non-negative integer.
pub fn opt_uint(obj: &Object, key: &str) -> Result<Option<u64>, ApiError> {
    match field(obj, key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ApiError::invalid(
                key,
                format!("`{key}` must be a non-negative integer, not {v}"),
            )
        }),
    }
}

pub fn opt_int(obj: &Object, key: &str) -> Result<Option<i64>, ApiError> {
    match field(obj, key) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("`{key}` must be an integer, not {v}"))),
    }
}

/// A number in `[lo, hi]`.
pub fn opt_number(obj: &Object, key: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
    match field(obj, key) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if (lo..=hi).contains(&x) => Ok(Some(x)),
            Some(x) => Err(ApiError::invalid(
                key,
                format!("`{key}` must be between {lo} and {hi}, not {x}"),
            )),
            None => Err(ApiError::invalid(
                key,
                format!("`{key}` must be a number, not {}", kind(v)),
            )),
        },
    }
}

/// `tools` imported with [`Catalog::from_value`] (any supported format); errors carry the
/// JSON path rebased onto `param` (`$[0].function.name` -> `tools[0].function.name`).
pub fn parse_tools(value: &Value, param: &str) -> Result<Arc<Catalog>, ApiError> {
    if matches!(value, Value::Array(a) if a.is_empty()) {
        return Err(ApiError::invalid(
            param,
            format!("`{param}` is empty: send at least one tool, or leave `{param}` out"),
        ));
    }
    match Catalog::from_value(value) {
        Ok(c) => Ok(Arc::new(c)),
        Err(e) => {
            let at = e
                .path()
                .map(|p| rebase(p, param))
                .unwrap_or_else(|| param.to_string());
            let message = match &e {
                CatalogError::Duplicate { name, path, first } => {
                    format!(
                        "duplicate tool name `{name}` at {} (first defined at {})",
                        rebase(path, param),
                        rebase(first, param)
                    )
                }
                other => {
                    let text = other.to_string();
                    match other.path() {
                        Some(p) => text.replace(p, &rebase(p, param)),
                        None => text,
                    }
                }
            };
            Err(ApiError::invalid(
                at,
                format!("invalid tool catalog: {message}"),
            ))
        }
    }
}

fn rebase(path: &str, param: &str) -> String {
    match path.strip_prefix('$') {
        Some(rest) => format!("{param}{rest}"),
        None => format!("{param}.{path}"),
    }
}

/// `none` | `auto` | `required` | `{"type": "function", "function": {"name": ...}}`; with
/// `bare_names`, a plain tool name too (the native API's shorthand). A named tool must be
/// in `catalog`.
pub fn parse_tool_choice(
    value: Option<&Value>,
    catalog: &Catalog,
    bare_names: bool,
) -> Result<ToolChoice, ApiError> {
    const P: &str = "tool_choice";
    let shape = if bare_names {
        "`tool_choice` must be \"none\", \"auto\", \"required\", a tool name, or {\"type\": \"function\", \"function\": {\"name\": ...}}"
    } else {
        "`tool_choice` must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
    };
    let name = match value {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "none" => return Ok(ToolChoice::None),
            "auto" => return Ok(ToolChoice::Auto),
            "required" => return Ok(ToolChoice::Required),
            name if bare_names && !name.is_empty() => name.to_string(),
            other => return Err(ApiError::invalid(P, format!("{shape}, not \"{other}\""))),
        },
        Some(Value::Object(m)) => {
            match m.get("type").and_then(Value::as_str) {
                Some("function") => {}
                Some(t) => {
                    return Err(ApiError::unsupported(
                        "tool_choice.type",
                        format!("tool_choice type `{t}` is not supported; use \"function\""),
                    ))
                }
                None => return Err(ApiError::invalid("tool_choice.type", shape)),
            }
            match m
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
            {
                Some(n) => n.to_string(),
                None => {
                    return Err(ApiError::invalid(
                        "tool_choice.function.name",
                        "`tool_choice.function.name` must be a string",
                    ))
                }
            }
        }
        Some(v) => return Err(ApiError::invalid(P, format!("{shape}, not {}", kind(v)))),
    };
    if catalog.get(&name).is_none() {
        let known: Vec<&str> = catalog.names().collect();
        return Err(ApiError::invalid(
            if bare_names {
                P
            } else {
                "tool_choice.function.name"
            },
            format!(
                "tool_choice names the tool `{name}`, which is not among the tools (known: {})",
                known.join(", ")
            ),
        ));
    }
    Ok(ToolChoice::Named(name))
}

/// `[{"type": str, "label": str}]`.
pub fn parse_entities(value: Option<&Value>, param: &str) -> Result<Vec<Entity>, ApiError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ApiError::invalid(
                param,
                format!(
                    "`{param}` must be an array of {{\"type\", \"label\"}}, not {}",
                    kind(v)
                ),
            ))
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let here = format!("{param}[{i}]");
        let Some(obj) = item.as_object() else {
            return Err(ApiError::invalid(
                &here,
                format!("`{here}` must be an object with string `type` and `label`"),
            ));
        };
        let get = |k: &str| match obj.get(k) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            _ => Err(ApiError::invalid(
                format!("{here}.{k}"),
                format!("`{here}.{k}` must be a non-empty string"),
            )),
        };
        out.push(Entity {
            entity_type: get("type")?,
            label: get("label")?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cat() -> Catalog {
        Catalog::from_value(&json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])).unwrap()
    }

    #[test]
    fn tool_choice_forms() {
        let c = cat();
        assert_eq!(
            parse_tool_choice(None, &c, false).unwrap(),
            ToolChoice::Auto
        );
        assert_eq!(
            parse_tool_choice(Some(&json!("none")), &c, false).unwrap(),
            ToolChoice::None
        );
        assert_eq!(
            parse_tool_choice(Some(&json!("required")), &c, false).unwrap(),
            ToolChoice::Required
        );
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        assert_eq!(
            parse_tool_choice(Some(&named), &c, false).unwrap(),
            ToolChoice::Named("get_weather".into())
        );
        assert_eq!(
            parse_tool_choice(Some(&json!("get_weather")), &c, true).unwrap(),
            ToolChoice::Named("get_weather".into())
        );
        assert!(parse_tool_choice(Some(&json!("get_weather")), &c, false).is_err());
        let e = parse_tool_choice(
            Some(&json!({"type": "function", "function": {"name": "nope"}})),
            &c,
            false,
        )
        .unwrap_err();
        assert!(
            e.message.contains("`nope`") && e.message.contains("get_weather"),
            "{}",
            e.message
        );
        assert_eq!(e.param.as_deref(), Some("tool_choice.function.name"));
    }

    #[test]
    fn tool_errors_name_the_request_path() {
        let e = parse_tools(&json!([{"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}}, {"type": "function", "function": {"parameters": {}}}]), "tools").unwrap_err();
        assert!(e.param.as_deref().unwrap().starts_with("tools[1]"), "{e:?}");
        assert!(
            e.message.contains("tools[1]") && !e.message.contains('$'),
            "{}",
            e.message
        );
    }

    #[test]
    fn bodies() {
        assert!(parse_object(b"  ").unwrap_err().message.contains("empty"));
        assert!(parse_object(b"{\"a\":")
            .unwrap_err()
            .message
            .contains("not valid JSON"));
        assert!(parse_object(b"[1]")
            .unwrap_err()
            .message
            .contains("not an array"));
    }
}
