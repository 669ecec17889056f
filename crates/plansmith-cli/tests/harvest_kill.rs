//! A kill -9 while harvesting loses no acknowledged trace: every plan the CLI printed (which it
//! does only after the escalation's trace was appended and fsynced) is in the harvest file.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn kill_9_loses_no_acknowledged_trace() {
    let dir = std::env::temp_dir().join(format!("plansmith-kill9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let teacher = dir.join("teacher.jsonl");
    let harvest = dir.join("harvest.jsonl");
    let _ = std::fs::remove_file(&harvest);
    let requests: Vec<String> = (0..2000)
        .map(|i| format!("open the app number {i}"))
        .collect();
    let lines: String = requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({"request": r, "calls": [{"name": "open",
                "arguments": {"target": {"type": "app", "label": format!("App {i}")}}}], "source": "teacher"})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&teacher, lines).unwrap();
    // An impossible floor sends every request to the teacher, so every one is harvested.
    let mut child = Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(["plan", "--json", "--floor", "1e9", "--teacher"])
        .arg(format!("traces:{}", teacher.display()))
        .arg("--harvest")
        .arg(&harvest)
        .args(&requests)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    while acked.len() < 40 {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "plansmith stopped early"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["source"], "teacher", "{v}");
        acked.push(v["request"].as_str().unwrap().to_string());
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let text = std::fs::read_to_string(&harvest).unwrap();
    let complete: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        complete.len() >= acked.len(),
        "{} harvested < {} acknowledged",
        complete.len(),
        acked.len()
    );
    for (i, r) in acked.iter().enumerate() {
        assert_eq!(complete[i]["request"], r.as_str());
        assert_eq!(complete[i]["source"], "harvest");
    }
    // At most the line being written at the kill is torn.
    assert!(text.lines().count() - complete.len() <= 1);
}
