//! `plansmith serve` end to end with the official `openai` Python client: train a tiny
//! planner, save it, start the binary on a free port, run
//! crates/plansmith-serve/tests/e2e_openai.py against it. Fails loudly when `python3` or the
//! `openai` package is missing (CI installs it from scripts/requirements-ci.txt).

#[path = "../../plansmith-serve/tests/common/mod.rs"]
mod common;

mod support;

use std::process::{Command, Stdio};

#[test]
fn openai_python_client_against_plansmith_serve() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = std::env::temp_dir().join(format!("plansmith-serve-e2e-{}", std::process::id()));
    let planner_dir = dir.join("tiny");
    common::train_tiny(f32::MIN)
        .save(&planner_dir)
        .expect("save the tiny planner");

    let key = "e2e-secret";
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
    cmd.args([
        "serve",
        "--planner",
        planner_dir.to_str().unwrap(),
        "--addr",
        "127.0.0.1:0",
        "--workers",
        "2",
    ])
    .args(["--floor", "-1e30", "--model-id", "tiny-e2e"])
    .env("PLANSMITH_API_KEY", key)
    .stderr(Stdio::inherit());
    let server = support::serve(cmd);
    let url = server.url.clone();
    let line = server.banner.clone();
    assert!(line.contains("tiny-e2e"), "{line}");

    let out = Command::new("python3")
        .arg(format!("{root}/crates/plansmith-serve/tests/e2e_openai.py"))
        .args([
            "--base-url",
            &format!("{url}/v1"),
            "--api-key",
            key,
            "--model",
            "tiny-e2e",
        ])
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .expect("python3 must be installed to run the OpenAI client end-to-end test");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "e2e_openai.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}
