//! Teachers: the bigger planners a tiny one escalates to. A teacher either answers with a
//! plan that validates against the catalog or fails with a reason — it never makes one up.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::time::Duration;

use plansmith_core::trace::read_traces;
use plansmith_core::validate::PlanValidator;
use plansmith_core::{Catalog, Plan, Policy, Syntax};
use serde_json::{json, Value};

#[derive(Debug, thiserror::Error)]
pub enum TeacherError {
    #[error("teacher has no answer for {0:?}")]
    NoAnswer(String),
    #[error("teacher endpoint {url} failed after {attempts} attempt(s): {message}")]
    Endpoint {
        url: String,
        attempts: u32,
        message: String,
    },
    #[error("teacher answered with an invalid plan: {0}")]
    InvalidAnswer(String),
    #[error("teacher command `{command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("cannot load teacher traces: {0}")]
    Traces(#[from] plansmith_core::TraceError),
}

/// Something that can plan a request against a catalog when the tiny planner cannot.
pub trait Teacher: Send + Sync {
    fn describe(&self) -> String;
    fn plan(&self, request: &str, catalog: &Catalog) -> Result<Plan, TeacherError>;
}

/// Check a teacher's plan like any other: wrong tools or arguments are an error, not a plan.
fn checked(plan: Plan, catalog: &Catalog) -> Result<Plan, TeacherError> {
    let validator =
        PlanValidator::new(catalog).map_err(|e| TeacherError::InvalidAnswer(e.to_string()))?;
    let violations = validator.validate(&plan, &Policy::default(), None);
    match violations.first() {
        None => Ok(plan),
        Some(v) => Err(TeacherError::InvalidAnswer(v.to_string())),
    }
}

/// Answers from a trace file, looked up by exact request text.
pub struct TraceFileTeacher {
    answers: HashMap<String, Plan>,
    source: String,
}

impl TraceFileTeacher {
    pub fn load(path: impl AsRef<Path>) -> Result<Self, TeacherError> {
        let traces = read_traces(path.as_ref())?;
        let answers = traces
            .into_iter()
            .map(|t| (t.request.clone(), t.plan()))
            .collect();
        Ok(TraceFileTeacher {
            answers,
            source: path.as_ref().display().to_string(),
        })
    }
}

impl Teacher for TraceFileTeacher {
    fn describe(&self) -> String {
        format!("traces:{}", self.source)
    }

    fn plan(&self, request: &str, catalog: &Catalog) -> Result<Plan, TeacherError> {
        let plan = self
            .answers
            .get(request)
            .cloned()
            .ok_or_else(|| TeacherError::NoAnswer(request.into()))?;
        checked(plan, catalog)
    }
}

/// Any OpenAI-compatible `/v1/chat/completions` endpoint: tools and the request in,
/// `tool_calls` out. Transport errors and 5xx/429 are retried with exponential backoff.
pub struct OpenAiTeacher {
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retries: u32,
    pub backoff: Duration,
    agent: ureq::Agent,
}

impl OpenAiTeacher {
    /// `base` is the server root or its `/v1` (e.g. `http://127.0.0.1:8080/v1`).
    pub fn new(base: &str, model: &str, api_key: Option<String>, timeout: Duration) -> Self {
        let url = chat_completions_url(base);
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        OpenAiTeacher {
            url,
            model: model.into(),
            api_key,
            timeout,
            retries: 2,
            backoff: Duration::from_millis(200),
            agent,
        }
    }

    /// POST a chat-completions body; the JSON response and how many attempts it took.
    /// Transport errors, 429 and 5xx are retried with exponential backoff.
    pub fn complete(&self, body: &Value) -> Result<(Value, u32), TeacherError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.attempt(body) {
                Ok(v) => return Ok((v, attempts)),
                Err((retryable, message)) => {
                    if !retryable || attempts > self.retries {
                        return Err(TeacherError::Endpoint {
                            url: self.url.clone(),
                            attempts,
                            message,
                        });
                    }
                    std::thread::sleep(self.backoff * 2u32.pow(attempts - 1));
                }
            }
        }
    }

    fn attempt(&self, body: &Value) -> Result<Value, (bool, String)> {
        let mut req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", &format!("Bearer {key}"));
        }
        let mut resp = req.send_json(body).map_err(|e| (true, e.to_string()))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| (true, e.to_string()))?;
        if status == 429 || status >= 500 {
            return Err((true, format!("HTTP {status}: {}", snippet(&text))));
        }
        if status >= 400 {
            return Err((false, format!("HTTP {status}: {}", snippet(&text))));
        }
        serde_json::from_str(&text).map_err(|e| {
            (
                false,
                format!("response is not JSON ({e}): {}", snippet(&text)),
            )
        })
    }
}

/// The chat-completions endpoint of an OpenAI-compatible server given as its root, its
/// `/v1`, or the endpoint itself.
pub fn chat_completions_url(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    if trimmed.ends_with("/chat/completions") {
        trimmed.to_string()
    } else if trimmed.ends_with("/v1") {
        format!("{trimmed}/chat/completions")
    } else {
        format!("{trimmed}/v1/chat/completions")
    }
}

