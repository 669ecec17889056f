//! The two pieces of BFCL's format that more than one crate reads: its Python-flavoured
//! parameter type names, and its gold calls (`{function: {param: [accepted values...]}}`).
//! Data import (first accepted value -> a training trace) and evaluation (every accepted value
//! -> BFCL's checker) both parse them here, so they cannot drift apart.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::Call;

/// A BFCL type name no JSON Schema type corresponds to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown BFCL type `{0}`")]
pub struct UnknownBfclType(pub String);

/// One BFCL type name -> its JSON Schema type (`None` for `any`, which accepts anything).
///
/// BFCL writes Python names (`dict`, `float`, `tuple`, `list`, `str`, `int`, `bool`), a few
/// Java / JavaScript ones in its non-Python categories (`ArrayList`, `long`, `double`, `char`),
/// and the JSON Schema names themselves.
pub fn json_schema_type(bfcl_type: &str) -> Result<Option<&'static str>, UnknownBfclType> {
    Ok(Some(match bfcl_type {
        "dict" | "object" => "object",
        "float" | "number" | "double" => "number",
        "integer" | "int" | "long" => "integer",
        "string" | "str" | "char" => "string",
        "boolean" | "bool" => "boolean",
        "array" | "tuple" | "list" | "ArrayList" => "array",
        "null" => "null",
        "any" => return Ok(None),
        other => return Err(UnknownBfclType(other.to_string())),
    }))
}

/// A malformed gold call; `at` is its JSON path inside the `ground_truth` list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct GoldError {
    pub at: String,
    pub message: String,
}

/// One gold call: the function name and, per parameter, the list of accepted values (`""`
/// among them means the parameter may be omitted). Values stay raw JSON so a checker can
/// apply BFCL's rules to exactly what the file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldCall {
    pub name: String,
    pub params: Map<String, Value>,
}

/// How a JSON value is named in error messages ("a list", "an object", ...).
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl GoldCall {
    /// Parse one gold call, `{function_name: {param: [accepted...]}}`; `at` names it in errors.
    pub fn parse(g: &Value, at: &str) -> Result<GoldCall, GoldError> {
        let err = |at: String, message: String| GoldError { at, message };
        let Value::Object(m) = g else {
            return Err(err(
                at.into(),
                format!(
                    "expected {{function_name: {{param: [accepted...]}}}}, got {}",
                    json_kind(g)
                ),
            ));
        };
        if m.len() != 1 {
            return Err(err(
                at.into(),
                format!("expected exactly one function name, got {} keys", m.len()),
            ));
        }
        let (name, params) = m.iter().next().expect("one key");
        let Value::Object(params) = params else {
            return Err(err(
                format!("{at}.{name}"),
                format!(
                    "expected an object of parameters, got {}",
                    json_kind(params)
                ),
            ));
        };
        for (p, accepted) in params {
            if !accepted.is_array() {
                return Err(err(
                    format!("{at}.{name}.{p}"),
                    format!(
                        "expected a list of accepted values, got {}",
                        json_kind(accepted)
                    ),
                ));
            }
        }
        Ok(GoldCall {
            name: name.clone(),
            params: params.clone(),
        })
    }

    /// Parse a whole `ground_truth` list.
    pub fn parse_list(ground_truth: &Value) -> Result<Vec<GoldCall>, GoldError> {
        let list = ground_truth.as_array().ok_or_else(|| GoldError {
            at: "ground_truth".into(),
            message: format!("expected a list, got {}", json_kind(ground_truth)),
        })?;
        list.iter()
            .enumerate()
            .map(|(i, g)| GoldCall::parse(g, &format!("ground_truth[{i}]")))
            .collect()
    }

    /// BFCL's own shape: `{name: {param: [accepted...]}}`.
    pub fn to_bfcl(&self) -> Value {
        let mut m = Map::new();
        m.insert(self.name.clone(), Value::Object(self.params.clone()));
        Value::Object(m)
    }

    /// The call BFCL lists first: for each parameter its first accepted value, left out when
    /// that value is `""` ("may be omitted"); nested dicts resolved the same way, key by key.
    pub fn first_accepted(&self) -> Result<Call, GoldError> {
        Ok(Call::new(
            self.name.clone(),
            first_accepted_map(&self.params, &self.name)?,
        ))
    }
}

fn first_accepted_map(
    params: &Map<String, Value>,
    at: &str,
) -> Result<Map<String, Value>, GoldError> {
    let mut out = Map::new();
    for (k, accepted) in params {
        let here = format!("{at}.{k}");
        let accepted = accepted.as_array().ok_or_else(|| GoldError {
            at: here.clone(),
            message: "expected a list of accepted values".into(),
        })?;
        let Some(first) = accepted.first() else {
            return Err(GoldError {
                at: here,
                message: "lists no accepted value".into(),
            });
        };
        if first == &json!("") {
            continue;
        }
        let value = match first {
            // A dict parameter: each key again lists accepted values.
            Value::Object(m) if !m.is_empty() && m.values().all(Value::is_array) => {
                Value::Object(first_accepted_map(m, &here)?)
            }
            other => other.clone(),
        };
        out.insert(k.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_of_every_bfcl_language_map_and_unknown_ones_are_named() {
        for (bfcl, json) in [
            ("dict", Some("object")),
            ("ArrayList", Some("array")),
            ("long", Some("integer")),
            ("double", Some("number")),
            ("char", Some("string")),
            ("null", Some("null")),
            ("any", None),
        ] {
            assert_eq!(json_schema_type(bfcl).unwrap(), json, "{bfcl}");
        }
        assert_eq!(
            json_schema_type("HashMap").unwrap_err().to_string(),
            "unknown BFCL type `HashMap`"
        );
    }

    #[test]
    fn gold_calls_parse_and_resolve_their_first_accepted_values() {
        let gt = json!([{"f": {"a": [1, 2], "b": ["", "x"], "c": [{"k": ["v", "w"]}]}}]);
        let gold = GoldCall::parse_list(&gt).unwrap();
        assert_eq!(gold[0].to_bfcl(), gt[0]);
        let call = gold[0].first_accepted().unwrap();
        assert_eq!(
            call,
            Call::new(
                "f",
                json!({"a": 1, "c": {"k": "v"}})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        );
        let bad = GoldCall::parse_list(&json!([{"f": {"a": 3}}])).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "ground_truth[0].f.a: expected a list of accepted values, got a number"
        );
        let empty = GoldCall::parse_list(&json!([{"f": {"a": []}}])).unwrap()[0]
            .first_accepted()
            .unwrap_err();
        assert_eq!(empty.to_string(), "f.a: lists no accepted value");
    }
}
