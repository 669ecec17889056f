//! One MCP server over stdio: the child process, a reader thread that routes its messages, and
//! the requests plansmith makes (`initialize`, `tools/list`, `tools/call`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::McpError;

/// Protocol revisions this client speaks, newest first (it asks for the first). Their
/// `tools/list` and `tools/call` are the same for what plansmith uses.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// A line longer than this from a server is malformed (a runaway server must not eat memory).
const MAX_LINE: u64 = 64 << 20;
/// `tools/list` pages before a server is taken to paginate forever.
const MAX_PAGES: usize = 1000;
/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL: usize = 2000;

/// What a server said about itself in `initialize`.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
    /// The server announces `notifications/tools/list_changed`.
    pub list_changed: bool,
}

/// The answer to a `tools/call`.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// Content blocks (`{"type":"text","text":...}`, images, resources) as sent.
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    /// The tool reported a failure (`isError`): its content says what.
    pub is_error: bool,
}

impl CallResult {
    /// The text blocks joined by newlines; other blocks as `[type]`.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .map(|c| match (c["type"].as_str(), c["text"].as_str()) {
                (Some("text"), Some(t)) => t.to_string(),
                (Some(kind), _) => format!("[{kind}]"),
                _ => "[?]".to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What the reader thread hands a waiting request.
enum Reply {
    Result(Value),
    Error { code: i64, message: String },
    Closed,
}

#[derive(Clone)]
enum Closed {
    Exited,
    Malformed(String),
}

struct Shared {
    pending: Mutex<HashMap<u64, Sender<Reply>>>,
    closed: Mutex<Option<Closed>>,
    list_changed: AtomicBool,
    stderr: Mutex<String>,
    stdin: Mutex<Option<ChildStdin>>,
}

impl Shared {
    fn write(&self, msg: &Value) -> std::io::Result<()> {
        let mut g = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = g.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stdin closed",
            ));
        };
        let mut line = msg.to_string();
        line.push('\n');
        w.write_all(line.as_bytes())?;
        w.flush()
    }

    /// The server is gone or broken: every waiting request learns why, and later ones too.
    fn close(&self, why: Closed) {
        let mut c = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_none() {
            *c = Some(why.clone());
        }
        drop(c);
        let pending: Vec<Sender<Reply>> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in pending {
            let _ = s.send(Reply::Closed);
        }
    }
}

/// A running MCP server (stdio transport). Dropping it ends the process.
pub struct McpServer {
    name: String,
    child: Mutex<Child>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    timeout: Duration,
    info: Option<ServerInfo>,
}

