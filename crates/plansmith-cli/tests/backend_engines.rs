//! `plansmith serve --backend`: the model runs on an inference engine, the plan is verified
//! here. The engine is the real llama.cpp server from `llama-cpp-python[server]` (installed by
//! `.ci/run`) serving the SmolLM2 GGUF from `scripts/assets.sh`; the failure cases (a dead
//! engine, a slow one, one that answers nonsense) are stubs started by the test.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{read_request, serve, write_json, Process, Served};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn post(url: &str, body: &Value) -> (u16, Value) {
    let mut resp = agent().post(url).send_json(body).expect("POST");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")),
    )
}

fn serve_backend(spec: &str, extra: &[&str]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--backend", spec])
        .args(extra);
    serve(cmd)
}

/// One tool the 135M model calls reliably when asked plainly.
fn tools() -> Value {
    json!([{"type": "function", "function": {
        "name": "open_app",
        "description": "Open an application by name.",
        "parameters": {"type": "object", "properties": {"app": {"type": "string"}}, "required": ["app"]}
    }}])
}

/// llama-cpp-python's server on SmolLM2, ready to answer.
fn llama_cpp_server() -> (Process, String) {
    let model = repo().join("assets/smollm2.gguf");
    assert!(
        model.exists(),
        "{} is missing: run scripts/assets.sh",
        model.display()
    );
    let port = free_port();
    let child = Command::new("python3")
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(&model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        // logprobs need the logits of every position; a small context keeps it light
        .args(["--n_ctx", "2048", "--logits_all", "true", "--n_threads", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python3 -m llama_cpp.server (pip install 'llama-cpp-python[server]', see .ci/run)");
    wait_ready(
        Process(child),
        format!("http://127.0.0.1:{port}"),
        Instant::now(),
    )
}

/// Poll the engine's `/v1/models` until it answers (loading the model takes seconds).
fn wait_ready(mut process: Process, url: String, start: Instant) -> (Process, String) {
    loop {
        if agent()
            .get(&format!("{url}/v1/models"))
            .call()
            .is_ok_and(|r| r.status().as_u16() == 200)
        {
            return (process, url);
        }
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("llama_cpp.server exited with {status}: is llama-cpp-python[server] installed?");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "llama_cpp.server did not come up on {url} within 120 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn llama_cpp_server_plans_are_verified_here_and_cut_off_replies_escalate() {
    let (_engine, engine_url) = llama_cpp_server();
    let served = serve_backend(&format!("llamacpp:{engine_url}"), &[]);
    let (status, out) = post(
        &format!("{}/v1/plan", served.url),
        &json!({"request": "launch Safari", "tools": tools(), "tool_choice": "required", "max_calls": 1}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["escalated"], false, "{out}");
    assert_eq!(out["source"], "model", "{out}");
    assert_eq!(out["calls"][0]["name"], "open_app", "{out}");
    let app = out["calls"][0]["arguments"]["app"].as_str().unwrap_or("");
    assert!(app.to_lowercase().contains("safari"), "{out}");
    let confidence = out["confidence"]
        .as_f64()
        .expect("a confidence from the logprobs");
    assert!(confidence < 0.0 && confidence > -20.0, "{out}");
    let engine_ms = out["engine_ms"].as_f64().expect("engine_ms");
    assert!(
        engine_ms > 0.0 && engine_ms <= out["latency_ms"].as_f64().unwrap(),
        "{out}"
    );

    // The OpenAI surface answers through the same engine.
    let (status, chat) = post(
        &format!("{}/v1/chat/completions", served.url),
        &json!({"model": "plansmith", "messages": [{"role": "user", "content": "launch Safari"}],
                "tools": tools(), "tool_choice": "required", "parallel_tool_calls": false}),
    );
    assert_eq!(status, 200, "{chat}");
    assert_eq!(
        chat["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "open_app",
        "{chat}"
    );

    // A reply the engine stops at its token budget does not parse: it escalates (no teacher
    // here, so no plan), it is never passed on.
    let (status, out) = post(
        &format!("{}/v1/plan", served.url),
        &json!({"request": "launch Safari", "tools": tools(), "tool_choice": "required", "max_tokens": 4}),
    );
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["escalated"], true, "{out}");
    assert_eq!(out["calls"], json!([]), "{out}");
    assert!(
        out["reason"].as_str().unwrap().contains("token budget"),
        "{out}"
    );

    // A floor above the plan's confidence escalates it too.
    let strict = serve_backend(&format!("llamacpp:{engine_url}"), &["--floor", "-0.0001"]);
    let (_, out) = post(
        &format!("{}/v1/plan", strict.url),
        &json!({"request": "launch Safari", "tools": tools(), "tool_choice": "required", "max_calls": 1}),
    );
    assert_eq!(out["escalated"], true, "{out}");
    assert!(
        out["reason"].as_str().unwrap().contains("below floor"),
        "{out}"
    );
}

#[test]
fn a_dead_backend_is_a_502_naming_its_address() {
    // A port nothing listens on.
    let port = free_port();
    let served = serve_backend(&format!("llamacpp:http://127.0.0.1:{port}"), &[]);
    let (status, out) = post(
        &format!("{}/v1/plan", served.url),
        &json!({"request": "open safari", "tools": tools()}),
    );
    assert_eq!(status, 502, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("unreachable"), "{message}");
}

/// A stub engine answering every connection with `reply` after `delay`.
fn stub_engine(delay: Duration, status: &'static str, reply: Value) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let reply = reply.to_string();
            std::thread::spawn(move || {
                read_request(&stream);
                std::thread::sleep(delay);
                write_json(stream, status, &reply);
            });
        }
    });
    url
}

fn chat_reply(content: &str) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": content},
        "logprobs": {"content": [{"token": "x", "logprob": -0.1}]}}]})
}