fn snippet(text: &str) -> String {
    text.chars().take(200).collect()
}

impl Teacher for OpenAiTeacher {
    fn describe(&self) -> String {
        format!("openai:{} model {}", self.url, self.model)
    }

    fn plan(&self, request: &str, catalog: &Catalog) -> Result<Plan, TeacherError> {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": request}],
            "tools": catalog.to_openai(),
            "tool_choice": "auto",
            "temperature": 0,
        });
        let (response, attempts) = self.complete(&body)?;
        let message =
            response
                .pointer("/choices/0/message")
                .ok_or_else(|| TeacherError::Endpoint {
                    url: self.url.clone(),
                    attempts,
                    message: format!(
                        "no choices[0].message in {}",
                        snippet(&response.to_string())
                    ),
                })?;
        let plan = Syntax::OpenAi
            .parse(&message.to_string())
            .map_err(|e| TeacherError::InvalidAnswer(e.to_string()))?;
        checked(plan, catalog)
    }
}

/// An external program speaking JSON lines: it reads `{"request", "tools"}` on stdin and
/// answers each with one line `{"calls": [{"name", "arguments"}], "spoken_text"?}`.
pub struct CommandTeacher {
    command: String,
    timeout: Duration,
    process: Mutex<Option<Running>>,
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<std::io::Result<String>>,
}

impl CommandTeacher {
    pub fn new(command: &str, timeout: Duration) -> Self {
        CommandTeacher {
            command: command.into(),
            timeout,
            process: Mutex::new(None),
        }
    }

    fn spawn(&self) -> Result<Running, TeacherError> {
        let err = |message: String| TeacherError::Command {
            command: self.command.clone(),
            message,
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(e.to_string()))?;
        let stdin = child.stdin.take().ok_or_else(|| err("no stdin".into()))?;
        let stdout = child.stdout.take().ok_or_else(|| err("no stdout".into()))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running {
            child,
            stdin,
            lines,
        })
    }
}

impl Teacher for CommandTeacher {
    fn describe(&self) -> String {
        format!("command:{}", self.command)
    }

    fn plan(&self, request: &str, catalog: &Catalog) -> Result<Plan, TeacherError> {
        let err = |message: String| TeacherError::Command {
            command: self.command.clone(),
            message,
        };
        let mut guard = self
            .process
            .lock()
            .map_err(|_| err("teacher lock poisoned".into()))?;
        if guard.is_none() {
            *guard = Some(self.spawn()?);
        }
        let running = guard.as_mut().ok_or_else(|| err("not running".into()))?;
        let line = json!({"request": request, "tools": catalog.to_openai()}).to_string() + "\n";
        let answer = running
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| running.stdin.flush())
            .map_err(|e| e.to_string())
            .and_then(|_| match running.lines.recv_timeout(self.timeout) {
                Ok(Ok(l)) => Ok(l),
                Ok(Err(e)) => Err(e.to_string()),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    Err(format!("no answer within {:?}", self.timeout))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => Err("the command exited".into()),
            });
        let answer = match answer {
            Ok(a) => a,
            Err(message) => {
                // A broken or stuck child is restarted on the next request.
                if let Some(mut r) = guard.take() {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                }
                return Err(err(message));
            }
        };
        let plan: Plan = serde_json::from_str(&answer)
            .map_err(|e| TeacherError::InvalidAnswer(format!("{e}: {}", snippet(&answer))))?;
        checked(plan, catalog)
    }
}

impl Drop for CommandTeacher {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.process.lock() {
            if let Some(mut r) = guard.take() {
                let _ = r.child.kill();
                let _ = r.child.wait();
            }
        }
    }
}

/// Build a teacher from a CLI-style spec: `traces:FILE`, `cmd:COMMAND`, or
/// `openai:URL#MODEL` (API key from `PLANSMITH_TEACHER_API_KEY`).
pub fn from_spec(spec: &str, timeout: Duration) -> Result<Box<dyn Teacher>, TeacherError> {
    if let Some(path) = spec.strip_prefix("traces:") {
        return Ok(Box::new(TraceFileTeacher::load(path)?));
    }
    if let Some(cmd) = spec.strip_prefix("cmd:") {
        return Ok(Box::new(CommandTeacher::new(cmd, timeout)));
    }
    if let Some(rest) = spec.strip_prefix("openai:") {
        let (url, model) = rest.rsplit_once('#').unwrap_or((rest, "default"));
        let key = std::env::var("PLANSMITH_TEACHER_API_KEY").ok();
        return Ok(Box::new(OpenAiTeacher::new(url, model, key, timeout)));
    }
    Err(TeacherError::Command {
        command: spec.into(),
        message: "unknown teacher spec (expected traces:FILE, cmd:COMMAND or openai:URL#MODEL)"
            .into(),
    })
}
