//! Load with faults: `plansmith serve` (the embedded planner) under concurrent clients over
//! `/v1/plan` and `/v1/chat/completions` (streaming and not), escalating to a teacher stub
//! that answers, is slow, fails and hangs in turn, harvesting to a file whose size limit runs
//! out mid-run (`ulimit -f`: writes past it fail as on a full disk). Checked afterwards:
//! no 5xx but the documented server fault (a harvest write that failed: 500 naming the
//! harvest), 429 once the queue is full (clients wait 25 ms and send again), every acknowledged teacher answer on disk and no
//! torn line, the server's peak memory bounded.
//!
//! `PLANSMITH_LOAD_REQUESTS` (default 400) and `PLANSMITH_LOAD_CONCURRENCY` (default 64) set
//! the size; docs/results/reliability.md has the 10,000-request run.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plansmith_serve::client::Client;
use serde_json::{json, Value};

mod support;

/// An OpenAI-compatible teacher that, call by call, answers, answers late (300 ms), fails
/// (HTTP 500) and hangs (past the server's 1 s teacher timeout). One thread per connection,
/// so a hung call does not stall the others.
fn teacher_stub() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let body = json!({
        "id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "clarify",
                "arguments": "{\"kind\": \"missing_value\", \"question\": \"Which one do you mean?\"}"}}]}}]
    })
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let n = calls.fetch_add(1, Ordering::Relaxed);
            let body = body.clone();
            std::thread::spawn(move || {
                support::read_request(&stream);
                let (status, body) = match n % 4 {
                    0 => ("200 OK", body),
                    1 => {
                        std::thread::sleep(Duration::from_millis(300));
                        ("200 OK", body)
                    }
                    2 => (
                        "500 Internal Server Error",
                        r#"{"error": {"message": "stub failure"}}"#.to_string(),
                    ),
                    _ => {
                        std::thread::sleep(Duration::from_secs(5));
                        return;
                    }
                };
                support::write_json(stream, status, &body);
            });
        }
    });
    url
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak resident memory of a process in KiB (Linux).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Requests in the mix: Pace requests the planner answers, and requests it escalates.
fn request_text(i: usize) -> String {
    const KNOWN: &[&str] = &[
        "open safari",
        "turn on dark mode",
        "scroll down",
        "mute the volume",
    ];
    const UNKNOWN: &[&str] = &[
        "order me a pizza",
        "what is the meaning of life",
        "book a table for two",
    ];
    if i % 4 == 3 {
        format!("{} number {i}", UNKNOWN[i % UNKNOWN.len()])
    } else {
        KNOWN[i % KNOWN.len()].to_string()
    }
}

#[derive(Default)]
struct Tally {
    status: BTreeMap<u16, usize>,
    /// Request texts a teacher answer was returned for (each must be on disk).
    acknowledged: Vec<String>,
    /// Final answers only (a 429 and its retry count as one request).
    latencies_ms: Vec<f64>,
    failures: Vec<String>,
    /// One body of the documented server fault, for the report.
    server_fault: Option<String>,
}

