//! `eval bfcl --out DIR` keeps a journal of the items it has scored, so a run stopped part way
//! (here: an endpoint that starts refusing after four answers) resumes where it stopped — the
//! items already scored are not asked again — and a journal of another run is refused.

mod support;

use support::{plansmith, text};

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An OpenAI-compatible endpoint that answers "no call" to every request but the fifth, which
/// it refuses (400: a run stops there); returns its URL and how many requests it was sent.
fn endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let reply = serde_json::json!({
        "id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "I need to know more."}}]
    })
    .to_string();
    let refusal = r#"{"error":{"message":"not this one"}}"#;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            support::read_request(&stream);
            if counter.fetch_add(1, Ordering::SeqCst) == 4 {
                support::write_json(stream, "400 Bad Request", refusal);
            } else {
                support::write_json(stream, "200 OK", &reply);
            }
        }
    });
    (url, asked)
}

#[test]
fn a_stopped_run_resumes_where_it_stopped_and_another_runs_journal_is_refused() {
    let dir = std::env::temp_dir().join(format!("plansmith-bfcl-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_string_lossy().into_owned();
    let run = |url: &str, model: &str| {
        plansmith(&[
            "eval",
            "bfcl",
            "--data-dir",
            "eval/handwritten",
            "--categories",
            "handwritten_clarify",
            "--limit",
            "6",
            "--endpoint",
            url,
            "--model",
            model,
            "--out",
            &out,
        ])
    };
    let journal = dir.join("items.partial.jsonl");

    // Four answers, then the endpoint refuses: the run stops (exit 2) with four items kept.
    let (url, asked) = endpoint();
    let o = run(&url, "m");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(asked.load(Ordering::SeqCst), 5);
    let kept = std::fs::read_to_string(&journal).expect("the journal stays");
    assert_eq!(kept.lines().count(), 1 + 4, "{kept}");
    assert!(!dir.join("report.json").exists());

    // Another model is another run: refused, naming the journal, and the journal is untouched.
    let o = run(&url, "another-model");
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("items.partial.jsonl"), "{err}");
    assert!(err.contains("another run's"), "{err}");
    assert_eq!(asked.load(Ordering::SeqCst), 5);
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), kept);

    // The same run again asks only the two items left, and writes the whole report.
    let o = run(&url, "m");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("resuming: 4 of 6 items"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(asked.load(Ordering::SeqCst), 5 + 2);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        report["categories"]["handwritten_clarify"]["n"], 6,
        "{report}"
    );
    let items = std::fs::read_to_string(dir.join("items.jsonl")).unwrap();
    assert_eq!(items.lines().count(), 6);
    assert!(!journal.exists(), "a finished run leaves no journal");
    std::fs::remove_dir_all(&dir).unwrap();
}
