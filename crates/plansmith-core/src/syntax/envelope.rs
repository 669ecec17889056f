//! The envelope: `{"verb": tool, "args": {...}, "spoken_text": "..."}`.

use serde_json::{json, Map, Value};

use super::ParseError;
use crate::plan::{Call, Plan};

fn envelope(call: Option<&Call>, spoken: Option<&str>) -> Value {
    let mut m = Map::new();
    match call {
        Some(c) => {
            m.insert("verb".into(), json!(c.name));
            m.insert("args".into(), Value::Object(c.arguments.clone()));
        }
        None => {
            m.insert("verb".into(), Value::Null);
        }
    }
    if let Some(s) = spoken {
        m.insert("spoken_text".into(), json!(s));
    }
    Value::Object(m)
}

pub fn render(plan: &Plan) -> String {
    let spoken = plan.spoken_text.as_deref();
    let value = match plan.calls.as_slice() {
        [] => envelope(None, spoken),
        [one] => envelope(Some(one), spoken),
        many => Value::Array(
            many.iter()
                .enumerate()
                .map(|(i, c)| envelope(Some(c), if i == 0 { spoken } else { None }))
                .collect(),
        ),
    };
    value.to_string()
}

pub fn parse(text: &str) -> Result<Plan, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ParseError::json(text, &e))?;
    let items = match &value {
        Value::Array(a) if !a.is_empty() => a.iter().collect(),
        Value::Array(_) => return Err(ParseError::new(0, "empty envelope array")),
        other => vec![other],
    };
    let many = items.len() > 1;
    let mut plan = Plan::default();
    for (i, item) in items.into_iter().enumerate() {
        let here = if many { format!("$[{i}]") } else { "$".into() };
        let obj = item
            .as_object()
            .ok_or_else(|| ParseError::new(0, format!("{here}: an envelope must be an object")))?;
        if let Some(k) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "verb" | "args" | "spoken_text"))
        {
            return Err(ParseError::new(
                0,
                format!("{here}: unknown envelope key `{k}`"),
            ));
        }
        match obj.get("spoken_text") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if plan.spoken_text.is_none() => {
                plan.spoken_text = Some(s.clone())
            }
            Some(Value::String(_)) => {
                return Err(ParseError::new(
                    0,
                    format!("{here}: only one envelope may carry spoken_text"),
                ))
            }
            Some(_) => {
                return Err(ParseError::new(
                    0,
                    format!("{here}.spoken_text must be a string"),
                ))
            }
        }
        match obj.get("verb") {
            Some(Value::String(verb)) => {
                let args = match obj.get("args") {
                    Some(Value::Object(a)) => a.clone(),
                    None => Map::new(),
                    Some(_) => {
                        return Err(ParseError::new(0, format!("{here}.args must be an object")))
                    }
                };
                plan.calls.push(Call::new(verb.clone(), args));
            }
            Some(Value::Null) if !many => {
                if obj
                    .get("args")
                    .is_some_and(|a| a.as_object().is_none_or(|m| !m.is_empty()))
                {
                    return Err(ParseError::new(
                        0,
                        "$: a no-call envelope cannot carry args",
                    ));
                }
            }
            _ => {
                return Err(ParseError::new(
                    0,
                    format!("{here}.verb must be a tool name"),
                ))
            }
        }
    }
    Ok(plan)
}
