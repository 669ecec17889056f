//! The stdio transport: the server is a child process; newline-delimited JSON-RPC on its
//! stdin and stdout; its stderr kept for error messages. A reader thread routes responses to
//! the requests waiting for them, answers the server's own requests and notes notifications.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::message::{answer, classify, clip, Incoming, LIST_CHANGED};
use crate::McpError;

/// A line longer than this from a server is malformed (a runaway server must not eat memory).
const MAX_LINE: u64 = 64 << 20;
/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL: usize = 2000;

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

/// A server process and the thread reading it.
pub(crate) struct StdioLink {
    name: String,
    child: Mutex<Child>,
    shared: Arc<Shared>,
}

impl StdioLink {
    pub(crate) fn spawn(
        name: &str,
        command: &str,
        words: &[String],
    ) -> Result<StdioLink, McpError> {
        let Some((program, args)) = words.split_first() else {
            return Err(McpError::EmptyCommand {
                server: name.to_string(),
            });
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| McpError::Spawn {
                server: name.to_string(),
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
        Ok(StdioLink {
            name: name.to_string(),
            child: Mutex::new(child),
            shared,
        })
    }

    pub(crate) fn take_list_changed(&self) -> bool {
        self.shared.list_changed.swap(false, Ordering::SeqCst)
    }

    pub(crate) fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
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

    pub(crate) fn request(
        &self,
        id: u64,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, McpError> {
        if let Some(e) = self.closed_error(method) {
            return Err(e);
        }
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
        let reply = rx.recv_timeout(timeout);
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
                .unwrap_or_else(|| McpError::Malformed {
                    server: self.name.clone(),
                    detail: "the connection closed".into(),
                })),
            Err(RecvTimeoutError::Timeout) => Err(McpError::Timeout {
                server: self.name.clone(),
                method: method.to_string(),
                ms: timeout.as_millis() as u64,
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

impl Drop for StdioLink {
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
    match classify(msg)? {
        Incoming::Request { id, method } => {
            let _ = shared.write(&answer(&id, &method));
        }
        Incoming::Notification { method } => {
            if method == LIST_CHANGED {
                shared.list_changed.store(true, Ordering::SeqCst);
            }
        }
        // Responses to ids plansmith never sent, or to requests that timed out, are dropped.
        Incoming::Response { id, result } => {
            let waiter = id.and_then(|id| {
                shared
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id)
            });
            if let Some(w) = waiter {
                let _ = w.send(match result {
                    Ok(v) => Reply::Result(v),
                    Err((code, message)) => Reply::Error { code, message },
                });
            }
        }
    }
    Ok(())
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
