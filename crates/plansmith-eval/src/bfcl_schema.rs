//! BFCL function-doc parameter schemas -> standard JSON Schema.
//!
//! BFCL writes parameter schemas with Python-flavoured type names. This module maps them onto
//! JSON Schema so the same docs can feed validators, grammars and catalogs:
//!
//! | BFCL      | JSON Schema                      |
//! |-----------|----------------------------------|
//! | `dict`    | `object`                         |
//! | `float`   | `number`                         |
//! | `tuple`   | `array`                          |
//! | `any`     | no `type` (accepts anything)     |
//! | `list`, `ArrayList` | `array` |
//! | `int`, `long`; `str`, `char`; `bool`; `double` | `integer`; `string`; `boolean`; `number` |
//! | `integer`, `string`, `boolean`, `array`, and the JSON Schema names `object`, `number`, `null` | unchanged |
//!
//! Everything else in the schema (`description`, `enum`, `default`, `required`, …) is kept as
//! is; `properties`, `items`, `additionalProperties` and `anyOf`/`oneOf`/`allOf` branches are
//! converted recursively. An unknown type name is an error naming its JSON path.

use serde_json::{Map, Value};

use crate::error::EvalError;

/// The one BFCL type map of the workspace (plansmith-core owns it; catalogs import BFCL docs
/// with it too).
pub use plansmith_core::bfcl::json_schema_type;

/// Converts a BFCL parameter schema (e.g. a function doc's `parameters`) to JSON Schema.
pub fn to_json_schema(schema: &Value) -> Result<Value, EvalError> {
    convert(schema, "$")
}

/// Converts a whole BFCL function doc's `parameters` to JSON Schema; the path in errors names
/// the function.
pub fn function_parameters_schema(doc: &Value) -> Result<Value, EvalError> {
    let name = doc.get("name").and_then(Value::as_str).unwrap_or("?");
    match doc.get("parameters") {
        Some(p) => convert(p, &format!("{name}.parameters")),
        None => Ok(serde_json::json!({"type": "object", "properties": {}})),
    }
}

fn convert(schema: &Value, path: &str) -> Result<Value, EvalError> {
    let Value::Object(m) = schema else {
        return Err(EvalError::Schema {
            path: path.to_string(),
            message: format!("expected a schema object, got {schema}"),
        });
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "type" => match v {
                Value::String(t) => {
                    let mapped = json_schema_type(t).map_err(|e| EvalError::Schema {
                        path: format!("{path}.type"),
                        message: e.to_string(),
                    })?;
                    if let Some(t) = mapped {
                        out.insert(k.clone(), Value::String(t.into()));
                    }
                }
                Value::Array(ts) => {
                    let mut mapped = Vec::new();
                    for (i, t) in ts.iter().enumerate() {
                        let Some(t) = t.as_str() else {
                            return Err(EvalError::Schema {
                                path: format!("{path}.type[{i}]"),
                                message: format!("expected a type name, got {t}"),
                            });
                        };
                        match json_schema_type(t).map_err(|e| EvalError::Schema {
                            path: format!("{path}.type[{i}]"),
                            message: e.to_string(),
                        })? {
                            Some(t) => mapped.push(Value::String(t.into())),
                            // `any` in a union makes the whole union unconstrained.
                            None => {
                                mapped.clear();
                                break;
                            }
                        }
                    }
                    if !mapped.is_empty() {
                        out.insert(k.clone(), Value::Array(mapped));
                    }
                }
                other => {
                    return Err(EvalError::Schema {
                        path: format!("{path}.type"),
                        message: format!("expected a type name, got {other}"),
                    })
                }
            },
            "properties" => {
                let Value::Object(props) = v else {
                    return Err(EvalError::Schema {
                        path: format!("{path}.properties"),
                        message: "expected an object".into(),
                    });
                };
                let mut conv = Map::new();
                for (p, s) in props {
                    conv.insert(p.clone(), convert(s, &format!("{path}.properties.{p}"))?);
                }
                out.insert(k.clone(), Value::Object(conv));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), convert(v, &format!("{path}.{k}"))?);
            }
            "items" if v.is_array() => {
                // Tuple-style items: one schema per position.
                let arr = v.as_array().expect("checked");
                let conv = arr
                    .iter()
                    .enumerate()
                    .map(|(i, s)| convert(s, &format!("{path}.items[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("prefixItems".into(), Value::Array(conv));
            }
            "anyOf" | "oneOf" | "allOf" if v.is_array() => {
                let arr = v.as_array().expect("checked");
                let conv = arr
                    .iter()
                    .enumerate()
                    .map(|(i, s)| convert(s, &format!("{path}.{k}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(k.clone(), Value::Array(conv));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_bfcl_types() {
        let bfcl = json!({"type": "dict", "properties": {
            "x": {"type": "float", "description": "d"},
            "t": {"type": "tuple", "items": {"type": "integer"}},
            "a": {"type": "any"},
            "o": {"type": "dict", "properties": {"k": {"type": "boolean"}}, "required": ["k"]},
            "l": {"type": "array", "items": {"type": "dict", "properties": {"v": {"type": "string", "enum": ["a"]}}}}
        }, "required": ["x"]});
        let js = to_json_schema(&bfcl).unwrap();
        assert_eq!(
            js,
            json!({"type": "object", "properties": {
                "x": {"type": "number", "description": "d"},
                "t": {"type": "array", "items": {"type": "integer"}},
                "a": {},
                "o": {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]},
                "l": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "string", "enum": ["a"]}}}}
            }, "required": ["x"]})
        );
    }

    #[test]
    fn unknown_type_names_path() {
        let err =
            to_json_schema(&json!({"type": "dict", "properties": {"h": {"type": "HashMap"}}}))
                .unwrap_err()
                .to_string();
        assert!(err.contains("$.properties.h.type"), "{err}");
        assert!(err.contains("HashMap"), "{err}");
    }
}
