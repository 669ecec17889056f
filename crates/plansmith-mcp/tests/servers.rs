//! plansmith-mcp against real servers: the MCP reference filesystem and everything servers from
//! npm (installed by scripts/assets.sh under assets/npm/), and a small Python server that
//! misbehaves on purpose (tests/stub_server.py).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use plansmith_mcp::{catalog, McpError, McpServer};
use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn npm_server(name: &str) -> String {
    let bin = root().join("assets/npm/node_modules/.bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `bash scripts/assets.sh` (it needs npm, Node.js 20+)",
        bin.display()
    );
    bin.display().to_string()
}

fn stub(mode: &str) -> String {
    format!(
        "python3 {} {mode}",
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/stub_server.py")
            .display()
    )
}

const TIMEOUT: Duration = Duration::from_secs(20);

#[test]
fn filesystem_server_lists_and_calls() {
    let dir = std::env::temp_dir().join(format!("plansmith-mcp-fs-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    let cmd = format!("{} {}", npm_server("mcp-server-filesystem"), dir.display());
    let server = McpServer::start(&cmd, TIMEOUT).unwrap();
    assert_eq!(server.name(), "filesystem");
    let info = server.info().unwrap();
    assert!(info.list_changed);
    let tools = server.list_tools().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"list_directory"), "{names:?}");
    let u = catalog::union(&[(server.name().to_string(), tools.clone())], |_| Ok(())).unwrap();
    assert!(u.catalog.tools.len() >= 10, "{:?}", u.left_out);
    assert!(!u.routes["list_directory"].destructive);
    assert!(u.routes["write_file"].destructive);
    let r = server
        .call_tool(
            "list_directory",
            &json!({"path": dir.display().to_string()}),
        )
        .unwrap();
    assert!(!r.is_error);
    let text = r.text();
    assert!(
        text.contains("[FILE] notes.txt") && text.contains("[DIR] sub"),
        "{text}"
    );
    // A tool's own failure is its answer, not a server error.
    let r = server
        .call_tool("read_text_file", &json!({"path": "/etc/passwd"}))
        .unwrap();
    assert!(r.is_error, "{}", r.text());
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn everything_server_notifies_before_answering() {
    let server = McpServer::start(
        &format!("{} stdio", npm_server("mcp-server-everything")),
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(server.name(), "everything");
    let tools = server.list_tools().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "echo"));
    let r = server
        .call_tool("echo", &json!({"message": "hi there"}))
        .unwrap();
    assert!(r.text().contains("hi there"), "{}", r.text());
}

