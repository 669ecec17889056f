//! A planner whose model runs on an inference engine the user already operates (a vLLM or
//! SGLang fleet, a llama.cpp server), reached through its OpenAI-compatible
//! `/v1/chat/completions`. plansmith grows no engine of its own: it sends the same prompt a
//! local pretrained planner reads (the tools in the system message, the request as the user
//! turn) with the catalog's constraint in the form that engine enforces, then parses,
//! validates and gates the reply exactly like a local model's, with the engine's logprobs as
//! the confidence.
//!
//! Constraint forms, by dialect (`--backend DIALECT:URL#MODEL`):
//! - `vllm`: the llguidance Lark grammar itself, as `structured_outputs.grammar` (vLLM's
//!   `guidance` structured-outputs backend);
//! - `sglang`: the same grammar as `ebnf` (SGLang with `--grammar-backend llguidance`; the
//!   grammar opens with `%llguidance {}`, which is how SGLang tells Lark from GBNF);
//! - `llamacpp`: the plan's JSON Schema as `response_format: {"type": "json_object",
//!   "schema": ...}` (llama.cpp's server and llama-cpp-python's both read this form);
//! - `openai`: the JSON Schema as `response_format: {"type": "json_schema", ...}` (any
//!   engine with OpenAI-style structured outputs).
//!
//! The Lark grammar carries everything the local constraint does, copy spans included. The
//! JSON Schema cannot express values copied from the request or visible-entity labels; with
//! it those are checked by validation after the reply, and a reply that breaks them
//! escalates like any invalid plan.

use std::time::{Duration, Instant};

use plansmith_core::Catalog;
use plansmith_grammar::TokEnv;
use serde_json::{json, Value};

use crate::backend::{ModelBackend, Persisted, Started};
use crate::error::{BackendError, PlannerError};
use crate::prompt::CatalogText;

/// Longest reply asked of the engine (the local pretrained planner's budget).
pub const MAX_REPLY_TOKENS: usize = 256;

/// Which engine's request fields carry the constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    LlamaCpp,
    Vllm,
    Sglang,
}

impl Dialect {
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAi,
        Dialect::LlamaCpp,
        Dialect::Vllm,
        Dialect::Sglang,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::LlamaCpp => "llamacpp",
            Dialect::Vllm => "vllm",
            Dialect::Sglang => "sglang",
        }
    }

    /// The form of the constraint this engine enforces.
    pub fn form(self) -> Form {
        match self {
            Dialect::Vllm | Dialect::Sglang => Form::Lark,
            Dialect::OpenAi | Dialect::LlamaCpp => Form::JsonSchema,
        }
    }
}

/// How a constraint is written for an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// llguidance's Lark dialect: the grammar plansmith enforces locally, unchanged.
    Lark,
    /// A JSON Schema of the JSON-array reply ([`plansmith_grammar::plan_schema`]).
    JsonSchema,
}

/// One request's constraint, in the engine's form.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineConstraint {
    Lark(String),
    JsonSchema(Value),
}

/// `DIALECT:URL#MODEL`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpec {
    pub dialect: Dialect,
    /// The chat-completions endpoint.
    pub url: String,
    pub model: String,
}

impl BackendSpec {
    /// Parse `DIALECT:URL#MODEL`; `URL` is the server root, its `/v1`, or the endpoint itself.
    /// `#MODEL` may be left out for engines serving one model (llama.cpp).
    pub fn parse(spec: &str) -> Result<BackendSpec, BackendError> {
        let bad = |message: String| BackendError::Spec {
            spec: spec.to_string(),
            message,
        };
        let names = Dialect::ALL.map(Dialect::as_str).join(", ");
        let (dialect, rest) = spec.split_once(':').ok_or_else(|| {
            bad(format!(
                "expected DIALECT:URL#MODEL with DIALECT one of {names}"
            ))
        })?;
        let dialect = Dialect::ALL
            .into_iter()
            .find(|d| d.as_str() == dialect)
            .ok_or_else(|| bad(format!("unknown dialect `{dialect}` (one of {names})")))?;
        let (base, model) = match rest.rsplit_once('#') {
            Some((base, model)) => (base, model),
            None => (rest, ""),
        };
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(bad(format!("`{base}` is not an http(s) URL")));
        }
        if model.is_empty() && dialect != Dialect::LlamaCpp {
            return Err(bad(format!(
                "name the model after `#` (a {} server serves models by name)",
                dialect.as_str()
            )));
        }
        Ok(BackendSpec {
            dialect,
            url: crate::teacher::chat_completions_url(base),
            model: if model.is_empty() {
                "default".into()
            } else {
                model.into()
            },
        })
    }
}

