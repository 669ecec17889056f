//! Teachers against real local endpoints: a spawned HTTP server and a JSON-lines command.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use plansmith_core::Catalog;
use plansmith_planner::teacher::{CommandTeacher, OpenAiTeacher, Teacher, TeacherError};

fn catalog() -> Catalog {
    Catalog::from_json_str(
        r#"[{"type":"function","function":{"name":"open","parameters":{"type":"object",
        "properties":{"app":{"type":"string"}},"required":["app"],"additionalProperties":false}}}]"#,
    )
    .unwrap()
}

/// A one-route HTTP server: the n-th request gets `responses[min(n, last)]`
/// as (status, body, delay).
fn serve(responses: Vec<(u16, String, Duration)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let (status, body, delay) = responses[n.min(responses.len() - 1)].clone();
            // Read the request head and body (Content-Length) before answering.
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body_in = vec![0u8; len];
            let _ = reader.read_exact(&mut body_in);
            std::thread::sleep(delay);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, hits)
}

fn ok_body(name: &str, args: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": args}}]}}]})
    .to_string()
}

const NOW: Duration = Duration::ZERO;

#[test]
fn endpoint_answer_is_validated_and_returned() {
    let (url, _) = serve(vec![(200, ok_body("open", r#"{"app":"Safari"}"#), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    let plan = t.plan("open safari", &catalog()).unwrap();
    assert_eq!(plan.calls[0].name, "open");
    assert_eq!(plan.calls[0].arguments["app"], "Safari");
}

#[test]
fn server_errors_are_retried_then_succeed() {
    let (url, hits) = serve(vec![
        (500, "{}".into(), NOW),
        (503, "busy".into(), NOW),
        (200, ok_body("open", r#"{"app":"Mail"}"#), NOW),
    ]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    assert_eq!(
        t.plan("open mail", &catalog()).unwrap().calls[0].arguments["app"],
        "Mail"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 3);
}

#[test]
fn failures_are_errors_never_made_up_plans() {
    let cat = catalog();
    let (url, hits) = serve(vec![(500, "down".into(), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    match t.plan("x", &cat) {
        Err(TeacherError::Endpoint {
            attempts: 3,
            message,
            ..
        }) => assert!(message.contains("HTTP 500"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(hits.load(Ordering::SeqCst), 3);

    let (url, _) = serve(vec![(200, "{not json".into(), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    assert!(matches!(
        t.plan("x", &cat),
        Err(TeacherError::Endpoint { .. })
    ));

    let (url, _) = serve(vec![(200, ok_body("delete_everything", "{}"), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    match t.plan("x", &cat) {
        Err(TeacherError::InvalidAnswer(m)) => assert!(m.contains("unknown tool"), "{m}"),
        other => panic!("{other:?}"),
    }

    let (url, _) = serve(vec![(200, ok_body("open", r#"{"app": 3}"#), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    assert!(matches!(
        t.plan("x", &cat),
        Err(TeacherError::InvalidAnswer(_))
    ));

    let (url, _) = serve(vec![(400, r#"{"error":{"message":"bad"}}"#.into(), NOW)]);
    let t = OpenAiTeacher::new(&url, "m", None, Duration::from_secs(5));
    match t.plan("x", &cat) {
        Err(TeacherError::Endpoint { attempts: 1, .. }) => {}
        other => panic!("a 4xx is not retried: {other:?}"),
    }
}

#[test]
fn slow_endpoint_times_out() {
    let (url, _) = serve(vec![(
        200,
        ok_body("open", r#"{"app":"Mail"}"#),
        Duration::from_secs(3),
    )]);
    let mut t = OpenAiTeacher::new(&url, "m", None, Duration::from_millis(300));
    t.retries = 0;
    let start = std::time::Instant::now();
    assert!(matches!(
        t.plan("x", &catalog()),
        Err(TeacherError::Endpoint { .. })
    ));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn command_teacher_speaks_json_lines() {
    let cat = catalog();
    let t = CommandTeacher::new(
        r#"while read line; do echo '{"calls":[{"name":"open","arguments":{"app":"Notes"}}]}'; done"#,
        Duration::from_secs(5),
    );
    for _ in 0..3 {
        assert_eq!(
            t.plan("open notes", &cat).unwrap().calls[0].arguments["app"],
            "Notes"
        );
    }
    let garbage = CommandTeacher::new(
        "while read line; do echo nonsense; done",
        Duration::from_secs(5),
    );
    assert!(matches!(
        garbage.plan("x", &cat),
        Err(TeacherError::InvalidAnswer(_))
    ));
    let silent = CommandTeacher::new("sleep 5", Duration::from_millis(200));
    match silent.plan("x", &cat) {
        Err(TeacherError::Command { message, .. }) => {
            assert!(message.contains("no answer"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let dead = CommandTeacher::new("exit 0", Duration::from_secs(2));
    assert!(matches!(
        dead.plan("x", &cat),
        Err(TeacherError::Command { .. })
    ));
}
