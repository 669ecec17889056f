//! The plan constraint as a JSON Schema, for inference engines that enforce JSON Schema but
//! not llguidance grammars (llama.cpp's server, OpenAI-style `response_format`).
//!
//! The schema describes the JSON-array reply (`[{"name": ..., "arguments": {...}}]`): one
//! `anyOf` branch per callable tool, its name a `const`, its arguments the tool's own schema
//! closed against unknown keys (the grammar makes them impossible too). `tool_choice` and
//! `max_calls` become the array's bounds and branches.
//!
//! It is weaker than the Lark grammar in two ways, both enforced after the reply by
//! validation (and escalation) instead: values copied from the request (copy spans) and
//! visible-entity labels are per-request and have no JSON Schema form, and an engine may
//! ignore schema keywords its converter does not know (llama.cpp drops some `format`s).

use plansmith_core::request::ToolChoice;
use plansmith_core::{Catalog, Syntax};
use serde_json::{json, Map, Value};

use crate::error::GrammarError;
use crate::gen::Options;

/// The JSON Schema of a plan against `catalog` under `options` (JSON-array syntax only).
pub fn plan_schema(catalog: &Catalog, options: &Options) -> Result<Value, GrammarError> {
    if options.syntax != Syntax::JsonArray {
        return Err(GrammarError::Invalid(format!(
            "a JSON Schema constraint exists for the `json` syntax only, not `{}`",
            options.syntax.as_str()
        )));
    }
    let tools: Vec<&plansmith_core::Tool> = match &options.tool_choice {
        ToolChoice::Named(name) => vec![catalog
            .get(name)
            .ok_or_else(|| GrammarError::UnknownTool(name.clone()))?],
        _ => catalog.tools.iter().collect(),
    };
    let (min_items, max_items) = match options.tool_choice {
        ToolChoice::None => (0, 0),
        ToolChoice::Auto => (0, options.max_calls),
        ToolChoice::Required | ToolChoice::Named(_) => (1, options.max_calls),
    };
    if min_items > max_items {
        return Err(GrammarError::Invalid(format!(
            "tool_choice needs a call but max_calls is {max_items}"
        )));
    }
    let branches: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": closed(&t.parameters),
                },
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let mut schema = json!({
        "type": "array",
        "minItems": min_items,
        "maxItems": max_items,
    });
    if max_items > 0 {
        schema["items"] = json!({"anyOf": branches});
    }
    Ok(schema)
}

