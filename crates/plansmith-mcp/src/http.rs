//! The streamable HTTP transport: each message is a POST to the server's endpoint; the answer
//! comes back as one JSON body or as a server-sent event stream (which may carry the server's
//! own requests and notifications before the answer). A GET stream, where the server offers
//! one, carries notifications between requests (`tools/list_changed`).

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::message::{answer, classify, clip, Incoming, LIST_CHANGED};
use crate::McpError;

/// Largest answer body read (a runaway server must not eat memory).
const MAX_BODY: u64 = 64 << 20;

pub(crate) struct HttpLink {
    name: String,
    url: String,
    agent: ureq::Agent,
    session: Arc<Mutex<Option<String>>>,
    protocol: Arc<Mutex<Option<String>>>,
    list_changed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    timeout: Duration,
}

impl HttpLink {
    pub(crate) fn new(name: &str, url: &str, timeout: Duration) -> HttpLink {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .into();
        HttpLink {
            name: name.to_string(),
            url: url.to_string(),
            agent,
            session: Arc::new(Mutex::new(None)),
            protocol: Arc::new(Mutex::new(None)),
            list_changed: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            timeout,
        }
    }

    pub(crate) fn take_list_changed(&self) -> bool {
        self.list_changed.swap(false, Ordering::SeqCst)
    }

    /// After `initialize`: send the negotiated revision on every request, and listen on the
    /// GET stream for notifications (a server without one answers 405; then there are none
    /// between requests).
    pub(crate) fn initialized(&self, protocol: &str) {
        *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = Some(protocol.to_string());
        let (url, session, protocol) = (
            self.url.clone(),
            self.session.clone(),
            self.protocol.clone(),
        );
        let (flag, stop) = (self.list_changed.clone(), self.stop.clone());
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            while !stop.load(Ordering::SeqCst) {
                let mut req = agent.get(&url).header("Accept", "text/event-stream");
                req = with_session(req, &session, &protocol);
                let Ok(resp) = req.call() else {
                    return;
                };
                if resp.status().as_u16() != 200 {
                    return;
                }
                let reader = BufReader::new(resp.into_body().into_reader());
                for_each_event(reader, |msg| {
                    if let Ok(Incoming::Notification { method }) = classify(&msg) {
                        if method == LIST_CHANGED {
                            flag.store(true, Ordering::SeqCst);
                        }
                    }
                    !stop.load(Ordering::SeqCst)
                });
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }

    pub(crate) fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let resp = self.post(&msg, method)?;
        let status = resp.status().as_u16();
        if status >= 300 {
            return Err(self.status_error(method, status, resp));
        }
        Ok(())
    }