impl McpServer {
    /// Start `command` (split like a shell would: `npx -y @modelcontextprotocol/server-filesystem
    /// /tmp`), then `initialize` it. `timeout` bounds each request, the handshake included.
    pub fn start(command: &str, timeout: Duration) -> Result<McpServer, McpError> {
        let words = split_command(command);
        let name = server_name(&words);
        let Some((program, args)) = words.split_first() else {
            return Err(McpError::EmptyCommand { server: name });
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| McpError::Spawn {
                server: name.clone(),
                command: command.to_string(),
                source,
            })?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            list_changed: AtomicBool::new(false),
            stderr: Mutex::new(String::new()),
            stdin: Mutex::new(child.stdin.take()),
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || read_messages(stdout, &shared));
        }
        {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || keep_stderr_tail(stderr, &shared));
        }
        let mut server = McpServer {
            name,
            child: Mutex::new(child),
            shared,
            next_id: AtomicU64::new(1),
            timeout,
            info: None,
        };
        server.initialize()?;
        Ok(server)
    }

    /// The name errors and prefixed tool names use (from the command: `filesystem` for
    /// `npx -y @modelcontextprotocol/server-filesystem /tmp`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the server said in `initialize`.
    pub fn info(&self) -> Option<&ServerInfo> {
        self.info.as_ref()
    }

    /// Whether the server sent `notifications/tools/list_changed` since the last call (the
    /// flag is cleared by reading it): the catalog must be listed again.
    pub fn take_list_changed(&self) -> bool {
        self.shared.list_changed.swap(false, Ordering::SeqCst)
    }

    fn initialize(&mut self) -> Result<(), McpError> {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSIONS[0],
                "capabilities": {},
                "clientInfo": {"name": "plansmith", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        let got = r["protocolVersion"].as_str().unwrap_or("").to_string();
        if !PROTOCOL_VERSIONS.contains(&got.as_str()) {
            return Err(McpError::Version {
                server: self.name.clone(),
                got,
                supported: PROTOCOL_VERSIONS.join(", "),
            });
        }
        self.info = Some(ServerInfo {
            name: r["serverInfo"]["name"].as_str().unwrap_or("").to_string(),
            version: r["serverInfo"]["version"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            protocol_version: got,
            list_changed: r["capabilities"]["tools"]["listChanged"] == json!(true),
        });
        self.notify("notifications/initialized", json!({}))
    }

    /// Every tool the server offers (all pages of `tools/list`), as the server wrote them.
    pub fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let r = self.request("tools/list", params)?;
            let Some(page) = r["tools"].as_array() else {
                return Err(self.malformed("`tools/list` answered without a `tools` array"));
            };
            tools.extend(page.iter().cloned());
            match r.get("nextCursor") {
                Some(Value::String(c)) if !c.is_empty() => cursor = Some(c.clone()),
                _ => return Ok(tools),
            }
        }
        Err(self.malformed(&format!(
            "`tools/list` still paginating after {MAX_PAGES} pages"
        )))
    }

    /// Call one tool. A tool that fails reports `is_error` (not an `Err`): that is the tool's
    /// answer; `Err` is the server failing.
    pub fn call_tool(&self, tool: &str, arguments: &Value) -> Result<CallResult, McpError> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let Some(content) = r["content"].as_array() else {
            return Err(self.malformed("`tools/call` answered without a `content` array"));
        };
        Ok(CallResult {
            content: content.clone(),
            structured: r.get("structuredContent").cloned(),
            is_error: r["isError"] == json!(true),
        })
    }

    fn malformed(&self, detail: &str) -> McpError {
        McpError::Malformed {
            server: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        self.shared
            .write(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .map_err(|source| self.write_error(method, source))
    }

    fn write_error(&self, method: &str, source: std::io::Error) -> McpError {
        // A server that exited shows up first as a broken pipe: say that it exited.
        match self.closed_error(method) {
            Some(e) => e,
            None => McpError::Write {
                server: self.name.clone(),
                source,
            },
        }
    }

    fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        if let Some(e) = self.closed_error(method) {
            return Err(e);
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(source) = self.shared.write(&msg) {
            self.forget(id);
            // Give the reader a moment to see the exit, so the error says so.
            std::thread::sleep(Duration::from_millis(50));
            return Err(self.write_error(method, source));
        }
        let reply = rx.recv_timeout(self.timeout);
        self.forget(id);
        match reply {
            Ok(Reply::Result(v)) => Ok(v),
            Ok(Reply::Error { code, message }) => Err(McpError::Rpc {
                server: self.name.clone(),
                method: method.to_string(),
                code,
                message,
            }),
            Ok(Reply::Closed) | Err(RecvTimeoutError::Disconnected) => Err(self
                .closed_error(method)
                .unwrap_or_else(|| self.malformed("the connection closed"))),
            Err(RecvTimeoutError::Timeout) => Err(McpError::Timeout {
                server: self.name.clone(),
                method: method.to_string(),
                ms: self.timeout.as_millis() as u64,
            }),
        }
    }

    fn forget(&self, id: u64) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Why the connection is closed, as an error about `method`, if it is.
    fn closed_error(&self, method: &str) -> Option<McpError> {
        let closed = self
            .shared
            .closed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        Some(match closed {
            Closed::Malformed(detail) => McpError::Malformed {
                server: self.name.clone(),
                detail,
            },
            Closed::Exited => {
                let status = self.exit_status();
                // The stderr reader may still be draining the last lines.
                std::thread::sleep(Duration::from_millis(20));
                let tail = self
                    .shared
                    .stderr
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .trim()
                    .to_string();
                McpError::Exited {
                    server: self.name.clone(),
                    method: method.to_string(),
                    status,
                    stderr: if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    },
                }
            }
        })
    }

    /// The child's exit status, waiting briefly for it (its stdout closes just before).
    fn exit_status(&self) -> String {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return s.to_string(),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => return "its output closed".to_string(),
                Err(e) => return format!("status unknown: {e}"),
            }
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // Closing stdin is the stdio transport's shutdown; a server that lingers is killed.
        self.shared
            .stdin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The reader thread: route responses to their requests, answer the server's own requests,
/// note notifications; close everything on EOF or on a line that is not JSON-RPC.
fn read_messages(stdout: impl Read, shared: &Shared) {
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    let mut n = 0usize;
    loop {
        line.clear();
        n += 1;
        match (&mut reader).take(MAX_LINE).read_line(&mut line) {
            Ok(0) => return shared.close(Closed::Exited),
            Ok(_) if !line.ends_with('\n') && line.len() as u64 >= MAX_LINE => {
                return shared.close(Closed::Malformed(format!(
                    "line {n} is longer than {MAX_LINE} bytes"
                )))
            }
            Ok(_) => {}
            Err(e) => {
                return shared.close(Closed::Malformed(format!("line {n} is not UTF-8: {e}")))
            }
        }
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return shared.close(Closed::Malformed(format!(
                    "line {n} is JSON but not a JSON-RPC object: {}",
                    clip(text)
                )))
            }
            Err(e) => {
                return shared.close(Closed::Malformed(format!(
                    "line {n} is not JSON ({e}): {}",
                    clip(text)
                )))
            }
        };
        if let Err(why) = route(&msg, shared) {
            return shared.close(Closed::Malformed(format!("line {n}: {why}")));
        }
    }
}

