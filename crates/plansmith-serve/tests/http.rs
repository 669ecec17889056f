//! The server over real HTTP on 127.0.0.1:0: the bad-input matrix, tool_choice variants,
//! streaming, the native route, metrics, auth, limits.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::Method;
use plansmith_serve::client::{Client, HttpResponse};
use plansmith_serve::{spawn, RunningServer, ServeConfig};
use serde_json::{json, Value};

use common::{planner, user, weather_tools};

async fn start(tweak: impl FnOnce(&mut ServeConfig)) -> RunningServer {
    let mut config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 2,
        queue: 32,
        max_body: 64 * 1024,
        model_id: "tiny-pace".into(),
        ..ServeConfig::default()
    };
    tweak(&mut config);
    spawn(planner(), config).await.expect("server starts")
}

async fn healthy(c: &mut Client) {
    let r = c.get("/health").await.expect("health answers");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "ok");
}

/// The error body must be OpenAI-shaped.
fn error_of(r: &HttpResponse) -> Value {
    let v = r.json();
    let e = &v["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "no error message: {}",
        r.text()
    );
    assert!(e["type"].is_string(), "no error type: {}", r.text());
    assert!(
        e.get("param").is_some() && e.get("code").is_some(),
        "{}",
        r.text()
    );
    e.clone()
}

