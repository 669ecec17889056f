//! OpenAI assistant messages with `tool_calls`, and plain JSON arrays of calls.

use serde_json::{json, Map, Value};

use super::ParseError;
use crate::plan::{Call, Plan};

/// The id given to the `index`-th call of a response.
pub fn call_id(index: usize) -> String {
    format!("call_{index}")
}

pub fn render_message(plan: &Plan) -> String {
    let tool_calls: Vec<Value> = plan
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": call_id(i), "type": "function", "function": {
                "name": c.name,
                "arguments": Value::Object(c.arguments.clone()).to_string()}})
        })
        .collect();
    json!({"content": plan.spoken_text, "tool_calls": tool_calls}).to_string()
}

pub fn render_array(plan: &Plan) -> String {
    array_value(plan).to_string()
}

/// The plan's calls as a JSON array of `{"name", "arguments"}`.
pub fn array_value(plan: &Plan) -> Value {
    Value::Array(
        plan.calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": Value::Object(c.arguments.clone())}))
            .collect(),
    )
}

/// Accepts an assistant message (`{"content", "tool_calls"}`) or a bare `tool_calls` array.
/// `arguments` may be a JSON string (the OpenAI wire form) or an object.
pub fn parse_message(text: &str) -> Result<Plan, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ParseError::json(text, &e))?;
    let (calls, content) = match &value {
        Value::Array(a) => (a.clone(), None),
        Value::Object(m) => {
            let calls = match m.get("tool_calls") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a.clone(),
                Some(_) => return Err(ParseError::new(0, "tool_calls must be an array")),
            };
            let content = match m.get("content") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(ParseError::new(0, "content must be a string or null")),
            };
            (calls, content)
        }
        _ => {
            return Err(ParseError::new(
                0,
                "expected an assistant message or a tool_calls array",
            ))
        }
    };
    let mut plan = Plan {
        calls: Vec::with_capacity(calls.len()),
        spoken_text: content,
    };
    for (i, tc) in calls.iter().enumerate() {
        let function = tc
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                ParseError::new(0, format!("tool_calls[{i}].function must be an object"))
            })?;
        plan.calls
            .push(call_from(function, &format!("tool_calls[{i}].function"))?);
    }
    Ok(plan)
}

/// Accepts `[{"name", "arguments"}]` or a single such object.
pub fn parse_array(text: &str) -> Result<Plan, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ParseError::json(text, &e))?;
    let items = match &value {
        Value::Array(a) => a.clone(),
        Value::Object(_) => vec![value.clone()],
        _ => return Err(ParseError::new(0, "expected a JSON array of calls")),
    };
    let mut plan = Plan::default();
    for (i, item) in items.iter().enumerate() {
        let obj = item
            .as_object()
            .ok_or_else(|| ParseError::new(0, format!("$[{i}] must be an object")))?;
        plan.calls.push(call_from(obj, &format!("$[{i}]"))?);
    }
    Ok(plan)
}

fn call_from(obj: &Map<String, Value>, here: &str) -> Result<Call, ParseError> {
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ParseError::new(0, format!("{here}.name must be a string")))?;
    let arguments = match obj.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(ParseError::new(
                    0,
                    format!("{here}.arguments must encode a JSON object"),
                ))
            }
            Err(e) => {
                return Err(ParseError::new(
                    0,
                    format!("{here}.arguments is not valid JSON: {e}"),
                ))
            }
        },
        Some(_) => {
            return Err(ParseError::new(
                0,
                format!("{here}.arguments must be an object or a JSON string"),
            ))
        }
    };
    Ok(Call::new(name, arguments))
}
