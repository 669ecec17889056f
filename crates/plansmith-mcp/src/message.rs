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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn messages_are_classified() {
        let r = classify(&json!({"jsonrpc": "2.0", "id": 3, "result": {"x": 1}})).unwrap();
        assert!(matches!(
            r,
            Incoming::Response {
                id: Some(3),
                result: Ok(_)
            }
        ));
        let r =
            classify(&json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -1, "message": "m"}}))
                .unwrap();
        assert!(matches!(
            r,
            Incoming::Response {
                id: None,
                result: Err((-1, _))
            }
        ));
        let r = classify(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
        assert!(matches!(r, Incoming::Request { .. }));
        assert_eq!(answer(&json!(1), "ping")["result"], json!({}));
        assert_eq!(
            answer(&json!(1), "sampling/createMessage")["error"]["code"],
            -32601
        );
        for bad in [
            json!([1]),
            json!({"id": 1, "result": 1}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}}),
            json!({"jsonrpc": "2.0"}),
        ] {
            assert!(classify(&bad).is_err(), "{bad}");
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::from),
            prop_oneof![
                Just("2.0"),
                Just("id"),
                Just("method"),
                Just("result"),
                Just("error")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("jsonrpc".to_string()),
                        Just("id".to_string()),
                        Just("method".to_string()),
                        Just("result".to_string()),
                        Just("error".to_string()),
                        "[a-z]{1,4}"
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever a server sends, classifying it answers (never panics), and a message that
        /// classifies as a response carries the id it was sent with.
        #[test]
        fn classify_never_panics(v in any_json()) {
            if let Ok(Incoming::Response { id: Some(id), .. }) = classify(&v) {
                prop_assert_eq!(v["id"].as_u64(), Some(id));
            }
        }

        #[test]
        fn clip_keeps_short_text_and_cuts_long(s in ".{0,300}") {
            let c = clip(&s);
            prop_assert!(c.chars().count() <= 121);
            if s.chars().count() <= 120 { prop_assert_eq!(c, s); }
        }
    }
}
