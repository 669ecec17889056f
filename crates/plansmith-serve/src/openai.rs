//! `POST /v1/chat/completions`: the OpenAI request read into a [`PlanRequest`], and the
//! planner's [`Outcome`] written back as a `chat.completion` or as `chat.completion.chunk`s.

use std::sync::Arc;

use plansmith_core::ToolChoice;
use plansmith_core::{Call, Catalog};
use plansmith_planner::{PlanRequest, Source};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::params::{self, field, kind, Object};

/// The assistant `content` when no call is made and the plan has no spoken text.
pub const NO_CALL_TEXT: &str = "No tool call.";

/// How many characters of `function.arguments` each streamed chunk carries.
pub const ARGUMENT_FRAGMENT_CHARS: usize = 16;

/// A chat request, read and checked.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub plan: PlanRequest,
    pub stream: bool,
    pub include_usage: bool,
    /// Tool results follow the last user message (an agent loop reporting back): that turn
    /// was planned already, so the server answers without a call instead of planning it again.
    pub turn_done: bool,
}

const ROLES: [&str; 6] = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// Read a chat request. `catalog` is the server's catalog (`--tools`, else the planner's own),
/// used when the request has no `tools`.
pub fn parse_chat(body: &Object, catalog: &Arc<Catalog>) -> Result<ChatRequest, ApiError> {
    // Parameters we cannot honour: refuse, never silently ignore.
    if let Some(n) = params::opt_uint(body, "n")? {
        if n != 1 {
            return Err(ApiError::unsupported(
                "n",
                format!("`n` = {n} is not supported: this server returns exactly one choice"),
            ));
        }
    }
    if params::opt_bool(body, "logprobs")? == Some(true) {
        return Err(ApiError::unsupported("logprobs", "`logprobs` is not supported: plans are decoded under a grammar, token log-probabilities are not returned"));
    }
    if params::opt_uint(body, "top_logprobs")?.unwrap_or(0) > 0 {
        return Err(ApiError::unsupported(
            "top_logprobs",
            "`top_logprobs` is not supported",
        ));
    }
    if let Some(rf) = field(body, "response_format") {
        let t = rf.get("type").and_then(Value::as_str);
        if t != Some("text") {
            return Err(ApiError::unsupported(
                "response_format",
                format!("`response_format` {} is not supported: only {{\"type\": \"text\"}}; tool calls come back in `message.tool_calls`", t.map(|t| format!("`{t}`")).unwrap_or_else(|| rf.to_string())),
            ));
        }
    }
    for legacy in ["functions", "function_call"] {
        if field(body, legacy).is_some() {
            return Err(ApiError::unsupported(legacy, format!("the legacy `{legacy}` parameter is not supported: send `tools` and `tool_choice`")));
        }
    }
    if let Some(lb) = field(body, "logit_bias") {
        if lb.as_object().is_none_or(|m| !m.is_empty()) {
            return Err(ApiError::unsupported(
                "logit_bias",
                "`logit_bias` is not supported: decoding is constrained by the tool grammar",
            ));
        }
    }
    if field(body, "audio").is_some() {
        return Err(ApiError::unsupported(
            "audio",
            "audio output is not supported",
        ));
    }
    if let Some(m) = field(body, "modalities") {
        let ok = m.as_array().is_some_and(|a| a.iter().all(|x| x == "text"));
        if !ok {
            return Err(ApiError::unsupported(
                "modalities",
                "only the `text` modality is supported",
            ));
        }
    }
    // Accepted and checked, but they do not change a plan (documented in the README).
    let model = params::opt_str(body, "model")?.map(str::to_string);
    // A reply token budget: the smaller of the two when both are given (and of the model's).
    let mut max_tokens: Option<usize> = None;
    for key in ["max_tokens", "max_completion_tokens"] {
        match params::opt_uint(body, key)? {
            Some(0) => {
                return Err(ApiError::invalid(
                    key,
                    format!("`{key}` must be at least 1"),
                ))
            }
            Some(m) => {
                let m = usize::try_from(m).unwrap_or(usize::MAX);
                max_tokens = Some(max_tokens.map_or(m, |b| b.min(m)));
            }
            None => {}
        }
    }
    params::opt_number(body, "temperature", 0.0, 2.0)?;
    params::opt_number(body, "top_p", 0.0, 1.0)?;
    params::opt_number(body, "presence_penalty", -2.0, 2.0)?;
    params::opt_number(body, "frequency_penalty", -2.0, 2.0)?;
    params::opt_int(body, "seed")?;
    if let Some(stop) = field(body, "stop") {
        let ok = stop.is_string()
            || stop
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string));
        if !ok {
            return Err(ApiError::invalid(
                "stop",
                format!(
                    "`stop` must be a string or an array of strings, not {}",
                    kind(stop)
                ),
            ));
        }
    }

    let stream = params::opt_bool(body, "stream")?.unwrap_or(false);
    let include_usage = match field(body, "stream_options") {
        None => false,
        Some(Value::Object(o)) => params::opt_bool(o, "include_usage")
            .map_err(|e| rebase(e, "stream_options"))?
            .unwrap_or(false),
        Some(v) => {
            return Err(ApiError::invalid(
                "stream_options",
                format!("`stream_options` must be an object, not {}", kind(v)),
            ))
        }
    };

    let (text, turn_done) = request_text(body)?;
    let request_catalog = field(body, "tools")
        .map(|t| params::parse_tools(t, "tools"))
        .transpose()?;
    let effective = request_catalog.as_ref().unwrap_or(catalog);
    let tool_choice = params::parse_tool_choice(field(body, "tool_choice"), effective, false)?;
    let max_calls = match params::opt_bool(body, "parallel_tool_calls")? {
        Some(false) => Some(1),
        _ => None,
    };
    let entities = match field(body, "plansmith") {
        None => Vec::new(),
        Some(Value::Object(ext)) => {
            if let Some(k) = ext.keys().find(|k| k.as_str() != "entities") {
                return Err(ApiError::invalid(
                    format!("plansmith.{k}"),
                    format!("unknown field `plansmith.{k}` (expected `entities`)"),
                ));
            }
            params::parse_entities(ext.get("entities"), "plansmith.entities")?
        }
        Some(v) => {
            return Err(ApiError::invalid(
                "plansmith",
                format!("`plansmith` must be an object, not {}", kind(v)),
            ))
        }
    };
    Ok(ChatRequest {
        model,
        plan: PlanRequest {
            text,
            catalog: Some(effective.clone()),
            tool_choice,
            max_calls,
            entities,
            max_tokens,
            deadline: None,
        },
        stream,
        include_usage,
        turn_done,
    })
}

