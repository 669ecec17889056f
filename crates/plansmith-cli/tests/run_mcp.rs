//! `plansmith run --mcp`: the MCP reference filesystem server (from npm, installed by
//! scripts/assets.sh) executes verified calls; destructive tools need --yes; bad servers and
//! bad plans are clear errors.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

fn filesystem_server(dir: &std::path::Path) -> String {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../assets/npm/node_modules/.bin/mcp-server-filesystem");
    assert!(
        bin.exists(),
        "{} is missing: run `bash scripts/assets.sh` (it needs npm, Node.js 20+)",
        bin.display()
    );
    format!("{} {}", bin.display(), dir.display())
}

fn plansmith(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn run_executes_verified_calls_on_mcp_servers() {
    let dir = std::env::temp_dir().join(format!("plansmith-run-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "hello").unwrap();
    let fs = filesystem_server(&dir);
    let d = dir.display().to_string();

    // A given plan, checked against the server's catalog, then called.
    let plan = format!(r#"[{{"name":"list_directory","arguments":{{"path":"{d}"}}}}]"#);
    let o = plansmith(&["run", "--mcp", &fs, "--plan", &plan, "list it"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("[FILE] a.txt"), "{out}");

    // --json: the plan, then each call's result.
    let o = plansmith(&["run", "--json", "--mcp", &fs, "--plan", &plan, "list it"]);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["plan"][0]["name"], "list_directory");
    assert_eq!(lines[1]["server"], "filesystem");
    assert_eq!(lines[1]["is_error"], false);

    // A destructive tool: refused without --yes (no terminal to ask), run with it.
    let write = format!(
        r#"[{{"name":"write_file","arguments":{{"path":"{d}/b.txt","content":"written"}}}}]"#
    );
    let o = plansmith(&["run", "--mcp", &fs, "--plan", &write, "write b"]);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("pass --yes"), "{out}");
    assert!(!dir.join("b.txt").exists());
    let o = plansmith(&["run", "--yes", "--mcp", &fs, "--plan", &write, "write b"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).unwrap(),
        "written"
    );

    // --dry-run calls nothing.
    let again = write.replace("b.txt", "c.txt");
    let o = plansmith(&[
        "run",
        "--dry-run",
        "--mcp",
        &fs,
        "--plan",
        &again,
        "write c",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!dir.join("c.txt").exists());

    // A plan the catalog refuses is bad input, named.
    let o = plansmith(&[
        "run",
        "--mcp",
        &fs,
        "--plan",
        r#"[{"name":"list_directory","arguments":{}}]"#,
        "x",
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("--plan does not fit") && err.contains("\"path\" is a required property"),
        "{err}"
    );

    // A server that cannot start is reported; the others keep working; none at all is exit 2.
    let o = plansmith(&[
        "run",
        "--mcp",
        &fs,
        "--mcp",
        "/nonexistent/mcp-server-gone",
        "--plan",
        &plan,
        "list",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("MCP server `gone`: cannot start"), "{err}");
    assert!(out.contains("[FILE] a.txt"));
    let o = plansmith(&["run", "--mcp", "/nonexistent/mcp-server-gone", "list"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("no MCP server could be used"), "{err}");

    std::fs::remove_dir_all(&dir).unwrap();
}

fn tool_names(url: &str) -> Vec<String> {
    let mut resp = ureq::get(&format!("{url}/v1/tools")).call().unwrap();
    let v: serde_json::Value = resp.body_mut().read_json().unwrap();
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// `serve --mcp`: the served catalog is the MCP servers' tools, and follows a server that
/// announces a change (the stub adds a tool a second after it starts).
#[test]
fn serve_takes_its_catalog_from_mcp_servers_and_follows_changes() {
    let stub = format!(
        "python3 {} grows",
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../plansmith-mcp/tests/stub_server.py")
            .display()
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
    cmd.args([
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-ui",
    ])
    .args(["--mcp", &stub, "--mcp", "/nonexistent/mcp-server-gone"])
    .env_remove("PLANSMITH_API_KEY")
    .stderr(std::process::Stdio::inherit());
    let served = support::serve(cmd);
    let url = served.url.clone();
    let first = tool_names(&url);
    assert!(
        first.starts_with(&["echo".to_string(), "grow".into(), "fail".into()]),
        "{first:?}"
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let names = tool_names(&url);
        if names.contains(&"grown".to_string()) {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the new tool never appeared: {names:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
