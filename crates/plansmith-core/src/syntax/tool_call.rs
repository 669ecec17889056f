//! The `<tool_call>` tag format that Qwen2.5 / Qwen3 (and Hermes-style) chat templates teach
//! their models: each call a JSON object `{"name", "arguments"}` between `<tool_call>\n` and
//! `\n</tool_call>`, calls separated by a newline. No call renders as an empty reply; a reply
//! of text without a tag (an engine's or a teacher's) parses as a plan with no call whose
//! `spoken_text` is that text.

use serde_json::{json, Value};

use super::{openai, ParseError};
use crate::plan::Plan;

pub const OPEN: &str = "<tool_call>\n";
pub const CLOSE: &str = "\n</tool_call>";

pub fn render(plan: &Plan) -> String {
    render_with(plan, |v| v.to_string())
}

/// [`render`] with each call's JSON written by `json`.
pub fn render_with(plan: &Plan, json: impl Fn(&Value) -> String) -> String {
    plan.calls
        .iter()
        .map(|c| {
            let call = json!({"name": c.name, "arguments": Value::Object(c.arguments.clone())});
            format!("{OPEN}{}{CLOSE}", json(&call))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn parse(text: &str) -> Result<Plan, ParseError> {
    let trimmed = text.trim();
    if !trimmed.contains("<tool_call>") {
        return Ok(Plan {
            calls: Vec::new(),
            spoken_text: (!trimmed.is_empty()).then(|| trimmed.to_string()),
        });
    }
    let mut plan = Plan::default();
    let mut rest = text;
    let mut offset = 0;
    loop {
        let lead = rest.len() - rest.trim_start().len();
        rest = &rest[lead..];
        offset += lead;
        if rest.is_empty() {
            break;
        }
        let Some(body) = rest.strip_prefix("<tool_call>") else {
            return Err(ParseError::new(
                offset,
                "expected <tool_call> (text and calls do not mix)",
            ));
        };
        let end = body
            .find("</tool_call>")
            .ok_or_else(|| ParseError::new(offset, "<tool_call> without a closing </tool_call>"))?;
        let inner = &body[..end];
        let i = plan.calls.len();
        let one = openai::parse_array(inner.trim()).map_err(|e| {
            ParseError::new(
                offset + "<tool_call>".len() + e.offset.min(inner.len()),
                format!("call {i}: {}", e.message),
            )
        })?;
        if one.calls.len() != 1 {
            return Err(ParseError::new(
                offset,
                format!("call {i}: a <tool_call> holds one JSON object"),
            ));
        }
        plan.calls.extend(one.calls);
        let used = "<tool_call>".len() + end + "</tool_call>".len();
        rest = &rest[used..];
        offset += used;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Call;
    use serde_json::Map;

    #[test]
    fn renders_and_parses_back() {
        let mut args = Map::new();
        args.insert("app".into(), json!("Safari"));
        let plan = Plan::new(vec![
            Call::new("open_app", args.clone()),
            Call::new("wait", Map::new()),
        ]);
        let text = render(&plan);
        assert_eq!(
            text,
            "<tool_call>\n{\"name\":\"open_app\",\"arguments\":{\"app\":\"Safari\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"wait\",\"arguments\":{}}\n</tool_call>"
        );
        assert_eq!(parse(&text).unwrap(), plan);
        // Qwen's own spacing, which `render_spaced` writes.
        let qwen = "<tool_call>\n{\"name\": \"open_app\", \"arguments\": {\"app\": \"Safari\"}}\n</tool_call>";
        let one = Plan::new(vec![Call::new("open_app", args.clone())]);
        assert_eq!(crate::Syntax::ToolCall.render_spaced(&one), qwen);
        assert_eq!(
            parse(qwen).unwrap().calls,
            vec![Call::new("open_app", args)]
        );
    }

    #[test]
    fn text_is_a_plan_without_calls() {
        let p = parse("I can't do that.").unwrap();
        assert!(p.calls.is_empty());
        assert_eq!(p.spoken_text.as_deref(), Some("I can't do that."));
        assert_eq!(render(&p), "");
        assert_eq!(parse("").unwrap(), Plan::default());
    }

    #[test]
    fn broken_replies_are_errors_with_offsets() {
        let e = parse("<tool_call>\n{\"name\": \"x\"").unwrap_err();
        assert!(e.message.contains("closing"), "{e}");
        let e = parse("<tool_call>\n{\"name\": 3}\n</tool_call>").unwrap_err();
        assert!(e.message.contains("call 0"), "{e}");
        let e = parse("<tool_call>\n{\"name\": \"x\"}\n</tool_call> and then text").unwrap_err();
        assert!(e.offset > 20, "{e}");
        let e =
            parse("<tool_call>\n[{\"name\": \"a\"}, {\"name\": \"b\"}]\n</tool_call>").unwrap_err();
        assert!(e.message.contains("one JSON object"), "{e}");
    }
}