/// What the engine answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    /// Log-probability of each reply token, when the engine returned them.
    pub logprobs: Option<Vec<f32>>,
    /// The engine stopped at the token budget (`finish_reason: "length"`).
    pub cut_off: bool,
    /// The engine's own time: the HTTP round trip.
    pub engine_time: Duration,
}

/// An OpenAI-compatible engine, with the constraint form its dialect enforces.
pub struct RemoteEngine {
    spec: BackendSpec,
    api_key: Option<String>,
    timeout: Duration,
    agent: ureq::Agent,
}

impl RemoteEngine {
    /// `timeout` bounds every call (a request's own deadline may cut it shorter).
    pub fn new(spec: BackendSpec, api_key: Option<String>, timeout: Duration) -> RemoteEngine {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        RemoteEngine {
            spec,
            api_key,
            timeout,
            agent,
        }
    }

    pub fn spec(&self) -> &BackendSpec {
        &self.spec
    }

    pub fn describe(&self) -> String {
        format!(
            "{} engine at {} (model {})",
            self.spec.dialect.as_str(),
            self.spec.url,
            self.spec.model
        )
    }

    /// The chat-completions body for one request: greedy, logprobs on, the constraint in the
    /// dialect's field. No `tools` field: the tools are in the system message, as locally,
    /// and the reply is the constrained content itself (no engine-side tool-call parser).
    pub fn body(
        &self,
        system: &str,
        request: &str,
        constraint: EngineConstraint,
        max_tokens: usize,
    ) -> Value {
        let mut body = json!({
            "model": self.spec.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": request},
            ],
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "logprobs": true,
            "top_logprobs": 1,
            "stream": false,
        });
        // The constraint moves into the body: a catalog's schema can be large, and it is
        // cloned once per request already (out of the planner's cache).
        match (self.spec.dialect, constraint) {
            (Dialect::Vllm, EngineConstraint::Lark(g)) => {
                body["structured_outputs"] = json!({ "grammar": g });
            }
            (Dialect::Sglang, EngineConstraint::Lark(g)) => {
                body["ebnf"] = json!(g);
            }
            (Dialect::LlamaCpp, EngineConstraint::JsonSchema(s)) => {
                body["response_format"] = json!({"type": "json_object", "schema": s});
            }
            (Dialect::OpenAi, EngineConstraint::JsonSchema(s)) => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": "plan", "schema": s, "strict": false},
                });
            }
            // The planner builds the form the dialect asks for; a mismatch is a bug, and
            // sending no constraint would be a silent loosening.
            (d, c) => unreachable!("{} engines do not take {c:?}", d.as_str()),
        }
        body
    }

    /// POST `body`; the reply, or why there is none. Bounded by the engine timeout and by
    /// `deadline`, whichever comes first.
    pub fn complete(&self, body: &Value, deadline: Option<Instant>) -> Result<Reply, BackendError> {
        let url = &self.spec.url;
        let limit = match deadline {
            Some(d) => self
                .timeout
                .min(d.saturating_duration_since(Instant::now())),
            None => self.timeout,
        };
        if limit.is_zero() {
            return Err(BackendError::Timeout {
                url: url.clone(),
                ms: 0,
            });
        }
        let start = Instant::now();
        let mut req = self
            .agent
            .post(url)
            .config()
            .timeout_global(Some(limit))
            .build()
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", &format!("Bearer {key}"));
        }
        let transport = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => BackendError::Timeout {
                url: url.clone(),
                ms: limit.as_millis(),
            },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                BackendError::Timeout {
                    url: url.clone(),
                    ms: limit.as_millis(),
                }
            }
            other => BackendError::Unreachable {
                url: url.clone(),
                message: other.to_string(),
            },
        };
        let mut resp = req.send_json(body).map_err(transport)?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
            .map_err(transport)?;
        let engine_time = start.elapsed();
        if status >= 400 {
            return Err(BackendError::Status {
                url: url.clone(),
                status,
                body: text.chars().take(300).collect(),
            });
        }
        parse_reply(&text, engine_time).map_err(|message| BackendError::Reply {
            url: url.clone(),
            message,
        })
    }
}

