//! Validation: is this plan something the catalog's tools accept, under this policy?

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::Catalog;
use crate::plan::{Call, Plan};
use crate::policy::{is_copied, stated_numbers, Policy};
use crate::schema;

/// One reason a plan is invalid. `path` is a JSON pointer into the call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub call_index: usize,
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "call {} at {}: {}", self.call_index, path, self.message)
    }
}

/// Validators compiled once per catalog; reuse it across plans.
pub struct PlanValidator {
    catalog: Catalog,
    validators: HashMap<String, jsonschema::Validator>,
}

impl PlanValidator {
    pub fn new(catalog: &Catalog) -> Result<PlanValidator, crate::CatalogError> {
        let mut validators = HashMap::new();
        for (i, tool) in catalog.tools.iter().enumerate() {
            let v = jsonschema::validator_for(&tool.parameters).map_err(|e| {
                crate::CatalogError::Invalid {
                    path: format!("$[{i}].parameters"),
                    message: format!("schema does not compile: {e}"),
                }
            })?;
            validators.insert(tool.name.clone(), v);
        }
        Ok(PlanValidator {
            catalog: catalog.clone(),
            validators,
        })
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Every violation of `plan` (empty = valid). `request` is needed for copy-fidelity.
    pub fn validate(&self, plan: &Plan, policy: &Policy, request: Option<&str>) -> Vec<Violation> {
        let mut out = Vec::new();
        for (i, call) in plan.calls.iter().enumerate() {
            let (Some(tool), Some(validator)) = (
                self.catalog.get(&call.name),
                self.validators.get(&call.name),
            ) else {
                out.push(Violation {
                    call_index: i,
                    path: String::new(),
                    message: format!("unknown tool `{}`", call.name),
                });
                continue;
            };
            let instance = Value::Object(call.arguments.clone());
            for e in validator.iter_errors(&instance) {
                out.push(Violation {
                    call_index: i,
                    path: e.instance_path().to_string(),
                    message: e.to_string(),
                });
            }
            if let Some(request) = request {
                check_copies(
                    &call.name,
                    &tool.parameters,
                    &instance,
                    "",
                    policy,
                    request,
                    i,
                    &mut out,
                );
            }
        }
        out
    }

    /// Type a DSL plan's string values from the schema (`"3"` -> 3 for an integer).
    pub fn type_values(&self, plan: &Plan) -> Plan {
        type_values(plan, &self.catalog)
    }
}

/// One-shot validation (compiles the catalog's schemas; use [`PlanValidator`] on hot paths).
pub fn validate(
    plan: &Plan,
    catalog: &Catalog,
    policy: &Policy,
    request: Option<&str>,
) -> Result<Vec<Violation>, crate::CatalogError> {
    Ok(PlanValidator::new(catalog)?.validate(plan, policy, request))
}

#[allow(clippy::too_many_arguments)]
fn check_copies(
    tool: &str,
    schema: &Value,
    value: &Value,
    path: &str,
    policy: &Policy,
    request: &str,
    call_index: usize,
    out: &mut Vec<Violation>,
) {
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                if let Some(sub) = schema::child_schema(schema, k) {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    check_copies(tool, sub, v, &p, policy, request, call_index, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    check_copies(tool, sub, v, path, policy, request, call_index, out);
                }
            }
        }
        Value::String(_) | Value::Number(_) => {
            let s = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            // A number is copied when the request states its value: "3.50" is the copy of
            // 3.5 (which JSON and the DSL's typing both write as `3.5`), "1,000" of 1000,
            // "three" of 3 (the grammar offers them: `policy::number_literals`).
            let stated = value
                .as_f64()
                .is_some_and(|n| stated_numbers(request).contains(&n));
            if policy.requires_copy(tool, path, schema)
                && !stated
                && !is_copied(&s, request, policy.copy_unit)
            {
                out.push(Violation {
                    call_index,
                    path: format!("/{}", path.replace('.', "/")),
                    message: format!("value {:?} is not copied from the request", s),
                });
            }
        }
        _ => {}
    }
}