fn route(msg: &Value, shared: &Shared) -> Result<(), String> {
    if msg.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("no `\"jsonrpc\": \"2.0\"`".into());
    }
    let method = msg.get("method").and_then(Value::as_str);
    match (msg.get("id"), method) {
        // A request from the server: ping is answered, the rest (sampling, roots, elicitation:
        // capabilities plansmith did not announce) get "method not found".
        (Some(id), Some(m)) => {
            let answer = if m == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": -32601, "message": format!("plansmith does not offer `{m}`")}})
            };
            let _ = shared.write(&answer);
            Ok(())
        }
        (None, Some(m)) => {
            if m == "notifications/tools/list_changed" {
                shared.list_changed.store(true, Ordering::SeqCst);
            }
            Ok(())
        }
        (Some(id), None) => {
            // Responses to ids plansmith never sent (or that timed out) are dropped.
            let Some(id) = id.as_u64() else {
                return Ok(());
            };
            let reply = match (msg.get("result"), msg.get("error")) {
                (Some(r), None) => Reply::Result(r.clone()),
                (None, Some(e)) => Reply::Error {
                    code: e["code"].as_i64().unwrap_or(0),
                    message: e["message"].as_str().unwrap_or("(no message)").to_string(),
                },
                _ => return Err("a response needs exactly one of `result` and `error`".into()),
            };
            // A response to a request that timed out meanwhile is dropped.
            let waiter = shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(w) = waiter {
                let _ = w.send(reply);
            }
            Ok(())
        }
        (None, None) => Err("neither a request, a notification nor a response".into()),
    }
}

fn keep_stderr_tail(stderr: impl Read, shared: &Shared) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let mut tail = shared.stderr.lock().unwrap_or_else(|p| p.into_inner());
                tail.push_str(&String::from_utf8_lossy(&buf));
                if tail.len() > STDERR_TAIL {
                    let mut cut = tail.len() - STDERR_TAIL;
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    tail.drain(..cut);
                }
            }
        }
    }
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 120 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(120).collect::<String>())
    }
}

/// Split a command line into words as a POSIX shell would (quotes group, backslashes escape);
/// an unbalanced quote leaves the line as one word, which then fails to start, named.
fn split_command(command: &str) -> Vec<String> {
    shlex::split(command).unwrap_or_else(|| vec![command.to_string()])
}

/// A short name for a server from its command: the package or program, without launchers
/// (`npx -y`, `node`, `uvx`, `python3 -m`), npm scopes and `mcp-server-` / `server-` prefixes.
fn server_name(words: &[String]) -> String {
    const LAUNCHERS: [&str; 9] = [
        "npx", "node", "uvx", "uv", "python", "python3", "deno", "bun", "run",
    ];
    let word = words
        .iter()
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .zip(words)
        .find(|(base, w)| !w.starts_with('-') && !LAUNCHERS.contains(base))
        .map(|(_, w)| w.as_str())
        .unwrap_or("server");
    let base = word
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(word);
    let base = base.split('@').next().unwrap_or(base);
    let base = base.strip_suffix(".py").unwrap_or(base);
    let base = base.strip_suffix(".js").unwrap_or(base);
    let short = base
        .strip_prefix("mcp-server-")
        .or_else(|| base.strip_prefix("server-"))
        .or_else(|| base.strip_prefix("mcp_server_"))
        .unwrap_or(base);
    let name: String = short
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() {
        "server".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"npx -y "@scope/server x" 'a b' c\ d"#),
            vec!["npx", "-y", "@scope/server x", "a b", "c d"]
        );
        assert_eq!(split_command("  "), Vec::<String>::new());
        assert_eq!(split_command("''"), vec![""]);
        assert_eq!(split_command("a 'b"), vec!["a 'b"]);
    }

    #[test]
    fn servers_are_named_after_their_package() {
        let name = |c: &str| server_name(&split_command(c));
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-filesystem /tmp"),
            "filesystem"
        );
        assert_eq!(
            name("node_modules/.bin/mcp-server-everything stdio"),
            "everything"
        );
        assert_eq!(name("python3 -m weather_server"), "weather_server");
        assert_eq!(name("python3 tests/stub.py --flag"), "stub");
        assert_eq!(name("/usr/bin/my-tools"), "my_tools");
        assert_eq!(name(""), "server");
    }
}
