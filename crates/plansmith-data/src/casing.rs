//! ALL-CAPS variants of traces for training.
//!
//! Speech-to-text and users with caps lock produce shouted requests, but they are rare in any
//! natural mix (4% of Pace). A small model sees too few to learn that `DRAG THE FILE A.PDF` is
//! `drag the file a.pdf` with capitals: in the Pace test split it got 25 of 32 shouted requests
//! wrong against 6% of the rest. Upper-casing a trace is exact when every free string is copied
//! from the request: the request and its copied values go to upper case, enum values and
//! numbers stay as they are, and the result is re-validated before it is used.

use plansmith_core::{Catalog, Plan, PlanValidator, Policy, Trace};
use serde_json::Value;

use crate::pace::round_trips;

/// The trace with its request and every free (non-enum) string argument upper-cased, if the
/// result still validates with copy-fidelity against `catalog`; `None` when it would not (a
/// value that is not a copy, an unknown tool) or when the request has no lower-case letter.
pub fn shouted(
    trace: &Trace,
    catalog: &Catalog,
    validator: &PlanValidator,
    policy: &Policy,
) -> Option<Trace> {
    let request = trace.request.to_uppercase();
    if request == trace.request {
        return None;
    }
    let mut calls = trace.calls.clone();
    for call in &mut calls {
        let tool = catalog.get(&call.name)?;
        let props = tool.parameters.get("properties");
        for (k, v) in call.arguments.iter_mut() {
            if let Some(sub) = props.and_then(|p| p.get(k)) {
                upper_free_strings(v, sub);
            }
        }
    }
    let plan = Plan {
        calls: calls.clone(),
        spoken_text: None,
    };
    round_trips(validator, policy, &plan, &request).then(|| Trace {
        request,
        calls,
        ..trace.clone()
    })
}

/// Upper-case the strings of `value` whose schema is not an enum or a const.
fn upper_free_strings(value: &mut Value, schema: &Value) {
    match value {
        Value::String(s) if schema.get("enum").is_none() && schema.get("const").is_none() => {
            *s = s.to_uppercase();
        }
        Value::Object(map) => {
            let props = schema.get("properties");
            for (k, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(k)) {
                    upper_free_strings(v, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    upper_free_strings(v, sub);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pace::pace_catalog;
    use plansmith_core::Call;
    use serde_json::json;

    fn trace(request: &str, name: &str, args: Value) -> Trace {
        Trace {
            request: request.into(),
            calls: vec![Call {
                name: name.into(),
                arguments: args.as_object().cloned().unwrap_or_default(),
            }],
            tools: None,
            source: Default::default(),
            spoken_text: None,
        }
    }

    #[test]
    fn copies_are_shouted_and_enums_kept() {
        let cat = pace_catalog();
        let v = PlanValidator::new(&cat).unwrap();
        let p = Policy::copy_free_strings();
        let t = trace(
            "please scroll up 3 times in the Notes app",
            "perform",
            json!({"action": "scroll", "direction": "up", "amount": 3,
                   "target": {"type": "app", "label": "Notes"}}),
        );
        let s = shouted(&t, &cat, &v, &p).expect("a copy-faithful trace can be shouted");
        assert_eq!(s.request, "PLEASE SCROLL UP 3 TIMES IN THE NOTES APP");
        assert_eq!(
            Value::Object(s.calls[0].arguments.clone()),
            json!({"action": "scroll", "direction": "up", "amount": 3,
                   "target": {"type": "app", "label": "NOTES"}})
        );
    }

    #[test]
    fn traces_that_would_not_validate_are_refused() {
        let cat = pace_catalog();
        let v = PlanValidator::new(&cat).unwrap();
        let p = Policy::copy_free_strings();
        // already shouted
        let t = trace(
            "OPEN NOTES",
            "open",
            json!({"target": {"type": "app", "label": "NOTES"}}),
        );
        assert!(shouted(&t, &cat, &v, &p).is_none());
        // unknown tool
        let t = trace("fly away", "fly", json!({}));
        assert!(shouted(&t, &cat, &v, &p).is_none());
        // a value that is not a copy of the request
        let t = trace(
            "open notes",
            "open",
            json!({"target": {"type": "app", "label": "Memo"}}),
        );
        assert!(shouted(&t, &cat, &v, &p).is_none());
    }
}