/// Arguments in schema property order (nested objects too): the order a grammar emits keys
/// in, so training targets match what constrained decoding can produce.
pub fn schema_order(plan: &Plan, catalog: &Catalog) -> Plan {
    fn order(schema: &Value, value: &Value) -> Value {
        match value {
            Value::Object(m) => {
                let mut out = Map::new();
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, sub) in props {
                        if let Some(v) = m.get(k) {
                            out.insert(k.clone(), order(sub, v));
                        }
                    }
                }
                for (k, v) in m {
                    if !out.contains_key(k) {
                        out.insert(k.clone(), v.clone());
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => match schema.get("items") {
                Some(sub) => Value::Array(items.iter().map(|v| order(sub, v)).collect()),
                None => value.clone(),
            },
            other => other.clone(),
        }
    }
    let calls = plan
        .calls
        .iter()
        .map(|call| match catalog.get(&call.name) {
            Some(tool) => {
                let ordered = order(&tool.parameters, &Value::Object(call.arguments.clone()));
                Call::new(
                    call.name.clone(),
                    ordered.as_object().cloned().unwrap_or_default(),
                )
            }
            None => call.clone(),
        })
        .collect();
    Plan {
        calls,
        spoken_text: plan.spoken_text.clone(),
    }
}

/// Type untyped (DSL) values from each tool's schema. Values that do not fit stay strings,
/// so validation reports them instead of guessing.
pub fn type_values(plan: &Plan, catalog: &Catalog) -> Plan {
    let calls = plan
        .calls
        .iter()
        .map(|call| match catalog.get(&call.name) {
            Some(tool) => {
                let typed = type_value(&tool.parameters, &Value::Object(call.arguments.clone()));
                Call::new(
                    call.name.clone(),
                    typed.as_object().cloned().unwrap_or_default(),
                )
            }
            None => call.clone(),
        })
        .collect();
    Plan {
        calls,
        spoken_text: plan.spoken_text.clone(),
    }
}

fn type_value(schema: &Value, value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let typed = match schema::child_schema(schema, k) {
                    Some(sub) => type_value(sub, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), typed);
            }
            Value::Object(out)
        }
        Value::Array(items) => match schema.get("items") {
            Some(sub) => Value::Array(items.iter().map(|v| type_value(sub, v)).collect()),
            None => value.clone(),
        },
        Value::String(s) => type_string(schema, s),
        other => other.clone(),
    }
}

/// How one untyped DSL value is typed from its schema (`"3"` -> 3 for an integer). A value
/// that fits no type stays a string, so validation reports it instead of guessing.
pub fn type_string(schema: &Value, s: &str) -> Value {
    typed_string(schema, s).unwrap_or_else(|| Value::String(s.to_string()))
}