/// Read a chat-completions response: the first choice's content, its token logprobs, and
/// whether it stopped at the token budget.
fn parse_reply(text: &str, engine_time: Duration) -> Result<Reply, String> {
    let snippet = || text.chars().take(200).collect::<String>();
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {}", snippet()))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| format!("no choices[0] in {}", snippet()))?;
    let content = match choice.pointer("/message/content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(format!("choices[0].message.content is {other}")),
    };
    let logprobs = match choice.pointer("/logprobs/content") {
        Some(Value::Array(tokens)) => Some(
            tokens
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    t.get("logprob")
                        .and_then(Value::as_f64)
                        .map(|l| l as f32)
                        .ok_or_else(|| {
                            format!("choices[0].logprobs.content[{i}] has no numeric logprob")
                        })
                })
                .collect::<Result<Vec<f32>, String>>()?,
        ),
        _ => None,
    };
    Ok(Reply {
        text: content,
        logprobs,
        cut_off: choice.get("finish_reason").and_then(Value::as_str) == Some("length"),
        engine_time,
    })
}

/// The [`ModelBackend`] of a remote planner: no local model, only a byte vocabulary so the
/// grammar engine can compile (and cache, by catalog hash) the grammar it sends. Everything
/// that needs the model's logits here (`score`, `sample`, the name prior) is refused.
pub(crate) struct RemoteLm {
    describe: String,
}

impl RemoteLm {
    pub(crate) fn new(engine: &RemoteEngine) -> RemoteLm {
        RemoteLm {
            describe: engine.describe(),
        }
    }

    const EOS: u32 = 256;
}

impl ModelBackend for RemoteLm {
    fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(Vec::new());
        Ok(TokEnv::from_token_bytes(tokens, Self::EOS, &[], None)?)
    }

    fn grammar_eos(&self) -> u32 {
        Self::EOS
    }

    fn can_spell(&self, _text: &str) -> bool {
        true
    }

    fn max_new_tokens(&self) -> usize {
        MAX_REPLY_TOKENS
    }

    fn fast_forward(&self) -> bool {
        false
    }

    /// An estimate (about four bytes a token): the engine's tokenizer is remote.
    fn count_tokens(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }

    fn start(
        &self,
        _catalog: &Catalog,
        _hash: &str,
        _request: &str,
        _catalog_text: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        Err(PlannerError::RemoteOnly(self.describe.clone()))
    }

    fn check_catalog(&self, _: &Catalog, _: &str, _: CatalogText) -> Result<(), PlannerError> {
        Ok(())
    }

    fn free_stop(&self, id: u32) -> bool {
        id == Self::EOS
    }

    fn detokenize(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().filter(|&&i| i < 256).map(|&i| i as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).collect()
    }

    fn persisted(&self) -> Persisted<'_> {
        Persisted::Remote {
            describe: &self.describe,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_dialect_endpoint_and_model() {
        let s = BackendSpec::parse("vllm:http://gpu:8000/v1#Qwen/Qwen2.5-7B-Instruct").unwrap();
        assert_eq!(s.dialect, Dialect::Vllm);
        assert_eq!(s.url, "http://gpu:8000/v1/chat/completions");
        assert_eq!(s.model, "Qwen/Qwen2.5-7B-Instruct");
        let s = BackendSpec::parse("llamacpp:http://127.0.0.1:8080").unwrap();
        assert_eq!(s.url, "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(s.model, "default");
        let s = BackendSpec::parse("sglang:https://h/v1/chat/completions/#m").unwrap();
        assert_eq!(s.url, "https://h/v1/chat/completions");
        for (bad, says) in [
            ("http://h:1#m", "unknown dialect `http`"),
            ("tgi:http://h#m", "unknown dialect `tgi`"),
            ("vllm:h:8000#m", "not an http(s) URL"),
            ("vllm:http://h:8000", "name the model"),
            ("nothing", "expected DIALECT:URL#MODEL"),
        ] {
            let e = BackendSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn replies_give_content_logprobs_and_cut_off() {
        let r = parse_reply(
            r#"{"choices":[{"message":{"role":"assistant","content":"[]"},"finish_reason":"stop",
                "logprobs":{"content":[{"token":"[","logprob":-0.5},{"token":"]","logprob":-0.25}]}}]}"#,
            Duration::from_millis(3),
        )
        .unwrap();
        assert_eq!(r.text, "[]");
        assert_eq!(r.logprobs, Some(vec![-0.5, -0.25]));
        assert!(!r.cut_off);
        let r = parse_reply(
            r#"{"choices":[{"message":{"content":"[{\"na"},"finish_reason":"length","logprobs":null}]}"#,
            Duration::ZERO,
        )
        .unwrap();
        assert!(r.cut_off);
        assert_eq!(r.logprobs, None);
        for bad in [
            "<html>",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":{"content":7}}]}"#,
            r#"{"choices":[{"message":{"content":""},"logprobs":{"content":[{"token":"a"}]}}]}"#,
        ] {
            assert!(parse_reply(bad, Duration::ZERO).is_err(), "{bad}");
        }
    }
}