/// A server built with the official Python SDK: its tool list grows mid-run, it says so, and
/// the new tool is listed and called.
#[test]
fn python_sdk_server_changes_its_tools_mid_run() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk_server.py");
    let server = McpServer::start(&format!("python3 {}", script.display()), TIMEOUT)
        .expect("start the Python SDK server (pip install -r scripts/requirements-ci.txt)");
    let names = |s: &McpServer| -> Vec<String> {
        let mut n: Vec<String> = s
            .list_tools()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&server), vec!["echo", "grow"]);
    let echoed = server.call_tool("echo", &json!({"text": "a b"})).unwrap();
    assert!(!echoed.is_error);
    assert_eq!(echoed.text(), "a b");
    assert!(!server.take_list_changed());
    assert_eq!(
        server.call_tool("grow", &json!({})).unwrap().text(),
        "added shout"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while !server.take_list_changed() {
        assert!(Instant::now() < until, "no list_changed seen");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(names(&server), vec!["echo", "grow", "shout"]);
    assert_eq!(
        server
            .call_tool("shout", &json!({"text": "hi"}))
            .unwrap()
            .text(),
        "HI"
    );
}

#[test]
fn pagination_list_changed_and_server_pings() {
    let server = McpServer::start(&stub("ok"), TIMEOUT).unwrap();
    let names = |s: &McpServer| -> Vec<String> {
        s.list_tools()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&server), vec!["echo", "grow", "fail"], "both pages");
    assert_eq!(
        server
            .call_tool("echo", &json!({"text": "a b"}))
            .unwrap()
            .text(),
        "a b"
    );
    assert!(!server.take_list_changed());
    server.call_tool("grow", &json!({})).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !server.take_list_changed() {
        assert!(Instant::now() < until, "no list_changed seen");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(names(&server), vec!["echo", "grow", "fail", "grown"]);
    assert!(server.call_tool("fail", &json!({})).unwrap().is_error);
    let e = server.call_tool("nope", &json!({}));
    assert!(
        e.unwrap().is_error,
        "the stub reports unknown tools as tool errors"
    );
}

#[test]
fn bad_servers_are_clear_errors_naming_the_server() {
    let fail = |cmd: &str, timeout: Duration| match McpServer::start(cmd, timeout) {
        Ok(s) => s
            .list_tools()
            .and_then(|_| s.call_tool("echo", &json!({"text": "x"})))
            .expect_err("the server misbehaved"),
        Err(e) => e,
    };
    let e = fail("/nonexistent/mcp-server-gone --flag", TIMEOUT);
    assert!(matches!(e, McpError::Spawn { .. }), "{e}");
    assert_eq!(e.server(), "gone");
    let e = fail("", TIMEOUT);
    assert!(matches!(e, McpError::EmptyCommand { .. }), "{e}");

    let e = fail(&stub("version"), TIMEOUT);
    let msg = e.to_string();
    assert!(matches!(e, McpError::Version { .. }), "{msg}");
    assert!(
        msg.contains("`stub_server`") && msg.contains("1999-01-01") && msg.contains("2025-06-18"),
        "{msg}"
    );

    let e = fail(&stub("garbage"), TIMEOUT);
    assert!(matches!(e, McpError::Malformed { .. }), "{e}");
    assert!(
        e.to_string().contains("not JSON") && e.to_string().contains("this is not json"),
        "{e}"
    );

    let started = Instant::now();
    let e = fail(&stub("hang"), Duration::from_millis(5000));
    assert!(matches!(e, McpError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("`tools/list` within 5000 ms"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20));

    let e = fail(&stub("exit"), TIMEOUT);
    let msg = e.to_string();
    assert!(matches!(e, McpError::Exited { .. }), "{msg}");
    assert!(
        msg.contains("tools/call") && msg.contains("3") && msg.contains("stub: giving up"),
        "{msg}"
    );
}

/// One bad server does not stop the others: the union is made of the servers that answered.
#[test]
fn a_bad_server_leaves_the_others_working() {
    let cmds = [stub("ok"), stub("garbage")];
    let mut listed = Vec::new();
    let mut errors = Vec::new();
    let mut servers = Vec::new();
    for c in &cmds {
        match McpServer::start(c, TIMEOUT).and_then(|s| {
            let t = s.list_tools()?;
            Ok((s, t))
        }) {
            Ok((s, t)) => {
                listed.push((s.name().to_string(), t));
                servers.push(s);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert_eq!(errors.len(), 1);
    let u = catalog::union(&listed, |_| Ok(())).unwrap();
    assert_eq!(u.catalog.tools.len(), 3);
    assert_eq!(
        servers[0]
            .call_tool("echo", &json!({"text": "ok"}))
            .unwrap()
            .text(),
        "ok"
    );
}

/// The streamable HTTP transport against the everything server (`streamableHttp` mode, answers
/// in server-sent events with a session id); a dead address is a clear error.
#[test]
fn streamable_http_transport() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(npm_server("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let until = Instant::now() + Duration::from_secs(30);
    let server = loop {
        match McpServer::start(&url, TIMEOUT) {
            Ok(s) => break s,
            Err(McpError::Connect { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(server.name(), format!("127_0_0_1_{port}"));
    let tools = server.list_tools().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "get-sum"), "{tools:?}");
    let r = server
        .call_tool("get-sum", &json!({"a": 2, "b": 40}))
        .unwrap();
    assert!(r.text().contains("42"), "{}", r.text());
    drop(server);
    let _ = child.kill();
    let _ = child.wait();

    let e = McpServer::start(&url, TIMEOUT)
        .err()
        .expect("nothing listens any more");
    assert!(matches!(e, McpError::Connect { .. }), "{e}");
    assert!(e.to_string().contains(&url), "{e}");
}