fn typed_string(schema: &Value, s: &str) -> Option<Value> {
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        return branches.iter().find_map(|b| typed_string(b, s));
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if types.contains(&"string") {
        return Some(Value::String(s.to_string()));
    }
    for t in types {
        let typed = match t {
            "integer" => s.parse::<i64>().ok().map(Value::from),
            "number" => s.parse::<i64>().ok().map(Value::from).or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            }),
            "boolean" => match s {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" if s == "null" => Some(Value::Null),
            _ => None,
        };
        if typed.is_some() {
            return typed;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::Syntax;

    fn orders() -> Catalog {
        Catalog::from_json_str(
            r#"[{"type":"function","function":{"name":"lookup_order","description":"Find an order",
              "parameters":{"type":"object","properties":{"order_id":{"type":"integer"}},"required":["order_id"],"additionalProperties":false}}},
              {"type":"function","function":{"name":"notify","parameters":{"type":"object",
              "properties":{"user":{"type":"string"},"channel":{"type":"string","enum":["email","sms"]}},"required":["user"],"additionalProperties":false}}}]"#,
        )
        .unwrap()
    }

    #[test]
    fn copy_drift_is_rejected() {
        let v = PlanValidator::new(&orders()).unwrap();
        let request = "where is order 4242 for ana";
        let policy = Policy::copy_free_strings();
        let good = v.type_values(
            &Syntax::Dsl
                .parse("lookup_order(order_id=4242) | notify(user=ana)\n")
                .unwrap(),
        );
        assert_eq!(v.validate(&good, &policy, Some(request)), vec![]);
        let drift = v.type_values(&Syntax::Dsl.parse("notify(user=anna)\n").unwrap());
        let errs = v.validate(&drift, &policy, Some(request));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].path, "/user");
        // Typed ids are free values too: 4202 is not in a request about 4242.
        let drift = v.type_values(&Syntax::Dsl.parse("lookup_order(order_id=4202)\n").unwrap());
        let errs = v.validate(&drift, &policy, Some(request));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].message.contains("\"4202\" is not copied"),
            "{errs:?}"
        );
        // Only the listed parameters, under an `Only` rule.
        let only_user = Policy {
            copy: crate::CopyRule::Only(vec![crate::ParamRef {
                tool: "notify".into(),
                path: "user".into(),
            }]),
            copy_unit: crate::CopyUnit::Words,
        };
        assert_eq!(v.validate(&drift, &only_user, Some(request)), vec![]);
    }

    #[test]
    fn a_number_is_copied_when_the_request_states_its_value() {
        let cat = Catalog::from_json_str(
            r#"[{"type":"function","function":{"name":"log_expense","parameters":{"type":"object",
              "properties":{"amount":{"type":"number"},"note":{"type":"string"}},"required":["amount"]}}}]"#,
        )
        .unwrap();
        let v = PlanValidator::new(&cat).unwrap();
        let policy = Policy::copy_free_strings();
        let check = |plan: &str, request: &str| {
            let plan = if plan.starts_with('[') {
                Syntax::JsonArray.parse(plan).unwrap()
            } else {
                v.type_values(&Syntax::Dsl.parse(plan).unwrap())
            };
            v.validate(&plan, &policy, Some(request))
        };
        // The grammar copies "3.50"; JSON and the DSL's typing both make it 3.5.
        let json = r#"[{"name":"log_expense","arguments":{"amount":3.50}}]"#;
        assert_eq!(check(json, "put down 3.50 for coffee"), vec![]);
        assert_eq!(
            check("log_expense(amount=3.50)\n", "put down 3.50 for coffee"),
            vec![]
        );
        let thousand = r#"[{"name":"log_expense","arguments":{"amount":1000}}]"#;
        assert_eq!(check(thousand, "I paid 1,000 for rent"), vec![]);
        assert_eq!(check(thousand, "I paid one thousand for rent"), vec![]);
        assert_eq!(
            check("log_expense(amount=72)\n", "seventy two for the hotel"),
            vec![]
        );
        // A value the request does not state is still refused, however close.
        let errs = check(
            r#"[{"name":"log_expense","arguments":{"amount":3.5}}]"#,
            "put down 35 or 0.35",
        );
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].message.contains("\"3.5\" is not copied"),
            "{errs:?}"
        );
        // Strings stay textual copies: "3.5" is not a span of "3.50".
        let note = r#"[{"name":"log_expense","arguments":{"amount":3.50,"note":"3.5"}}]"#;
        assert_eq!(check(note, "put down 3.50").len(), 1);
    }

    #[test]
    fn schema_violations_are_listed() {
        let v = PlanValidator::new(&orders()).unwrap();
        let p = v.type_values(
            &Syntax::Dsl
                .parse("lookup_order(order_id=abc; extra=1) | nope(a=b) | notify(channel=fax)\n")
                .unwrap(),
        );
        let errs = v.validate(&p, &Policy::default(), None);
        let at = |i: usize| errs.iter().filter(|e| e.call_index == i).count();
        assert!(at(0) >= 2, "{errs:?}");
        assert_eq!(
            errs.iter().find(|e| e.call_index == 1).unwrap().message,
            "unknown tool `nope`"
        );
        assert!(at(2) >= 2, "missing user and bad enum: {errs:?}");
    }
}