fn chat(extra: Value) -> Value {
    let mut body = json!({"model": "tiny-pace", "messages": user("what is the weather in Paris")});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_the_server_stays_up() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let big = format!(
        "{{\"messages\": [{{\"role\": \"user\", \"content\": \"{}\"}}]}}",
        "a".repeat(100 * 1024)
    );
    // (what, route, raw body, status, param, message fragment)
    type Case<'a> = (&'a str, &'a str, String, u16, Option<&'a str>, &'a str);
    let cases: Vec<Case> = vec![
        ("malformed JSON", "/v1/chat/completions", "{\"messages\": [".into(), 400, None, "not valid JSON"),
        ("empty body", "/v1/chat/completions", "".into(), 400, None, "empty"),
        ("not an object", "/v1/chat/completions", "[1, 2]".into(), 400, None, "must be a JSON object"),
        ("messages wrong type", "/v1/chat/completions", chat(json!({"messages": "hi"})).to_string(), 400, Some("messages"), "must be an array"),
        ("empty messages", "/v1/chat/completions", chat(json!({"messages": []})).to_string(), 400, Some("messages"), "empty"),
        ("no user message", "/v1/chat/completions", chat(json!({"messages": [{"role": "system", "content": "x"}]})).to_string(), 400, Some("messages"), "no user message"),
        ("bad role", "/v1/chat/completions", chat(json!({"messages": [{"role": "robot", "content": "x"}]})).to_string(), 400, Some("messages[0].role"), "robot"),
        ("blank user text", "/v1/chat/completions", chat(json!({"messages": user("   ")})).to_string(), 400, Some("messages[0].content"), "empty"),
        ("image part", "/v1/chat/completions", chat(json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})).to_string(), 400, Some("messages[0].content[0].type"), "image_url"),
        ("temperature wrong type", "/v1/chat/completions", chat(json!({"temperature": "hot"})).to_string(), 400, Some("temperature"), "must be a number"),
        ("stream wrong type", "/v1/chat/completions", chat(json!({"stream": "yes"})).to_string(), 400, Some("stream"), "boolean"),
        ("parallel_tool_calls wrong type", "/v1/chat/completions", chat(json!({"parallel_tool_calls": 0})).to_string(), 400, Some("parallel_tool_calls"), "boolean"),
        ("n: 2", "/v1/chat/completions", chat(json!({"n": 2})).to_string(), 400, Some("n"), "`n` = 2"),
        ("logprobs", "/v1/chat/completions", chat(json!({"logprobs": true})).to_string(), 400, Some("logprobs"), "not supported"),
        ("response_format json", "/v1/chat/completions", chat(json!({"response_format": {"type": "json_object"}})).to_string(), 400, Some("response_format"), "json_object"),
        ("legacy functions", "/v1/chat/completions", chat(json!({"functions": [{"name": "f", "parameters": {}}]})).to_string(), 400, Some("functions"), "send `tools`"),
        ("tools not a catalog", "/v1/chat/completions", chat(json!({"tools": 7})).to_string(), 400, Some("tools"), "catalog"),
        ("empty tools", "/v1/chat/completions", chat(json!({"tools": []})).to_string(), 400, Some("tools"), "empty"),
        ("bad tool name", "/v1/chat/completions",
            chat(json!({"tools": [{"type": "function", "function": {"name": "get weather!", "parameters": {"type": "object"}}}]})).to_string(),
            400, Some("tools[0]"), "tools[0]"),
        ("unsupported schema type", "/v1/chat/completions",
            chat(json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "blob"}}}}}]})).to_string(),
            400, Some("tools[0]"), "tools[0]"),
        ("remote $ref is not fetched", "/v1/chat/completions",
            chat(json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/x.json"}}}}}]})).to_string(),
            400, Some("tools[0]"), "$ref"),
        ("unknown named tool", "/v1/chat/completions",
            chat(json!({"tools": weather_tools(), "tool_choice": {"type": "function", "function": {"name": "launch_rocket"}}})).to_string(),
            400, Some("tool_choice.function.name"), "launch_rocket"),
        ("tool_choice nonsense", "/v1/chat/completions", chat(json!({"tool_choice": "sometimes"})).to_string(), 400, Some("tool_choice"), "sometimes"),
        ("bad entities", "/v1/chat/completions", chat(json!({"plansmith": {"entities": [{"type": "button", "label": 3}]}})).to_string(), 400, Some("plansmith.entities[0].label"), "non-empty string"),
        ("oversized body", "/v1/chat/completions", big.clone(), 413, None, "65536 bytes"),
        ("plan: missing request", "/v1/plan", json!({"tools": weather_tools()}).to_string(), 400, Some("request"), "required"),
        ("plan: request wrong type", "/v1/plan", json!({"request": ["a"]}).to_string(), 400, Some("request"), "must be a string"),
        ("plan: unknown field", "/v1/plan", json!({"request": "hi", "mesages": []}).to_string(), 400, Some("mesages"), "unknown field"),
        ("plan: unknown tool", "/v1/plan", json!({"request": "hi", "tool_choice": "launch_rocket"}).to_string(), 400, Some("tool_choice"), "launch_rocket"),
        ("plan: oversized", "/v1/plan", big, 413, None, "limit"),
        // Found by plansmith-fuzz: a repetition count llguidance cannot hold was a 500.
        ("plan: max_calls beyond any plan", "/v1/plan", json!({"request": "open safari", "max_calls": u64::MAX}).to_string(), 400, Some("max_calls"), "at most 64"),
        // A schema the validator cannot compile is the catalog's fault, named where it is.
        ("plan: description not a string", "/v1/plan",
            json!({"request": "hi", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": 0}}}}}]}).to_string(),
            400, Some("tools[0].function.parameters.properties.x.description"), "JSON Schema"),
    ];
    for (what, route, body, status, param, fragment) in cases {
        let r = c
            .send(Method::POST, route, &[], body)
            .await
            .unwrap_or_else(|e| panic!("{what}: no response: {e}"));
        assert_eq!(r.status, status, "{what}: {}", r.text());
        let e = error_of(&r);
        assert!(
            e["message"].as_str().unwrap().contains(fragment),
            "{what}: message lacks `{fragment}`: {}",
            r.text()
        );
        if let Some(p) = param {
            assert!(
                e["param"].as_str().is_some_and(|x| x.starts_with(p)),
                "{what}: param is not `{p}`: {}",
                r.text()
            );
        }
        if status == 400 {
            assert_eq!(e["type"], "invalid_request_error", "{what}");
        }
        healthy(&mut c).await;
    }
    let r = c.get("/nope").await.unwrap();
    assert_eq!(r.status, 404);
    error_of(&r);
    let r = c.get("/v1/chat/completions").await.unwrap();
    assert_eq!(r.status, 405);
    error_of(&r);
    healthy(&mut c).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn api_key_guards_everything_but_health() {
    let server = start(|c| c.api_key = Some("s3cret".into())).await;
    let mut anon = Client::new(server.addr);
    for (path, method) in [
        ("/v1/models", Method::GET),
        ("/v1/tools", Method::GET),
        ("/metrics", Method::GET),
        ("/v1/plan", Method::POST),
        ("/v1/chat/completions", Method::POST),
    ] {
        let r = anon
            .send(
                method.clone(),
                path,
                &[],
                json!({"request": "open safari"}).to_string(),
            )
            .await
            .unwrap();
        assert_eq!(r.status, 401, "{path}");
        assert!(error_of(&r)["message"]
            .as_str()
            .unwrap()
            .contains("missing API key"));
        let r = anon
            .send(method, path, &[("authorization", "Bearer wrong")], "{}")
            .await
            .unwrap();
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(error_of(&r)["code"], "invalid_api_key");
        healthy(&mut anon).await;
    }
    let mut authed = Client::new(server.addr).with_bearer("s3cret");
    let r = authed.get("/v1/models").await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"][0]["id"], "tiny-pace");
    let r = authed
        .post_json("/v1/plan", &json!({"request": "open safari"}))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    // The playground's own files hold no data and load without the key; the page then asks
    // for it before calling the API.
    for path in ["/ui", "/ui/app.js", "/ui/style.css"] {
        let r = anon.get(path).await.unwrap();
        assert_eq!(r.status, 200, "{path}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn playground_page_and_the_catalog_route() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let r = c.get("/").await.unwrap();
    assert_eq!(r.status, 303);
    assert_eq!(r.headers["location"], "/ui");
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ] {
        let r = c.get(path).await.unwrap();
        assert_eq!(r.status, 200, "{path}");
        let ct = r.headers["content-type"].to_str().unwrap();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        // Only this server's own scripts run and only this server is called.
        let csp = r.headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("connect-src 'self'"),
            "{csp}"
        );
    }
    let page = c.get("/ui").await.unwrap().text();
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page loads nothing from elsewhere"
    );
    assert_eq!(c.get("/ui/nothing.js").await.unwrap().status, 404);
    // The active catalog, as OpenAI tools, with its hash.
    let v = c.get("/v1/tools").await.unwrap().json();
    let p = planner();
    assert_eq!(v["hash"], p.catalog.hash());
    assert_eq!(v["tools"], p.catalog.to_openai());
    // The plan route says what floor the confidence was held to, and whether a teacher's
    // answer was harvested.
    let v = c
        .post_json("/v1/plan", &json!({"request": "open safari"}))
        .await
        .unwrap()
        .json();
    assert_eq!(v["floor"].as_f64(), Some(f32::MIN as f64), "{v}");
    assert_eq!(v["harvested"], false);
    server.shutdown().await.unwrap();

    // --no-ui: the page is gone, the API stays.
    let server = start(|c| c.ui = false).await;
    let mut c = Client::new(server.addr);
    assert_eq!(c.get("/ui").await.unwrap().status, 404);
    assert_eq!(c.get("/").await.unwrap().status, 404);
    assert_eq!(c.get("/v1/tools").await.unwrap().status, 200);
    server.shutdown().await.unwrap();
}

/// `(name, arguments)` of every tool call of a non-streamed completion, checking the wire
/// format on the way.
fn calls_of(v: &Value, tools: &BTreeSet<&str>) -> Vec<(String, Value)> {
    assert_eq!(v["object"], "chat.completion");
    let choice = &v["choices"][0];
    let msg = &choice["message"];
    assert_eq!(msg["role"], "assistant");
    let Some(tcs) = msg.get("tool_calls").and_then(Value::as_array) else {
        assert_eq!(choice["finish_reason"], "stop", "{v}");
        assert!(
            msg["content"].as_str().is_some_and(|s| !s.is_empty()),
            "a no-call answer has content: {v}"
        );
        return Vec::new();
    };
    assert!(!tcs.is_empty());
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    tcs.iter()
        .enumerate()
        .map(|(i, tc)| {
            assert_eq!(tc["id"], format!("call_{i}"));
            assert_eq!(tc["type"], "function");
            let name = tc["function"]["name"].as_str().unwrap().to_string();
            assert!(tools.contains(name.as_str()), "unknown tool {name}");
            let args: Value = serde_json::from_str(
                tc["function"]["arguments"]
                    .as_str()
                    .expect("arguments is a string"),
            )
            .expect("arguments parse");
            assert!(args.is_object());
            (name, args)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_variants_and_parallel_calls() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let weather: BTreeSet<&str> = ["get_weather", "send_message"].into();
    let requests = [
        "what is the weather in Paris",
        "text Bob that I am late",
        "weather in Oslo and text Ann hello",
    ];
    for text in requests {
        // none: never a call.
        let r = c.post_json("/v1/chat/completions", &json!({"model": "x", "messages": user(text), "tools": weather_tools(), "tool_choice": "none"})).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert!(calls_of(&v, &weather).is_empty(), "{v}");
        assert_eq!(v["plansmith"]["source"], "model");
        // required: at least one call.
        let r = c.post_json("/v1/chat/completions", &json!({"messages": user(text), "tools": weather_tools(), "tool_choice": "required"})).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        assert!(!calls_of(&v, &weather).is_empty(), "{v}");
        assert!(v["plansmith"]["confidence"].is_number());
        assert_eq!(v["plansmith"]["escalated"], false);
        // named: only that tool.
        let named = json!({"type": "function", "function": {"name": "send_message"}});
        let r = c
            .post_json(
                "/v1/chat/completions",
                &json!({"messages": user(text), "tools": weather_tools(), "tool_choice": named}),
            )
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let calls = calls_of(&r.json(), &weather);
        assert!(
            !calls.is_empty() && calls.iter().all(|(n, _)| n == "send_message"),
            "{calls:?}"
        );
        for (_, args) in &calls {
            assert!(
                args["to"].is_string() && args["text"].is_string(),
                "required keys: {args}"
            );
        }
        // parallel_tool_calls = false: at most one.
        let r = c.post_json("/v1/chat/completions", &json!({"messages": user(text), "tools": weather_tools(), "tool_choice": "required", "parallel_tool_calls": false})).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(calls_of(&r.json(), &weather).len(), 1);
        // auto with the planner's own catalog (no `tools`): calls, if any, are Pace verbs.
        let r = c.post_json("/v1/chat/completions", &json!({"messages": user(text), "cache_prompt": true, "seed": 3, "temperature": 0.7, "max_tokens": 50})).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let p = planner();
        let pace: BTreeSet<&str> = p.catalog.names().collect();
        calls_of(&r.json(), &pace);
    }
    server.shutdown().await.unwrap();
}

/// Rebuild `(content, [(id, name, arguments)], finish_reason, plansmith)` from SSE chunks.
type Reassembled = (Option<String>, Vec<(String, String, String)>, String, Value);

fn reassemble(sse: &str) -> Reassembled {
    assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
    let mut content: Option<String> = None;
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = String::new();
    let mut ext = Value::Null;
    let mut saw_role = false;
    for event in sse.split("\n\n").filter(|e| !e.is_empty()) {
        let data = event
            .strip_prefix("data: ")
            .expect("every event is a data line");
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if chunk.get("plansmith").is_some() {
            ext = chunk["plansmith"].clone();
        }
        for choice in chunk["choices"].as_array().unwrap() {
            let d = &choice["delta"];
            if d.get("role").is_some() {
                assert_eq!(d["role"], "assistant");
                saw_role = true;
            }
            if let Some(t) = d.get("content").and_then(Value::as_str) {
                content.get_or_insert_with(String::new).push_str(t);
            }
            for tc in d
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let i = tc["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    assert_eq!(
                        tc["function"]["arguments"], "",
                        "the header delta has empty arguments"
                    );
                    calls.push((
                        tc["id"].as_str().unwrap().into(),
                        tc["function"]["name"].as_str().unwrap().into(),
                        String::new(),
                    ));
                } else {
                    calls[i]
                        .2
                        .push_str(tc["function"]["arguments"].as_str().unwrap());
                }
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = f.to_string();
            }
        }
    }
    assert!(saw_role);
    (content.filter(|c| !c.is_empty()), calls, finish, ext)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_reassembles_to_the_non_streamed_result() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let texts = [
        "what is the weather in Paris in celsius",
        "text Bob that I am running late",
        "open safari",
    ];
    for text in texts {
        for choice in [json!("auto"), json!("required"), json!("none")] {
            let body =
                json!({"messages": user(text), "tools": weather_tools(), "tool_choice": choice});
            let whole = c.post_json("/v1/chat/completions", &body).await.unwrap();
            assert_eq!(whole.status, 200, "{}", whole.text());
            let whole = whole.json();
            let mut streamed = body.clone();
            streamed["stream"] = json!(true);
            streamed["stream_options"] = json!({"include_usage": true});
            let r = c
                .post_json("/v1/chat/completions", &streamed)
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{}", r.text());
            assert!(r.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"));
            let (content, calls, finish, ext) = reassemble(&r.text());
            let msg = &whole["choices"][0]["message"];
            let want: Vec<(String, String, String)> = msg
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|t| {
                    (
                        t["id"].as_str().unwrap().into(),
                        t["function"]["name"].as_str().unwrap().into(),
                        t["function"]["arguments"].as_str().unwrap().into(),
                    )
                })
                .collect();
            assert_eq!(calls, want, "{text} / {choice}");
            assert_eq!(
                content.as_deref(),
                msg["content"].as_str(),
                "{text} / {choice}"
            );
            assert_eq!(
                finish,
                whole["choices"][0]["finish_reason"].as_str().unwrap()
            );
            assert_eq!(ext["source"], whole["plansmith"]["source"]);
            assert!(
                r.text().contains("\"total_tokens\""),
                "usage chunk when include_usage"
            );
        }
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn tool_results_end_the_turn_without_replanning() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let messages = json!([
        {"role": "user", "content": "what is the weather in Paris"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny, 21C"}
    ]);
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": messages, "tools": weather_tools()}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        plansmith_serve::openai::NO_CALL_TEXT
    );
    assert_eq!(v["plansmith"]["source"], "none");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn native_plan_route() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let r = c
        .post_json("/v1/plan", &json!({"request": "open safari"}))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    for k in ["calls", "confidence", "escalated", "source", "latency_ms"] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    assert_eq!(v["source"], "model");
    let p = planner();
    let pace: BTreeSet<&str> = p.catalog.names().collect();
    for call in v["calls"].as_array().unwrap() {
        assert!(pace.contains(call["name"].as_str().unwrap()));
        assert!(
            call["arguments"].is_object(),
            "native calls carry arguments as an object"
        );
    }
    let r = c
        .post_json("/v1/plan", &json!({"request": "text Bob hello", "tools": weather_tools(), "tool_choice": "send_message",
                                       "entities": [{"type": "contact", "label": "Bob"}]}))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let calls = r.json()["calls"].as_array().unwrap().clone();
    assert!(
        !calls.is_empty() && calls.iter().all(|c| c["name"] == "send_message"),
        "{calls:?}"
    );
    let r = c
        .post_json(
            "/v1/plan",
            &json!({"request": "open safari", "tool_choice": "none"}),
        )
        .await
        .unwrap();
    assert_eq!(r.json()["calls"], json!([]));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn escalation_without_a_teacher_is_explicit() {
    // A floor no plan reaches: everything escalates, and with no teacher nothing is emitted.
    let strict = std::sync::Arc::new(common::train_tiny(f32::MAX));
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..ServeConfig::default()
    };
    let server = spawn(strict, config).await.unwrap();
    let mut c = Client::new(server.addr);
    let r = c
        .post_json("/v1/plan", &json!({"request": "open safari"}))
        .await
        .unwrap();
    let v = r.json();
    assert_eq!(
        (
            v["escalated"].clone(),
            v["source"].clone(),
            v["calls"].clone()
        ),
        (json!(true), json!("none"), json!([])),
        "{v}"
    );
    assert!(v["reason"].as_str().unwrap().contains("accepts nothing"));
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user("open safari")}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["plansmith"]["escalated"], true);
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user("open safari"), "tool_choice": "required"}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(error_of(&r)["code"], "no_verified_plan");
    let m = c.get("/metrics").await.unwrap().text();
    assert!(m.contains("plansmith_escalations_total 3"), "{m}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_routes_statuses_and_caches() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    for _ in 0..3 {
        let r = c
            .post_json("/v1/plan", &json!({"request": "open safari"}))
            .await
            .unwrap();
        assert_eq!(r.status, 200);
    }
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user("weather in Rome"), "tools": weather_tools()}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let r = c.post_json("/v1/plan", &json!({})).await.unwrap();
    assert_eq!(r.status, 400);
    let r = c.get("/metrics").await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let m = r.text();
    for want in [
        "plansmith_http_requests_total{route=\"/v1/plan\",status=\"200\"} 3",
        "plansmith_http_requests_total{route=\"/v1/plan\",status=\"400\"} 1",
        "plansmith_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1",
        "# TYPE plansmith_http_request_duration_seconds histogram",
        "plansmith_http_request_duration_seconds_count{route=\"/v1/plan\"} 4",
        "plansmith_http_request_duration_seconds_bucket{route=\"/v1/plan\",le=\"+Inf\"} 4",
        "# TYPE plansmith_escalations_total counter",
        "plansmith_grammar_cache_hits_total",
        "plansmith_grammar_cache_misses_total",
        "plansmith_prefix_cache_hits_total",
        "plansmith_prefix_cache_misses_total",
        "plansmith_queue_depth 0",
        "plansmith_workers 2",
    ] {
        assert!(m.contains(want), "metrics lack `{want}`:\n{m}");
    }
    let value = |name: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    assert!(value("plansmith_plans_total ") >= 4.0);
    assert!(
        value("plansmith_grammar_cache_hits_total ") >= 1.0,
        "the same catalog and choice reuse the compiled grammar"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_a_full_queue_answer_cleanly() {
    let server = start(|c| c.timeout = Duration::ZERO).await;
    let mut c = Client::new(server.addr);
    let r = c
        .post_json("/v1/plan", &json!({"request": "open safari"}))
        .await
        .unwrap();
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(error_of(&r)["code"], "timeout");
    healthy(&mut c).await;
    server.shutdown().await.unwrap();

    // One worker and no waiting room: concurrent requests either plan or get 429, never hang.
    let server = start(|c| {
        c.workers = 1;
        c.queue = 0;
    })
    .await;
    let addr = server.addr;
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            tokio::spawn(async move {
                let mut c = Client::new(addr);
                c.post_json("/v1/plan", &json!({"request": format!("open safari {i}")}))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut busy = 0;
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            200 => {}
            429 => {
                busy += 1;
                assert_eq!(error_of(&r)["code"], "queue_full");
            }
            s => panic!("unexpected {s}: {}", r.text()),
        }
    }
    let m = Client::new(addr).get("/metrics").await.unwrap().text();
    assert!(
        m.contains(&format!("plansmith_queue_rejected_total {busy}")),
        "{m}"
    );
    server.shutdown().await.unwrap();
}

/// `n` one-argument tools: enough of them outgrow any tiny planner's context.
fn many_tools(n: usize) -> Value {
    (0..n)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_number_{i}"),
                "parameters": {"type": "object", "properties": {"value": {"type": "string"}}},
            }})
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_too_long_for_the_context_is_refused_by_name() {
    // The embedded default planner puts the catalog in its prompt (block 640).
    let default = std::sync::Arc::new(plansmith_planner::default_planner().expect("default"));
    let big = std::sync::Arc::new(plansmith_core::Catalog::from_value(&many_tools(300)).unwrap());
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..ServeConfig::default()
    };
    let refused = spawn(
        default.clone(),
        ServeConfig {
            tools: Some(big),
            ..config.clone()
        },
    )
    .await
    .err()
    .expect("a server whose catalog cannot fit must not start");
    let message = refused.to_string();
    assert!(
        message.contains("the tool catalog (300 tools) takes") && message.contains("holds 640"),
        "{message}"
    );

    let server = spawn(default, config).await.expect("server starts");
    let mut c = Client::new(server.addr);
    let body = json!({"messages": user("set a timer for 5 minutes"), "tools": many_tools(300)});
    let r = c
        .send(Method::POST, "/v1/chat/completions", &[], body.to_string())
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    let e = error_of(&r);
    assert_eq!(e["param"], "tools", "{}", r.text());
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("300 tools") && m.contains("send fewer tools"),
        "{m}"
    );
    // A catalog that fits still plans, on the same server.
    let body = json!({"messages": user("set a timer for 5 minutes"), "tools": many_tools(3)});
    let r = c
        .send(Method::POST, "/v1/chat/completions", &[], body.to_string())
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    healthy(&mut c).await;
    server.shutdown().await.unwrap();
}