fn rebase(mut e: ApiError, parent: &str) -> ApiError {
    if let Some(p) = &e.param {
        e.message = e
            .message
            .replace(&format!("`{p}`"), &format!("`{parent}.{p}`"));
        e.param = Some(format!("{parent}.{p}"));
    }
    e
}

/// The last user message's text, and whether tool results follow it.
fn request_text(body: &Object) -> Result<(String, bool), ApiError> {
    let messages = match body.get("messages") {
        None | Some(Value::Null) => {
            return Err(ApiError::invalid("messages", "`messages` is required"))
        }
        Some(Value::Array(a)) => a,
        Some(v) => {
            return Err(ApiError::invalid(
                "messages",
                format!("`messages` must be an array, not {}", kind(v)),
            ))
        }
    };
    if messages.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` is empty: send at least one user message",
        ));
    }
    let mut last_user = None;
    for (i, m) in messages.iter().enumerate() {
        let here = format!("messages[{i}]");
        let Some(obj) = m.as_object() else {
            return Err(ApiError::invalid(
                &here,
                format!("`{here}` must be an object, not {}", kind(m)),
            ));
        };
        match obj.get("role") {
            Some(Value::String(r)) if ROLES.contains(&r.as_str()) => {
                if r == "user" {
                    last_user = Some(i);
                }
            }
            Some(Value::String(r)) => {
                return Err(ApiError::invalid(
                    format!("{here}.role"),
                    format!("`{here}.role` `{r}` is not one of {}", ROLES.join(", ")),
                ))
            }
            _ => {
                return Err(ApiError::invalid(
                    format!("{here}.role"),
                    format!("`{here}.role` must be a string"),
                ))
            }
        }
    }
    let Some(i) = last_user else {
        return Err(ApiError::invalid(
            "messages",
            "`messages` has no user message: the last user message is the request",
        ));
    };
    let text = content_text(
        messages[i].get("content"),
        &format!("messages[{i}].content"),
    )?;
    let turn_done = messages[i + 1..].iter().any(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("tool" | "function")
        )
    });
    Ok((text, turn_done))
}

/// A string, or an array of `{"type": "text", "text": ...}` parts (joined by newlines).
fn content_text(content: Option<&Value>, here: &str) -> Result<String, ApiError> {
    let text = match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, p) in parts.iter().enumerate() {
                let at = format!("{here}[{j}]");
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => match p.get("text") {
                        Some(Value::String(s)) => texts.push(s.as_str()),
                        _ => {
                            return Err(ApiError::invalid(
                                format!("{at}.text"),
                                format!("`{at}.text` must be a string"),
                            ))
                        }
                    },
                    Some(t) => {
                        return Err(ApiError::unsupported(
                            format!("{at}.type"),
                            format!(
                            "content part type `{t}` at `{at}` is not supported: only text parts"
                        ),
                        ))
                    }
                    None => {
                        return Err(ApiError::invalid(
                            format!("{at}.type"),
                            format!("`{at}.type` must be a string"),
                        ))
                    }
                }
            }
            texts.join("\n")
        }
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                here,
                format!("`{here}` is missing: the user message needs text"),
            ))
        }
        Some(v) => {
            return Err(ApiError::invalid(
                here,
                format!(
                    "`{here}` must be a string or an array of text parts, not {}",
                    kind(v)
                ),
            ))
        }
    };
    if text.trim().is_empty() {
        return Err(ApiError::invalid(
            here,
            format!("`{here}` is empty: the user message needs text"),
        ));
    }
    Ok(text)
}

/// What a response says, whatever its transport.
#[derive(Debug, Clone)]
pub struct Reply {
    pub calls: Vec<Call>,
    /// The plan's spoken text (sent as `content`; with no call, `content` falls back to
    /// [`NO_CALL_TEXT`]).
    pub spoken_text: Option<String>,
    /// The `plansmith` extension object.
    pub ext: Value,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

impl Reply {
    pub fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    pub fn content(&self) -> Option<String> {
        let spoken = self.spoken_text.clone().filter(|s| !s.trim().is_empty());
        if self.calls.is_empty() {
            Some(spoken.unwrap_or_else(|| NO_CALL_TEXT.to_string()))
        } else {
            spoken
        }
    }

    fn usage(&self) -> Value {
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
               "total_tokens": self.prompt_tokens + self.completion_tokens})
    }
}

/// The `plansmith` extension: `{confidence, escalated, source, reason?}`.
pub fn extension(confidence: f32, escalated: bool, source: Source, reason: Option<&str>) -> Value {
    let mut ext = json!({
        "confidence": finite(confidence),
        "escalated": escalated,
        "source": source_name(source),
    });
    if let Some(r) = reason {
        ext["reason"] = Value::String(r.to_string());
    }
    ext
}

pub fn source_name(source: Source) -> &'static str {
    match source {
        Source::Model => "model",
        Source::Teacher => "teacher",
        Source::None => "none",
    }
}

/// A float as JSON (`null` when not finite, e.g. a dead end's `-inf`).
pub fn finite(x: f32) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// The id of the `index`-th call of a response: `call_<index>` (the same ids
/// `plansmith-core`'s OpenAI syntax renders).
pub fn call_id(index: usize) -> String {
    format!("call_{index}")
}

/// `function.arguments`: the JSON-encoded argument object.
pub fn arguments_string(call: &Call) -> String {
    Value::Object(call.arguments.clone()).to_string()
}

pub fn tool_calls(calls: &[Call]) -> Value {
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"id": call_id(i), "type": "function",
                       "function": {"name": c.name, "arguments": arguments_string(c)}})
            })
            .collect(),
    )
}

/// A whole `chat.completion`.
pub fn completion(id: &str, created: u64, model: &str, reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.content(), "refusal": null});
    if !reply.calls.is_empty() {
        message["tool_calls"] = tool_calls(&reply.calls);
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": reply.finish_reason()}],
        "usage": reply.usage(),
        "system_fingerprint": null,
        "plansmith": reply.ext,
    })
}

/// The same reply as `chat.completion.chunk`s: the role, then per call a header delta
/// (`index`, `id`, `type`, `function.name`, `arguments: ""`) and argument fragments, or the
/// content; then the finish reason (with the `plansmith` extension); then, when asked, usage.
pub fn chunks(
    id: &str,
    created: u64,
    model: &str,
    reply: &Reply,
    include_usage: bool,
) -> Vec<Value> {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let mut out = Vec::new();
    let content = reply.content();
    let first_content = if reply.calls.is_empty() {
        json!("")
    } else {
        Value::Null
    };
    out.push(chunk(
        json!({"role": "assistant", "content": first_content}),
        None,
    ));
    if let Some(text) = &content {
        out.push(chunk(json!({"content": text}), None));
    }
    for (i, call) in reply.calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": call_id(i), "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        for fragment in fragments(&arguments_string(call), ARGUMENT_FRAGMENT_CHARS) {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]}),
                None,
            ));
        }
    }
    let mut last = chunk(json!({}), Some(reply.finish_reason()));
    last["plansmith"] = reply.ext.clone();
    out.push(last);
    if include_usage {
        out.push(json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null, "choices": [], "usage": reply.usage(),
        }));
    }
    out
}

/// `text` cut into pieces of at most `n` characters (never inside a character).
pub fn fragments(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

/// An SSE body: each chunk as `data: {...}\n\n`, then `data: [DONE]\n\n`.
pub fn sse_body(chunks: &[Value]) -> String {
    let mut body = String::new();
    for c in chunks {
        body.push_str("data: ");
        body.push_str(&c.to_string());
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// Whether a plan with no call breaks the request's `tool_choice`.
pub fn call_was_required(choice: &ToolChoice) -> bool {
    matches!(choice, ToolChoice::Required | ToolChoice::Named(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn catalog() -> Arc<Catalog> {
        Arc::new(
            Catalog::from_value(&json!([{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
            .unwrap(),
        )
    }

    fn obj(v: Value) -> Object {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn last_user_message_and_parts() {
        let body = obj(json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "weather in"}, {"type": "text", "text": "Paris"}]},
        ], "cache_prompt": true, "tool_choice": "required", "parallel_tool_calls": false}));
        let r = parse_chat(&body, &catalog()).unwrap();
        assert_eq!(r.plan.text, "weather in\nParis");
        assert_eq!(r.plan.tool_choice, ToolChoice::Required);
        assert_eq!(r.plan.max_calls, Some(1));
        assert!(!r.turn_done && !r.stream);
    }

    #[test]
    fn tool_results_after_the_user_turn_end_it() {
        let body = obj(json!({"messages": [
            {"role": "user", "content": "weather in Paris"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
        ]}));
        assert!(parse_chat(&body, &catalog()).unwrap().turn_done);
    }

    #[test]
    fn refusals_name_the_parameter() {
        let cases = [
            (json!({"n": 2}), "n"),
            (json!({"logprobs": true}), "logprobs"),
            (
                json!({"response_format": {"type": "json_object"}}),
                "response_format",
            ),
            (json!({"functions": [{"name": "f"}]}), "functions"),
            (json!({"temperature": "hot"}), "temperature"),
            (json!({"temperature": 3}), "temperature"),
            (json!({"stream": "yes"}), "stream"),
            (
                json!({"stream_options": {"include_usage": 1}}),
                "stream_options.include_usage",
            ),
            (
                json!({"plansmith": {"entities": [{"type": "button"}]}}),
                "plansmith.entities[0].label",
            ),
            (json!({"plansmith": {"entitys": []}}), "plansmith.entitys"),
        ];
        for (extra, param) in cases {
            let mut body = obj(json!({"messages": [{"role": "user", "content": "hi"}]}));
            body.extend(obj(extra.clone()));
            let e = parse_chat(&body, &catalog()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{extra}: {e:?}");
            assert_eq!(e.status, 400);
        }
    }

    #[test]
    fn stream_reassembles_to_the_completion() {
        let mut args = Map::new();
        args.insert("city".into(), json!("Paris, \"the city of light\" ☀"));
        let reply = Reply {
            calls: vec![
                Call::new("get_weather", args.clone()),
                Call::new("get_weather", Map::new()),
            ],
            spoken_text: None,
            ext: extension(-0.5, false, Source::Model, None),
            prompt_tokens: 3,
            completion_tokens: 4,
        };
        let whole = completion("chatcmpl-1", 0, "m", &reply);
        let parts = chunks("chatcmpl-1", 0, "m", &reply, true);
        let mut rebuilt: Vec<(String, String)> = Vec::new();
        for c in &parts {
            for ch in c["choices"].as_array().unwrap() {
                for tc in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
                    let i = tc["index"].as_u64().unwrap() as usize;
                    if rebuilt.len() <= i {
                        rebuilt.push((
                            tc["function"]["name"].as_str().unwrap().to_string(),
                            String::new(),
                        ));
                    }
                    rebuilt[i]
                        .1
                        .push_str(tc["function"]["arguments"].as_str().unwrap());
                }
            }
        }
        let want: Vec<(String, String)> = whole["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["function"]["name"].as_str().unwrap().into(),
                    t["function"]["arguments"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(rebuilt, want);
        assert_eq!(parts.last().unwrap()["usage"]["total_tokens"], 7);
        assert_eq!(
            parts[parts.len() - 2]["choices"][0]["finish_reason"],
            "tool_calls"
        );
        assert!(sse_body(&parts).ends_with("data: [DONE]\n\n"));
    }
}
