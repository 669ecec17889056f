//! The CLI as a user meets it: exit codes, JSON output, error messages.

use std::process::{Command, Output};

fn plansmith(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run plansmith")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn catalog_check_json() {
    let o = plansmith(&["catalog", "check", "examples/pace/tools.json", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["tools"], 10);
    assert_eq!(v["format"], "openai");
    assert_eq!(v["hash"].as_str().unwrap().len(), 64);
}

#[test]
fn bad_catalog_exits_2_with_path() {
    let dir = std::env::temp_dir().join(format!("plansmith-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.json");
    std::fs::write(
        &file,
        r#"{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"not":{}}}}}]}"#,
    )
    .unwrap();
    let o = plansmith(&["catalog", "check", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("unsupported schema feature `not` at $.tools[0].inputSchema.properties.x"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let o = plansmith(&["catalog", "check", "/definitely/not/here.json"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn validate_exit_codes() {
    let tools = "examples/pace/tools.json";
    let ok = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--request",
        "scroll down 3 times",
        "perform(action=scroll; direction=down; amount=3)",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    let bad = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--json",
        "--request",
        "scroll down 3 times",
        "perform(action=scroll; direction=sideways; amount=300)",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&bad)).unwrap();
    assert_eq!(v["valid"], false);
    let paths: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&"/direction") && paths.contains(&"/amount"),
        "{paths:?}"
    );
    let drift = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--request",
        "where is order 4242",
        "query_memory(query=order 4202)",
    ]);
    assert_eq!(drift.status.code(), Some(1));
    assert!(stdout(&drift).contains("not copied from the request"));
    let unparsable = plansmith(&["validate", "--tools", tools, "open(target"]);
    assert_eq!(unparsable.status.code(), Some(2));
    assert!(stderr(&unparsable).contains("cannot parse plan"));
    let envelope = plansmith(&[
        "validate",
        "--tools",
        tools,
        "--syntax",
        "envelope",
        r#"{"verb":"say","args":{"text":"hi"}}"#,
    ]);
    assert_eq!(envelope.status.code(), Some(0), "{}", stderr(&envelope));
}