/// A named (or required) tool whose required strings cannot be copied from the request is the
/// client's problem: the plan route escalates with the reason, chat completions answer 422
/// `no_verified_plan` — never a 500 (found by a black-box fuzz run: 300 parentheses).
#[tokio::test]
async fn a_required_call_the_request_cannot_fill_is_not_a_server_error() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let parens = "(".repeat(300);
    let r = c
        .post_json(
            "/v1/plan",
            &json!({"request": parens, "tools": weather_tools(), "tool_choice": "send_message"}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["escalated"].clone(), v["calls"].clone()),
        (json!(true), json!([])),
        "{v}"
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("no tool can be called with values copied"),
        "{v}"
    );
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user(&parens), "tools": weather_tools(),
                    "tool_choice": {"type": "function", "function": {"name": "send_message"}}}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(error_of(&r)["code"], "no_verified_plan");
    healthy(&mut c).await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_cascade_reports_every_hop_and_counts_them() {
    // The embedded planner twice, strict then lenient: "open mail" (confidence about -0.0014)
    // escalates from the first and is answered by the second.
    let dir = std::env::temp_dir().join(format!("plansmith-http-cascade-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cascade.json");
    std::fs::write(
        &path,
        r#"{"hops": [{"name": "strict", "embedded": true, "floor": -0.0001},
                     {"name": "lenient", "embedded": true, "floor": -0.01}]}"#,
    )
    .unwrap();
    let planner = plansmith_planner::cascade::load(&path).unwrap().planner;
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..ServeConfig::default()
    };
    let server = spawn(std::sync::Arc::new(planner), config).await.unwrap();
    let mut c = Client::new(server.addr);
    let r = c
        .post_json("/v1/plan", &json!({"request": "open mail"}))
        .await
        .unwrap();
    let v = r.json();
    assert_eq!(
        (v["hop"].clone(), v["escalated"].clone()),
        (json!("lenient"), json!(false)),
        "{v}"
    );
    let hops = v["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 2, "{v}");
    assert_eq!(
        (
            hops[0]["hop"].clone(),
            hops[0]["accepted"].clone(),
            hops[1]["accepted"].clone()
        ),
        (json!("strict"), json!(false), json!(true)),
        "{v}"
    );
    assert!(hops[0]["floor"].as_f64().unwrap() > hops[1]["floor"].as_f64().unwrap());
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user("zzzz qqq")}),
        )
        .await
        .unwrap();
    let v = r.json();
    assert_eq!(v["plansmith"]["hop"], Value::Null, "{v}");
    assert_eq!(v["plansmith"]["hops"].as_array().unwrap().len(), 2, "{v}");
    let m = c.get("/metrics").await.unwrap().text();
    for line in [
        "plansmith_hop_requests_total{hop=\"strict\"} 2",
        "plansmith_hop_answered_total{hop=\"lenient\"} 1",
        "plansmith_hop_escalated_total{hop=\"lenient\"} 1",
        "plansmith_escalations_total 1",
        "plansmith_hop_duration_seconds_count{hop=\"strict\"} 2",
        "plansmith_hop_duration_seconds_count{hop=\"lenient\"} 2",
        "plansmith_hop_duration_seconds_bucket{hop=\"lenient\",le=\"+Inf\"} 2",
    ] {
        assert!(m.contains(line), "{line}\n{m}");
    }
    server.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/v1/score` and `/v1/sample` run on the workers like `/v1/plan`: the planner's own plan
/// scores as valid, a tampered one does not, draws come back best first with invalid ones kept,
/// and bad input is a 400 naming the field.
#[tokio::test]
async fn score_and_sample_routes() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let request = "what is the weather in Paris";
    let v = c
        .post_json("/v1/plan", &json!({"request": request}))
        .await
        .unwrap()
        .json();
    let calls = v["calls"].clone();
    assert!(!calls.as_array().unwrap().is_empty(), "{v}");
    let r = c
        .post_json("/v1/score", &json!({"request": request, "calls": calls}))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let s = r.json();
    assert_eq!(s["valid"], true, "{s}");
    let score = s["score"].as_f64().unwrap();
    assert!(score <= 0.0 && score > -5.0, "{s}");
    assert!(
        s["floor"].is_number() && s["would_accept"].is_boolean(),
        "{s}"
    );
    // The same call with a value the request never said: invalid under the copy policy.
    let mut tampered = calls.clone();
    let args = tampered[0]["arguments"].as_object_mut().unwrap();
    let key = args.keys().next().unwrap().clone();
    args.insert(key, json!("Atlantis"));
    let s = c
        .post_json("/v1/score", &json!({"request": request, "calls": tampered}))
        .await
        .unwrap()
        .json();
    assert_eq!(
        (s["valid"].clone(), s["would_accept"].clone()),
        (json!(false), json!(false)),
        "{s}"
    );
    assert!(!s["violations"].as_array().unwrap().is_empty(), "{s}");

    let r = c
        .post_json(
            "/v1/sample",
            &json!({"request": request, "n": 3, "seed": 7, "temperature": 1.5}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let samples = r.json()["samples"].as_array().unwrap().clone();
    assert_eq!(samples.len(), 3);
    let scores: Vec<Option<f64>> = samples.iter().map(|s| s["score"].as_f64()).collect();
    for (s, score) in samples.iter().zip(&scores) {
        assert_eq!(s["valid"].as_bool().unwrap(), score.is_some(), "{s}");
        assert!(s["text"].is_string(), "{s}");
    }
    // Best first, invalid ones last.
    let valid: Vec<f64> = scores.iter().map_while(|s| *s).collect();
    assert!(valid.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(
        scores[valid.len()..].iter().all(Option::is_none),
        "{scores:?}"
    );
    // Seeded: the same request draws the same samples.
    let again = c
        .post_json(
            "/v1/sample",
            &json!({"request": request, "n": 3, "seed": 7, "temperature": 1.5}),
        )
        .await
        .unwrap()
        .json();
    assert_eq!(again["samples"], json!(samples));

    let too_long = format!("open {}", "word ".repeat(3000));
    for (route, body, param) in [
        ("/v1/score", json!({"calls": calls}), "request"),
        (
            "/v1/score",
            json!({"request": too_long, "calls": calls}),
            "request",
        ),
        ("/v1/score", json!({"request": request}), "calls"),
        (
            "/v1/score",
            json!({"request": request, "calls": calls, "plan": "x()"}),
            "plan",
        ),
        (
            "/v1/score",
            json!({"request": request, "calls": [{"nom": 1}]}),
            "calls",
        ),
        (
            "/v1/score",
            json!({"request": request, "plan": "(("}),
            "plan",
        ),
        (
            "/v1/score",
            json!({"request": request, "calls": calls, "tools": []}),
            "tools",
        ),
        ("/v1/sample", json!({"request": request, "n": 0}), "n"),
        ("/v1/sample", json!({"request": request, "n": 65}), "n"),
        (
            "/v1/sample",
            json!({"request": request, "temperature": -1}),
            "temperature",
        ),
        ("/v1/sample", json!({"request": "  "}), "request"),
    ] {
        let r = c.post_json(route, &body).await.unwrap();
        assert_eq!(r.status, 400, "{route} {body}: {}", r.text());
        assert_eq!(error_of(&r)["param"], param, "{route} {body}: {}", r.text());
    }
    healthy(&mut c).await;
    server.shutdown().await.unwrap();
}

/// A request's `max_tokens` caps the reply: one that cannot finish within it escalates with
/// the reason; `0` is refused.
#[tokio::test]
async fn a_request_token_budget_is_enforced() {
    let server = start(|_| {}).await;
    let mut c = Client::new(server.addr);
    let r = c
        .post_json(
            "/v1/plan",
            &json!({"request": "what is the weather in Paris", "max_tokens": 1}),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["escalated"].clone(), v["calls"].clone()),
        (json!(true), json!([])),
        "{v}"
    );
    assert!(
        v["reason"].as_str().unwrap().contains("token budget"),
        "{v}"
    );
    let r = c
        .post_json(
            "/v1/chat/completions",
            &json!({"messages": user("what is the weather in Paris"), "max_completion_tokens": 1}),
        )
        .await
        .unwrap();
    assert_eq!(r.json()["plansmith"]["escalated"], true, "{}", r.text());
    for (route, body) in [
        ("/v1/plan", json!({"request": "hi", "max_tokens": 0})),
        ("/v1/plan", json!({"request": "hi", "max_tokens": "10"})),
    ] {
        let r = c.post_json(route, &body).await.unwrap();
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(error_of(&r)["param"], "max_tokens");
    }
    server.shutdown().await.unwrap();
}

/// The server's `max_tokens` caps every request's budget, asked for or not: a larger
/// per-request `max_tokens` does not lift it.
#[tokio::test]
async fn the_server_token_cap_bounds_every_request() {
    let server = start(|c| c.max_tokens = Some(2)).await;
    let mut c = Client::new(server.addr);
    for body in [
        json!({"request": "open safari"}),
        json!({"request": "open safari", "max_tokens": 10_000}),
    ] {
        let v = c.post_json("/v1/plan", &body).await.unwrap().json();
        assert_eq!(v["escalated"], true, "{v}");
        assert!(
            v["reason"].as_str().unwrap().contains("token budget"),
            "{v}"
        );
    }
    server.shutdown().await.unwrap();
}

/// The issue's reproduction verbatim: the embedded planner's own catalog, 300 parentheses,
/// `say` named. It was a 500; it is the client's problem, reported as an escalation.
#[tokio::test]
async fn the_parentheses_reproduction_on_the_embedded_planner() {
    let planner = std::sync::Arc::new(plansmith_planner::default_planner().unwrap());
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..ServeConfig::default()
    };
    let server = spawn(planner, config).await.unwrap();
    let mut c = Client::new(server.addr);
    let body = json!({"request": "(".repeat(300),
                      "tool_choice": {"type": "function", "function": {"name": "say"}}});
    let r = c.post_json("/v1/plan", &body).await.unwrap();
    assert!(r.status < 500, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["escalated"].clone(), v["calls"].clone()),
        (json!(true), json!([])),
        "{v}"
    );
    server.shutdown().await.unwrap();
}

/// `usage.prompt_tokens` counts what the model read, the tools prompt included (the embedded
/// planner reads the catalog's signatures before the request): more tools, more prompt tokens
/// for the same message. It used to count the message alone.
#[tokio::test]
async fn usage_counts_the_tools_prompt() {
    let embedded = std::sync::Arc::new(plansmith_planner::default_planner().unwrap());
    let config = ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..ServeConfig::default()
    };
    let server = spawn(embedded, config).await.expect("server starts");
    let mut c = Client::new(server.addr);
    let text = "what is the weather in Paris in celsius";
    let mut usage = Vec::new();
    for tools in [weather_tools(), json!([weather_tools()[0].clone()])] {
        let body = json!({"messages": user(text), "tools": tools});
        let r = c.post_json("/v1/chat/completions", &body).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let u = r.json()["usage"].clone();
        let prompt = u["prompt_tokens"].as_u64().unwrap();
        assert_eq!(
            u["total_tokens"].as_u64().unwrap(),
            prompt + u["completion_tokens"].as_u64().unwrap()
        );
        usage.push(prompt);
    }
    assert!(usage[0] > usage[1], "more tools, more prompt: {usage:?}");
    let r = c
        .post_json(
            "/v1/plan",
            &json!({"request": text, "tools": weather_tools()}),
        )
        .await
        .unwrap();
    assert_eq!(
        r.json()["prompt_tokens"].as_u64(),
        Some(usage[0]),
        "{}",
        r.text()
    );
    server.shutdown().await.unwrap();
}
