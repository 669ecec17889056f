//! The plan DSL: `tool(k=v; k=v) | tool(k=v)\n`, `done\n` for no call.

use serde_json::{Map, Value};

use super::ParseError;
use crate::catalog::{is_valid_param_name, is_valid_tool_name};
use crate::plan::{Call, Plan};

/// Characters a DSL value cannot contain.
pub const DSL_FORBIDDEN: &[char] = &['(', ')', '|', '=', ';', '\n'];
const CALL_SEP: &str = " | ";
const ARG_SEP: &str = "; ";
const NO_CALL: &str = "done";

pub fn is_valid_dsl_value(v: &str) -> bool {
    !v.is_empty() && !v.contains(DSL_FORBIDDEN)
}

pub fn render(plan: &Plan) -> String {
    if plan.calls.is_empty() {
        return format!("{NO_CALL}\n");
    }
    let calls: Vec<String> = plan
        .calls
        .iter()
        .map(|call| {
            let mut pairs = Vec::new();
            for (k, v) in &call.arguments {
                flatten(k, v, &mut pairs);
            }
            let args: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{}({})", call.name, args.join(ARG_SEP))
        })
        .collect();
    format!("{}\n", calls.join(CALL_SEP))
}

fn flatten(key: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{key}.{k}"), v, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{key}.{i}"), v, out);
            }
        }
        Value::String(s) => out.push((key.to_string(), s.clone())),
        other => out.push((key.to_string(), other.to_string())),
    }
}

pub fn parse(text: &str) -> Result<Plan, ParseError> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body == NO_CALL {
        return Ok(Plan::no_call());
    }
    if body.is_empty() {
        return Err(ParseError::new(0, "empty plan (expected a call or `done`)"));
    }
    let mut calls = Vec::new();
    let mut offset = 0;
    for segment in body.split(CALL_SEP) {
        calls.push(parse_call(segment, offset)?);
        offset += segment.len() + CALL_SEP.len();
    }
    Ok(Plan::new(calls))
}

fn parse_call(segment: &str, offset: usize) -> Result<Call, ParseError> {
    let open = segment.find('(').ok_or_else(|| {
        ParseError::new(offset, format!("expected `name(...)`, found `{segment}`"))
    })?;
    let name = &segment[..open];
    if !is_valid_tool_name(name) {
        return Err(ParseError::new(
            offset,
            format!("invalid tool name `{name}`"),
        ));
    }
    if !segment.ends_with(')') {
        return Err(ParseError::new(
            offset + segment.len(),
            "expected `)` closing the call",
        ));
    }
    let inner = &segment[open + 1..segment.len() - 1];
    let inner_offset = offset + open + 1;
    let mut pairs: Vec<(Vec<&str>, &str)> = Vec::new();
    if !inner.is_empty() {
        let mut at = inner_offset;
        for arg in inner.split(ARG_SEP) {
            let eq = arg.find('=').ok_or_else(|| {
                ParseError::new(at, format!("expected `key=value`, found `{arg}`"))
            })?;
            let (key, value) = (&arg[..eq], &arg[eq + 1..]);
            let path: Vec<&str> = key.split('.').collect();
            if path.iter().any(|p| !is_valid_param_name(p)) {
                return Err(ParseError::new(
                    at,
                    format!("invalid argument name `{key}`"),
                ));
            }
            if !is_valid_dsl_value(value) {
                let why = if value.is_empty() {
                    "empty value"
                } else {
                    "value contains a reserved character"
                };
                return Err(ParseError::new(at + eq + 1, format!("{why} for `{key}`")));
            }
            pairs.push((path, value));
            at += arg.len() + ARG_SEP.len();
        }
    }
    let mut args = Map::new();
    for (path, value) in &pairs {
        insert_path(&mut args, path, value).map_err(|m| ParseError::new(inner_offset, m))?;
    }
    let arguments = match arrays_from_indices(Value::Object(args)) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Ok(Call::new(name, arguments))
}

fn insert_path(map: &mut Map<String, Value>, path: &[&str], value: &str) -> Result<(), String> {
    let (head, rest) = path.split_first().ok_or("empty key")?;
    if rest.is_empty() {
        if map.contains_key(*head) {
            return Err(format!("argument `{}` given twice", path.join(".")));
        }
        map.insert(head.to_string(), Value::String(value.to_string()));
        return Ok(());
    }
    let child = map
        .entry(head.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    match child {
        Value::Object(m) => insert_path(m, rest, value),
        _ => Err(format!("argument `{head}` is both a value and an object")),
    }
}

/// Objects whose keys are exactly `0..n` came from arrays.
fn arrays_from_indices(value: Value) -> Value {
    match value {
        Value::Object(m) => {
            let is_array = !m.is_empty() && (0..m.len()).all(|i| m.contains_key(&i.to_string()));
            if is_array {
                let mut m = m;
                let items = (0..m.len())
                    .map(|i| arrays_from_indices(m.remove(&i.to_string()).unwrap_or(Value::Null)))
                    .collect();
                Value::Array(items)
            } else {
                Value::Object(
                    m.into_iter()
                        .map(|(k, v)| (k, arrays_from_indices(v)))
                        .collect(),
                )
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mixle_format() {
        let p = parse("lookup_order(order_id=3732) | notify(user=ana)\n").unwrap();
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].arguments["order_id"], json!("3732"));
        assert_eq!(
            render(&p),
            "lookup_order(order_id=3732) | notify(user=ana)\n"
        );
        assert_eq!(parse("done\n").unwrap(), Plan::no_call());
    }

    #[test]
    fn nested_and_arrays() {
        let p = parse("perform(action=click; target.type=ui_element; target.label=Save draft)")
            .unwrap();
        assert_eq!(
            p.calls[0].arguments["target"],
            json!({"type": "ui_element", "label": "Save draft"})
        );
        let p = parse("clarify(kind=choice; question=which; choices.0=a; choices.1=b)").unwrap();
        assert_eq!(p.calls[0].arguments["choices"], json!(["a", "b"]));
        assert_eq!(
            render(&p),
            "clarify(kind=choice; question=which; choices.0=a; choices.1=b)\n"
        );
    }

    #[test]
    fn errors_say_where() {
        assert_eq!(parse("open(target=x").unwrap_err().offset, 13);
        assert!(parse("open(a=1; a=2)")
            .unwrap_err()
            .message
            .contains("twice"));
        assert!(parse("open(a=)")
            .unwrap_err()
            .message
            .contains("empty value"));
        assert!(parse("open(a=(x))").is_err());
        assert!(parse("").is_err());
        assert!(parse("bad name(a=1)").is_err());
    }
}
