//! v6 executor tags for old clients: `[CLICK:Save]`, `[TYPE:hello]`, `[KEY:cmd+s]`,
//! `[SCROLL:down:3]`, `[DRAG:a:b]`, `[OPEN_APP:Safari]`, `[OPEN_URL:github.com]`.
//!
//! Only `perform` and `open` calls have a tag form; anything else is an error naming the call.
//!
//! | call | tags |
//! |---|---|
//! | `perform(click / double_click / right_click / hover, target)` | `[CLICK:label]`, `[DOUBLE_CLICK:label]`, `[RIGHT_CLICK:label]`, `[HOVER:label]` |
//! | `perform(type, text, target?)` | `[CLICK:field][TYPE:text]` with a target, else `[TYPE:text]` |
//! | `perform(key, keys, amount?)` | `[KEY:keys]`, repeated `amount` times (at most 100) |
//! | `perform(scroll, direction?, amount?, target?)` | `[SCROLL:direction:amount]` (defaults `down`, `1`) |
//! | `perform(drag, target, destination)` | `[DRAG:label:label]` |
//! | `perform(multi_select, target, destination?)` | `[MULTI_SELECT:label:label]` or `[MULTI_SELECT:label]` |
//! | `open(target)` of type app / url / file | `[OPEN_APP:label]`, `[OPEN_URL:label]`, `[OPEN_FILE:label]` |
//!
//! A tag field cannot contain `]` or a newline; a field followed by another field cannot
//! contain `:` (the last field of `[OPEN_URL:https://x]` may).

use serde_json::Value;

use plansmith_core::{Call, Plan};

/// Why a call has no legacy tag form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("call {index} (`{tool}`): {reason}")]
pub struct LegacyTagError {
    pub index: usize,
    pub tool: String,
    pub reason: String,
}

/// Render a whole plan as concatenated tags (empty string for no call).
pub fn legacy_tags(plan: &Plan) -> Result<String, LegacyTagError> {
    let mut out = String::new();
    for (i, call) in plan.calls.iter().enumerate() {
        out.push_str(&legacy_tag(call).map_err(|mut e| {
            e.index = i;
            e
        })?);
    }
    Ok(out)
}