#[test]
fn a_slow_backend_is_a_504_naming_its_address() {
    let url = stub_engine(Duration::from_secs(5), "200 OK", chat_reply("[]"));
    let served = serve_backend(&format!("llamacpp:{url}"), &["--backend-timeout", "1"]);
    let start = Instant::now();
    let (status, out) = post(
        &format!("{}/v1/plan", served.url),
        &json!({"request": "open safari", "tools": tools()}),
    );
    assert_eq!(status, 504, "{out}");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "waited {:?}",
        start.elapsed()
    );
    let message = out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(url.trim_start_matches("http://")),
        "{message}"
    );
}

#[test]
fn engine_errors_and_unverifiable_replies_never_pass() {
    // An engine error status is a 502 with the engine's words.
    let url = stub_engine(
        Duration::ZERO,
        "400 Bad Request",
        json!({"error": {"message": "grammar rejected"}}),
    );
    let served = serve_backend(&format!("llamacpp:{url}"), &[]);
    let (status, out) = post(
        &format!("{}/v1/plan", served.url),
        &json!({"request": "open safari", "tools": tools()}),
    );
    assert_eq!(status, 502, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("grammar rejected"),
        "{out}"
    );

    // An engine that ignores the constraint: a call of a tool not in the catalog, and text
    // that is no plan at all, both escalate.
    for content in [
        r#"[{"name": "delete_everything", "arguments": {}}]"#,
        "Sure! I will open Safari for you.",
    ] {
        let url = stub_engine(Duration::ZERO, "200 OK", chat_reply(content));
        let served = serve_backend(&format!("llamacpp:{url}"), &[]);
        let (status, out) = post(
            &format!("{}/v1/plan", served.url),
            &json!({"request": "open safari", "tools": tools()}),
        );
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["escalated"], true, "{content}: {out}");
        assert_eq!(out["calls"], json!([]), "{content}: {out}");
        assert!(
            out["reason"].as_str().unwrap().contains("invalid plan"),
            "{content}: {out}"
        );
    }

    // Scoring needs logits the engine does not give: a 400 that says so.
    let (status, out) = post(
        &format!("{}/v1/score", served.url),
        &json!({"request": "open safari", "calls": [{"name": "open_app", "arguments": {"app": "Safari"}}]}),
    );
    assert_eq!(status, 400, "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("remote backend"),
        "{out}"
    );
}

#[test]
fn bad_backend_specs_are_refused_at_start_with_exit_2() {
    for (spec, says) in [
        ("tgi:http://h:1#m", "unknown dialect `tgi`"),
        ("vllm:http://h:1", "name the model"),
        ("vllm:localhost:8000#m", "not an http(s) URL"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_plansmith"))
            .args(["plan", "--backend", spec, "open safari"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says) && err.contains(spec), "{spec}: {err}");
    }
}

/// A cascade hop on an engine: below its floor, or with its engine down, the request goes on
/// to the teacher, and the hop's report says why.
#[test]
fn a_cascade_hop_on_an_engine_passes_on_what_it_cannot_verify() {
    let dir =
        std::env::temp_dir().join(format!("plansmith-backend-cascade-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let teacher = dir.join("teacher.jsonl");
    std::fs::write(
        &teacher,
        format!(
            "{}\n",
            json!({"request": "launch Safari", "calls": [{"name": "open_app", "arguments": {"app": "Safari"}}],
                   "tools": tools()})
        ),
    )
    .unwrap();
    // An engine sure of nothing (every token at -5), and one nothing listens on.
    let unsure = stub_engine(
        Duration::ZERO,
        "200 OK",
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": r#"[{"name": "open_app", "arguments": {"app": "Safari"}}]"#},
            "logprobs": {"content": [{"token": "x", "logprob": -5.0}]}}]}),
    );
    let dead = format!("http://127.0.0.1:{}", free_port());
    for (engine, says) in [(unsure, "below floor"), (dead.clone(), "unreachable")] {
        let file = dir.join("cascade.json");
        std::fs::write(
            &file,
            json!({"hops": [{"name": "engine", "backend": format!("llamacpp:{engine}"), "floor": -1.0}],
                   "teacher": format!("traces:{}", teacher.display())})
            .to_string(),
        )
        .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_plansmith"));
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--cascade"])
            .arg(&file);
        let served = serve(cmd);
        let (status, out) = post(
            &format!("{}/v1/plan", served.url),
            &json!({"request": "launch Safari", "tools": tools()}),
        );
        assert_eq!(status, 200, "{out}");
        assert_eq!(out["source"], "teacher", "{out}");
        assert_eq!(out["hop"], "teacher", "{out}");
        assert_eq!(out["calls"][0]["arguments"]["app"], "Safari", "{out}");
        let hop = &out["hops"][0];
        assert_eq!(hop["hop"], "engine", "{out}");
        assert_eq!(hop["accepted"], false, "{out}");
        assert!(hop["reason"].as_str().unwrap().contains(says), "{out}");
    }
    // A bad backend in a cascade file is refused at start, naming the hop.
    let file = dir.join("bad.json");
    std::fs::write(
        &file,
        json!({"hops": [{"backend": "tgi:http://h#m"}]}).to_string(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_plansmith"))
        .args(["plan", "--cascade"])
        .arg(&file)
        .arg("launch Safari")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hops[0]") && err.contains("unknown dialect"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