    pub(crate) fn request(&self, id: u64, method: &str, params: Value) -> Result<Value, McpError> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut resp = self.post(&msg, method)?;
        let status = resp.status().as_u16();
        if status >= 300 {
            return Err(self.status_error(method, status, resp));
        }
        if let Some(s) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.to_string());
        }
        let kind = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut found: Option<Result<Value, (i64, String)>> = None;
        let mut bad: Option<String> = None;
        if kind.starts_with("text/event-stream") {
            let reader = BufReader::new(resp.into_body().into_reader().take(MAX_BODY));
            for_each_event(reader, |msg| {
                match classify(&msg) {
                    Ok(Incoming::Response {
                        id: Some(got),
                        result,
                    }) if got == id => {
                        found = Some(result);
                        return false;
                    }
                    Ok(Incoming::Request { id: rid, method }) => {
                        let _ = self.post(&answer(&rid, &method), &method);
                    }
                    Ok(Incoming::Notification { method }) if method == LIST_CHANGED => {
                        self.list_changed.store(true, Ordering::SeqCst);
                    }
                    Ok(_) => {}
                    Err(why) => {
                        bad = Some(format!("an event of the answer to `{method}`: {why}"));
                        return false;
                    }
                }
                true
            });
        } else {
            let text = resp
                .body_mut()
                .with_config()
                .limit(MAX_BODY)
                .read_to_string()
                .map_err(|e| self.connect_error(method, &e))?;
            match serde_json::from_str::<Value>(&text) {
                Ok(msg) => match classify(&msg) {
                    Ok(Incoming::Response {
                        id: Some(got),
                        result,
                    }) if got == id => found = Some(result),
                    Ok(_) => bad = Some(format!("the answer to `{method}` is not its response")),
                    Err(why) => bad = Some(format!("the answer to `{method}`: {why}")),
                },
                Err(e) => {
                    bad = Some(format!(
                        "the answer to `{method}` is not JSON ({e}): {}",
                        clip(&text)
                    ))
                }
            }
        }
        if let Some(detail) = bad {
            return Err(McpError::Malformed {
                server: self.name.clone(),
                detail,
            });
        }
        match found {
            Some(Ok(v)) => Ok(v),
            Some(Err((code, message))) => Err(McpError::Rpc {
                server: self.name.clone(),
                method: method.to_string(),
                code,
                message,
            }),
            None => Err(McpError::Malformed {
                server: self.name.clone(),
                detail: format!("the event stream ended without the answer to `{method}`"),
            }),
        }
    }

    fn post(
        &self,
        msg: &Value,
        method: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, McpError> {
        let req = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        with_session(req, &self.session, &self.protocol)
            .send_json(msg)
            .map_err(|e| self.connect_error(method, &e))
    }

    fn connect_error(&self, method: &str, e: &ureq::Error) -> McpError {
        match e {
            ureq::Error::Timeout(_) => McpError::Timeout {
                server: self.name.clone(),
                method: method.to_string(),
                ms: self.timeout.as_millis() as u64,
            },
            e => McpError::Connect {
                server: self.name.clone(),
                url: self.url.clone(),
                detail: e.to_string(),
            },
        }
    }

    fn status_error(
        &self,
        method: &str,
        status: u16,
        mut resp: ureq::http::Response<ureq::Body>,
    ) -> McpError {
        let body = resp
            .body_mut()
            .with_config()
            .limit(4096)
            .read_to_string()
            .unwrap_or_default();
        McpError::Http {
            server: self.name.clone(),
            method: method.to_string(),
            status,
            body: clip(body.trim()),
        }
    }
}

impl Drop for HttpLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Ending the session is polite, not required: a server that is gone is not an error.
        if self
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            let req = with_session(self.agent.delete(&self.url), &self.session, &self.protocol);
            let _ = req.call();
        }
    }
}

fn with_session<B>(
    mut req: ureq::RequestBuilder<B>,
    session: &Mutex<Option<String>>,
    protocol: &Mutex<Option<String>>,
) -> ureq::RequestBuilder<B> {
    if let Some(s) = session.lock().unwrap_or_else(|p| p.into_inner()).as_deref() {
        req = req.header("Mcp-Session-Id", s);
    }
    if let Some(p) = protocol
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_deref()
    {
        req = req.header("MCP-Protocol-Version", p);
    }
    req
}

/// Call `f` with each event's JSON data until it returns false or the stream ends. Events
/// whose data is not JSON are passed as a string (which `classify` refuses).
fn for_each_event(reader: impl BufRead, mut f: impl FnMut(Value) -> bool) {
    let mut data = String::new();
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.is_empty() {
            if !data.is_empty() {
                let msg = serde_json::from_str(&data).unwrap_or(Value::String(data.clone()));
                data.clear();
                if !f(msg) {
                    return;
                }
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::for_each_event;
    use serde_json::{json, Value};

    fn events(text: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for_each_event(text.as_bytes(), |v| {
            out.push(v);
            true
        });
        out
    }

    #[test]
    fn server_sent_events_are_split_and_joined() {
        let text =
            "event: message\nid: 1\ndata: {\"a\":\ndata: 1}\n\n: comment\n\ndata: not json\n\n";
        assert_eq!(events(text), vec![json!({"a": 1}), json!("not json")]);
        assert!(
            events("data: {}").is_empty(),
            "an event ends at a blank line"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_stream_parses_without_panicking(s in "(data: |event: |id: |\\n|[ -~]){0,80}") {
            let _ = events(&s);
        }
    }
}