/// Render one call as its tag(s).
pub fn legacy_tag(call: &Call) -> Result<String, LegacyTagError> {
    let err = |reason: String| LegacyTagError {
        index: 0,
        tool: call.name.clone(),
        reason,
    };
    let str_arg = |k: &str| call.arguments.get(k).and_then(Value::as_str);
    let label = |k: &str| -> Result<&str, LegacyTagError> {
        call.arguments
            .get(k)
            .and_then(|t| t.get("label"))
            .and_then(Value::as_str)
            .ok_or_else(|| err(format!("needs `{k}.label`")))
    };
    let tag = |name: &str, fields: &[&str]| -> Result<String, LegacyTagError> {
        for (i, f) in fields.iter().enumerate() {
            let last = i + 1 == fields.len();
            if f.contains(']') || f.contains('\n') || (!last && f.contains(':')) {
                return Err(err(format!(
                    "value {f:?} cannot be carried in a {name} tag"
                )));
            }
        }
        Ok(format!("[{name}:{}]", fields.join(":")))
    };
    match call.name.as_str() {
        "perform" => {
            let action = str_arg("action").ok_or_else(|| err("needs `action`".into()))?;
            match action {
                "click" => tag("CLICK", &[label("target")?]),
                "double_click" => tag("DOUBLE_CLICK", &[label("target")?]),
                "right_click" => tag("RIGHT_CLICK", &[label("target")?]),
                "hover" => tag("HOVER", &[label("target")?]),
                "type" => {
                    let text =
                        str_arg("text").ok_or_else(|| err("action `type` needs `text`".into()))?;
                    let typed = tag("TYPE", &[text])?;
                    match call.arguments.contains_key("target") {
                        true => Ok(tag("CLICK", &[label("target")?])? + &typed),
                        false => Ok(typed),
                    }
                }
                "key" => {
                    let keys =
                        str_arg("keys").ok_or_else(|| err("action `key` needs `keys`".into()))?;
                    let n = call
                        .arguments
                        .get("amount")
                        .and_then(Value::as_u64)
                        .unwrap_or(1)
                        .clamp(1, 100);
                    Ok(tag("KEY", &[keys])?.repeat(n as usize))
                }
                "scroll" => {
                    let dir = str_arg("direction").unwrap_or("down");
                    let n = call
                        .arguments
                        .get("amount")
                        .and_then(Value::as_u64)
                        .unwrap_or(1)
                        .to_string();
                    tag("SCROLL", &[dir, &n])
                }
                "drag" => tag("DRAG", &[label("target")?, label("destination")?]),
                "multi_select" => match call.arguments.contains_key("destination") {
                    true => tag("MULTI_SELECT", &[label("target")?, label("destination")?]),
                    false => tag("MULTI_SELECT", &[label("target")?]),
                },
                other => Err(err(format!("action `{other}` has no legacy tag"))),
            }
        }
        "open" => {
            let ty = call
                .arguments
                .get("target")
                .and_then(|t| t.get("type"))
                .and_then(Value::as_str)
                .ok_or_else(|| err("needs `target.type`".into()))?;
            let name = match ty {
                "app" => "OPEN_APP",
                "url" => "OPEN_URL",
                "file" => "OPEN_FILE",
                other => {
                    return Err(err(format!(
                        "opening a `{other}` has no legacy tag (only app, url, file)"
                    )))
                }
            };
            tag(name, &[label("target")?])
        }
        other => Err(err(format!(
            "`{other}` has no legacy tag form (only `perform` and `open` calls do)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plansmith_core::Syntax;

    fn tags(dsl: &str) -> Result<String, LegacyTagError> {
        legacy_tags(&Syntax::Dsl.parse(dsl).unwrap())
    }

    #[test]
    fn v6_tags() {
        assert_eq!(
            tags("perform(action=click; target.type=ui_element; target.label=Save draft)").unwrap(),
            "[CLICK:Save draft]"
        );
        assert_eq!(
            tags("perform(action=double_click; target.type=file; target.label=a.pdf)").unwrap(),
            "[DOUBLE_CLICK:a.pdf]"
        );
        assert_eq!(
            tags("perform(action=right_click; target.type=app; target.label=Zoom)").unwrap(),
            "[RIGHT_CLICK:Zoom]"
        );
        assert_eq!(
            tags("perform(action=type; text=hello world)").unwrap(),
            "[TYPE:hello world]"
        );
        assert_eq!(
            tags("perform(action=type; target.type=ui_element; target.label=Search; text=hi)")
                .unwrap(),
            "[CLICK:Search][TYPE:hi]"
        );
        assert_eq!(
            tags("perform(action=key; keys=cmd+s)").unwrap(),
            "[KEY:cmd+s]"
        );
        let mut p = Syntax::Dsl
            .parse("perform(action=key; keys=tab; amount=3)")
            .unwrap();
        p = plansmith_core::validate::type_values(&p, &crate::pace_catalog());
        assert_eq!(legacy_tags(&p).unwrap(), "[KEY:tab][KEY:tab][KEY:tab]");
        let p = plansmith_core::validate::type_values(
            &Syntax::Dsl
                .parse("perform(action=scroll; direction=down; amount=3)")
                .unwrap(),
            &crate::pace_catalog(),
        );
        assert_eq!(legacy_tags(&p).unwrap(), "[SCROLL:down:3]");
        assert_eq!(
            tags("perform(action=drag; target.type=file; target.label=a.pdf; destination.type=file; destination.label=Work)").unwrap(),
            "[DRAG:a.pdf:Work]"
        );
        assert_eq!(
            tags("perform(action=hover; target.type=url; target.label=x.com)").unwrap(),
            "[HOVER:x.com]"
        );
        assert_eq!(
            tags("open(target.type=app; target.label=Safari)").unwrap(),
            "[OPEN_APP:Safari]"
        );
        assert_eq!(
            tags("open(target.type=url; target.label=https://x.com)").unwrap(),
            "[OPEN_URL:https://x.com]"
        );
        assert_eq!(
            tags("open(target.type=app; target.label=Safari) | perform(action=key; keys=cmd+t)")
                .unwrap(),
            "[OPEN_APP:Safari][KEY:cmd+t]"
        );
        assert_eq!(tags("done").unwrap(), "");
    }

    #[test]
    fn no_tag_form_is_a_clear_error() {
        let e = tags("open(target.type=app; target.label=Safari) | set(target=volume; value=50)")
            .unwrap_err();
        assert_eq!(e.index, 1);
        assert!(
            e.to_string().contains("`set` has no legacy tag form"),
            "{e}"
        );
        let e = tags("open(target.type=window; target.label=Inbox)").unwrap_err();
        assert!(e.to_string().contains("`window`"), "{e}");
        let e = tags("perform(action=drag; target.type=url; target.label=a:b; destination.type=app; destination.label=X)").unwrap_err();
        assert!(e.to_string().contains("cannot be carried"), "{e}");
        assert!(tags("perform(action=click)")
            .unwrap_err()
            .to_string()
            .contains("target.label"));
    }
}