#[test]
fn load_with_a_faulty_teacher_and_a_full_disk() {
    let total = env_usize("PLANSMITH_LOAD_REQUESTS", 400);
    let concurrency = env_usize("PLANSMITH_LOAD_CONCURRENCY", 64);
    let dir = std::env::temp_dir().join(format!("plansmith-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let harvest = dir.join("harvest.jsonl");
    let teacher = format!("openai:{}#stub", teacher_stub());

    // 4 KiB of harvest file before writes fail (SIGXFSZ ignored, so they fail with EFBIG
    // instead of killing the server).
    let script = format!(
        "trap '' XFSZ; ulimit -f 4; exec \"$0\" serve --addr 127.0.0.1:0 --workers 2 --queue 16 \
         --teacher '{teacher}' --teacher-timeout 1 --harvest '{}'",
        harvest.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script, env!("CARGO_BIN_EXE_plansmith")])
        .env_remove("PLANSMITH_API_KEY")
        .stderr(Stdio::inherit());
    let server = support::serve(cmd);
    let pid = server.pid();
    let addr: SocketAddr = server
        .url
        .strip_prefix("http://")
        .expect("an http address")
        .parse()
        .unwrap();

    let tally = Arc::new(Mutex::new(Tally::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (tally, next) = (tally.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                let mut client = Client::new(addr);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let text = request_text(i);
                    let (path, body, stream) = match i % 5 {
                        0..=2 => ("/v1/plan", json!({"request": text}), false),
                        3 => ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": text}]}), false),
                        _ => ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": text}], "stream": true}), true),
                    };
                    // A well-behaved client: on 429 it waits a moment and sends again.
                    let (r, ms) = loop {
                        let t = Instant::now();
                        let r = match client.post_json(path, &body).await {
                            Ok(r) => r,
                            Err(e) => break (Err(e), 0.0),
                        };
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        if r.status == 429 {
                            {
                                let mut tl = tally.lock().unwrap();
                                *tl.status.entry(429).or_default() += 1;
                            }
                            tokio::time::sleep(Duration::from_millis(25)).await;
                            continue;
                        }
                        break (Ok(r), ms);
                    };
                    let r = match r {
                        Ok(r) => r,
                        Err(e) => {
                            tally.lock().unwrap().failures.push(format!("{path}: transport error {e}"));
                            continue;
                        }
                    };
                    let mut tl = tally.lock().unwrap();
                    tl.latencies_ms.push(ms);
                    *tl.status.entry(r.status).or_default() += 1;
                    let text_body = r.text();
                    match r.status {
                        200 => {
                            let source = if stream {
                                // The last data chunk before [DONE] with a `plansmith` object.
                                text_body
                                    .lines()
                                    .filter_map(|l| l.strip_prefix("data: "))
                                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                                    .find_map(|v| v["plansmith"]["source"].as_str().map(String::from))
                                    .unwrap_or_default()
                            } else {
                                let v = r.json();
                                v["source"].as_str().or(v["plansmith"]["source"].as_str()).unwrap_or_default().to_string()
                            };
                            if stream && !text_body.trim_end().ends_with("data: [DONE]") {
                                tl.failures.push(format!("a stream without [DONE]: {text_body}"));
                            }
                            if source == "teacher" {
                                tl.acknowledged.push(text.clone());
                            }
                        }
                        500 if text_body.contains("harvest_failed") => {
                            tl.server_fault.get_or_insert(text_body);
                        }
                        s => tl.failures.push(format!("{path} {s}: {text_body}")),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let wall = started.elapsed();
    let peak_kib = peak_rss_kib(pid);
    drop(server);

    let tally = tally.lock().unwrap();
    let mut lat = tally.latencies_ms.clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let on_disk = std::fs::read_to_string(&harvest).unwrap_or_default();
    let mut torn = 0;
    let mut disk_requests: BTreeMap<String, usize> = BTreeMap::new();
    for line in on_disk.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => {
                *disk_requests
                    .entry(v["request"].as_str().unwrap_or_default().to_string())
                    .or_default() += 1
            }
            Err(_) => torn += 1,
        }
    }
    let mut acked: BTreeMap<String, usize> = BTreeMap::new();
    for t in &tally.acknowledged {
        *acked.entry(t.clone()).or_default() += 1;
    }
    let lost: Vec<&String> = acked
        .iter()
        .filter(|(t, n)| disk_requests.get(*t).copied().unwrap_or(0) < **n)
        .map(|(t, _)| t)
        .collect();
    let report = json!({
        "requests": total, "concurrency": concurrency, "wall_s": wall.as_secs_f64(),
        "status": tally.status, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
        "teacher_answers_acknowledged": tally.acknowledged.len(),
        "harvest_lines_on_disk": on_disk.lines().count(), "torn_lines": torn,
        "harvest_bytes": on_disk.len(), "peak_rss_mib": peak_kib / 1024,
        "server_fault_example": tally.server_fault,
    });
    println!("{report:#}");
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        tally.failures.is_empty(),
        "{} unexpected answers, first: {:?}",
        tally.failures.len(),
        &tally.failures[..tally.failures.len().min(5)]
    );
    let answered: usize = tally
        .status
        .iter()
        .filter(|(s, _)| **s != 429)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(answered, total, "every request got a final HTTP answer");
    assert!(
        tally.status.get(&429).copied().unwrap_or(0) > 0,
        "the queue of 16 never filled: {report}"
    );
    assert!(
        tally.status.get(&500).copied().unwrap_or(0) > 0,
        "the harvest limit was never reached: {report}"
    );
    assert!(
        !tally.acknowledged.is_empty(),
        "no teacher answer got through: {report}"
    );
    assert!(
        lost.is_empty(),
        "acknowledged teacher answers missing from the harvest file: {lost:?}"
    );
    assert_eq!(torn, 0, "torn lines in the harvest file");
    assert!(
        peak_kib > 0 && peak_kib < 1024 * 1024,
        "peak RSS {peak_kib} KiB"
    );
}
