//! JSON-RPC messages from a server, whatever the transport: responses, the server's own
//! requests, notifications.

use serde_json::{json, Value};

/// One message a server sent.
pub(crate) enum Incoming {
    /// The answer to a request of ours (`id` is `None` for ids plansmith never sends).
    Response {
        id: Option<u64>,
        result: Result<Value, (i64, String)>,
    },
    /// A request from the server; [`answer`] says what to reply.
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
    },
}

/// What a message is, or why it is not JSON-RPC 2.0.
pub(crate) fn classify(msg: &Value) -> Result<Incoming, String> {
    if !msg.is_object() {
        return Err("JSON but not a JSON-RPC object".into());
    }
    if msg.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("no `\"jsonrpc\": \"2.0\"`".into());
    }
    let method = msg.get("method").and_then(Value::as_str).map(String::from);
    match (msg.get("id"), method) {
        (Some(id), Some(method)) => Ok(Incoming::Request {
            id: id.clone(),
            method,
        }),
        (None, Some(method)) => Ok(Incoming::Notification { method }),
        (Some(id), None) => {
            let result = match (msg.get("result"), msg.get("error")) {
                (Some(r), None) => Ok(r.clone()),
                (None, Some(e)) => Err((
                    e["code"].as_i64().unwrap_or(0),
                    e["message"].as_str().unwrap_or("(no message)").to_string(),
                )),
                _ => return Err("a response needs exactly one of `result` and `error`".into()),
            };
            Ok(Incoming::Response {
                id: id.as_u64(),
                result,
            })
        }
        (None, None) => Err("neither a request, a notification nor a response".into()),
    }
}

/// The reply to a server's request: ping is answered; the rest (sampling, roots, elicitation:
/// capabilities plansmith did not announce) get "method not found".
pub(crate) fn answer(id: &Value, method: &str) -> Value {
    if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": -32601, "message": format!("plansmith does not offer `{method}`")}})
    }
}

/// The notification that says a server's tools changed.
pub(crate) const LIST_CHANGED: &str = "notifications/tools/list_changed";

pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= 120 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(120).collect::<String>())
    }
}