/// `schema` with every object schema that does not say otherwise closed against unknown keys
/// (`additionalProperties: false`), recursively through the keywords that nest schemas.
fn closed(schema: &Value) -> Value {
    let Some(obj) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::with_capacity(obj.len() + 1);
    for (key, value) in obj {
        let value = match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" => match value {
                Value::Object(m) => {
                    Value::Object(m.iter().map(|(k, v)| (k.clone(), closed(v))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalItems" | "not" | "if" | "then" | "else" => closed(value),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                Value::Array(a) => Value::Array(a.iter().map(closed).collect()),
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    let is_object =
        obj.get("type").and_then(Value::as_str) == Some("object") || obj.contains_key("properties");
    if is_object && !obj.contains_key("additionalProperties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plansmith_core::{Call, Plan};

    fn catalog() -> Catalog {
        Catalog::from_json_str(
            r#"[{"name":"open","parameters":{"type":"object","properties":{
                    "target":{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]},
                    "mode":{"enum":["tab","window"]}},"required":["target"]}},
                {"name":"wait","parameters":{"type":"object","properties":{"seconds":{"type":"integer","minimum":1}},"required":["seconds"]}}]"#,
        )
        .unwrap()
    }

    fn accepts(schema: &Value, text: &str) -> bool {
        let v = jsonschema::validator_for(schema).unwrap();
        v.is_valid(&serde_json::from_str(text).unwrap())
    }

    fn rendered(calls: Vec<(&str, Value)>) -> String {
        let plan = Plan {
            calls: calls
                .into_iter()
                .map(|(name, args)| Call::new(name, args.as_object().unwrap().clone()))
                .collect(),
            spoken_text: None,
        };
        Syntax::JsonArray.render(&plan)
    }

    #[test]
    fn the_schema_accepts_valid_plans_and_refuses_what_the_grammar_refuses() {
        let options = Options {
            max_calls: 2,
            ..Options::new(Syntax::JsonArray)
        };
        let s = plan_schema(&catalog(), &options).unwrap();
        // What the JSON-array syntax renders for valid plans passes.
        assert!(accepts(&s, &rendered(vec![])));
        assert!(accepts(
            &s,
            &rendered(vec![("open", json!({"target": {"label": "Safari"}}))])
        ));
        assert!(accepts(
            &s,
            &rendered(vec![
                ("open", json!({"target": {"label": "a"}, "mode": "tab"})),
                ("wait", json!({"seconds": 3})),
            ])
        ));
        for bad in [
            r#"[{"name":"close","arguments":{}}]"#, // unknown tool
            r#"[{"name":"open","arguments":{}}]"#,  // missing required key
            r#"[{"name":"open","arguments":{"target":{"label":"a"},"extra":1}}]"#, // unknown key
            r#"[{"name":"open","arguments":{"target":{"label":"a","x":1}}}]"#, // nested unknown key
            r#"[{"name":"open","arguments":{"target":{"label":"a"},"mode":"pane"}}]"#, // enum
            r#"[{"name":"wait","arguments":{"seconds":0}}]"#, // minimum
            r#"[{"name":"wait","arguments":{"seconds":"3"}}]"#, // type
            r#"[{"name":"wait","arguments":{"seconds":1}},{"name":"wait","arguments":{"seconds":1}},{"name":"wait","arguments":{"seconds":1}}]"#, // max_calls
            r#"[{"name":"wait","arguments":{"seconds":1},"spoken":"x"}]"#, // unknown call key
        ] {
            assert!(!accepts(&s, bad), "accepted {bad}");
        }
    }

    #[test]
    fn tool_choice_bounds_the_array_and_its_branches() {
        let cat = catalog();
        let with = |tc| Options {
            tool_choice: tc,
            ..Options::new(Syntax::JsonArray)
        };
        let none = plan_schema(&cat, &with(ToolChoice::None)).unwrap();
        assert!(accepts(&none, "[]"));
        assert!(!accepts(
            &none,
            r#"[{"name":"wait","arguments":{"seconds":1}}]"#
        ));
        let required = plan_schema(&cat, &with(ToolChoice::Required)).unwrap();
        assert!(!accepts(&required, "[]"));
        let named = plan_schema(&cat, &with(ToolChoice::Named("wait".into()))).unwrap();
        assert!(accepts(
            &named,
            r#"[{"name":"wait","arguments":{"seconds":1}}]"#
        ));
        assert!(!accepts(
            &named,
            r#"[{"name":"open","arguments":{"target":{"label":"a"}}}]"#
        ));
        assert_eq!(
            plan_schema(&cat, &with(ToolChoice::Named("nope".into()))),
            Err(GrammarError::UnknownTool("nope".into()))
        );
        assert!(matches!(
            plan_schema(&cat, &Options::new(Syntax::Dsl)),
            Err(GrammarError::Invalid(_))
        ));
    }

    #[test]
    fn a_schema_that_allows_unknown_keys_itself_keeps_them() {
        let open = Catalog::from_json_str(
            r#"[{"name":"tag","parameters":{"type":"object","properties":{"k":{"type":"string"}},"additionalProperties":{"type":"string"}}}]"#,
        )
        .unwrap();
        let s = plan_schema(&open, &Options::new(Syntax::JsonArray)).unwrap();
        assert!(accepts(
            &s,
            r#"[{"name":"tag","arguments":{"k":"a","other":"b"}}]"#
        ));
    }
}
