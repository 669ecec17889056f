//! What `--backend` sends each engine, checked against that engine's documented request
//! schema (tests/fixtures/engine_requests/, transcribed from the engines' docs with unknown
//! fields refused), and the constraint in it checked to be the one plansmith enforces
//! locally: the same Lark grammar for vLLM and SGLang, the plan's JSON Schema for llama.cpp
//! and OpenAI-style engines. vLLM and SGLang need GPUs this suite does not have; their
//! command lines are in docs/guide/backends.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use plansmith_core::Catalog;
use plansmith_grammar::{Options, Request, ToolChoice};
use plansmith_planner::remote::{BackendSpec, RemoteEngine};
use plansmith_planner::{PlanRequest, Planner, PlannerSettings};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn pace() -> Catalog {
    Catalog::from_file(root().join("../../examples/pace/tools.json")).unwrap()
}

fn planner(spec: &str) -> Planner {
    let engine = RemoteEngine::new(
        BackendSpec::parse(spec).unwrap(),
        None,
        Duration::from_secs(1),
    );
    Planner::remote(engine, pace(), PlannerSettings::chat()).unwrap()
}

fn documented(engine: &str) -> jsonschema::Validator {
    let path = root().join(format!("tests/fixtures/engine_requests/{engine}.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_documented(engine: &str, body: &Value) {
    let v = documented(engine);
    let errors: Vec<String> = v
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{engine}: {errors:?}");
}

fn request(text: &str, tool_choice: ToolChoice) -> PlanRequest {
    PlanRequest {
        tool_choice,
        max_calls: Some(2),
        ..PlanRequest::new(text)
    }
}

fn options(tool_choice: ToolChoice) -> Options {
    let settings = PlannerSettings::chat();
    Options {
        syntax: settings.syntax,
        policy: settings.policy,
        tool_choice,
        max_calls: 2,
    }
}

#[test]
fn every_body_matches_its_engines_documented_schema() {
    for (engine, spec) in [
        ("vllm", "vllm:http://gpu:8000#Qwen/Qwen2.5-7B-Instruct"),
        (
            "sglang",
            "sglang:http://gpu:30000/v1#Qwen/Qwen2.5-7B-Instruct",
        ),
        ("llamacpp", "llamacpp:http://127.0.0.1:8080"),
        ("openai", "openai:https://api.example.com/v1#some-model"),
    ] {
        let p = planner(spec);
        for tc in [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::None,
            ToolChoice::Named("open".into()),
        ] {
            let body = p
                .engine_request(&request("open the settings app", tc.clone()))
                .unwrap()
                .unwrap();
            assert_documented(engine, &body);
            assert_eq!(body["messages"][1]["content"], "open the settings app");
            let system = body["messages"][0]["content"].as_str().unwrap();
            assert!(
                system.contains("\"name\":\"open\""),
                "{engine}: the tools are in the system message"
            );
        }
    }
    // A body that breaks a documented schema is caught (the fixtures are not vacuous).
    let mut body = planner("vllm:http://gpu:8000#m")
        .engine_request(&request("open it", ToolChoice::Auto))
        .unwrap()
        .unwrap();
    body["guided_grammar"] = body["structured_outputs"]["grammar"].take();
    body.as_object_mut().unwrap().remove("structured_outputs");
    assert!(
        !documented("vllm").is_valid(&body),
        "vLLM 0.12 removed guided_grammar"
    );
}

#[test]
fn lark_engines_get_the_grammar_plansmith_enforces_locally() {
    let text = "open the settings app";
    for (spec, field) in [
        ("vllm:http://gpu:8000#m", "/structured_outputs/grammar"),
        ("sglang:http://gpu:30000#m", "/ebnf"),
    ] {
        for tc in [ToolChoice::Auto, ToolChoice::Named("open".into())] {
            let body = planner(spec)
                .engine_request(&request(text, tc.clone()))
                .unwrap()
                .unwrap();
            let local = plansmith_grammar::grammar_text(
                &pace(),
                &options(tc),
                &Request {
                    text: text.into(),
                    entities: vec![],
                },
            )
            .unwrap();
            assert_eq!(
                body.pointer(field).and_then(Value::as_str),
                Some(local.as_str()),
                "{spec}"
            );
        }
    }
}

#[test]
fn json_schema_engines_get_the_plan_schema() {
    for (spec, field) in [
        ("llamacpp:http://127.0.0.1:8080", "/response_format/schema"),
        (
            "openai:https://api.example.com/v1#m",
            "/response_format/json_schema/schema",
        ),
    ] {
        for tc in [
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Named("open".into()),
        ] {
            let body = planner(spec)
                .engine_request(&request("open it", tc.clone()))
                .unwrap()
                .unwrap();
            let schema = plansmith_grammar::plan_schema(&pace(), &options(tc)).unwrap();
            assert_eq!(body.pointer(field), Some(&schema), "{spec}");
        }
    }
    // A request's own catalog replaces the default in both the prompt and the schema.
    let own = Arc::new(
        Catalog::from_json_str(
            r#"[{"name":"ring","parameters":{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}}]"#,
        )
        .unwrap(),
    );
    let body = planner("llamacpp:http://127.0.0.1:8080")
        .engine_request(&PlanRequest {
            catalog: Some(own.clone()),
            ..PlanRequest::new("ring mum")
        })
        .unwrap()
        .unwrap();
    let branches = body.pointer("/response_format/schema/items/anyOf").unwrap();
    assert_eq!(branches.as_array().unwrap().len(), 1);
    assert_eq!(branches[0]["properties"]["name"]["const"], "ring");
    assert!(body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("\"ring\""));
}

#[test]
fn unknown_tool_choice_is_the_usual_grammar_error() {
    let p = planner("vllm:http://gpu:8000#m");
    let e = p
        .engine_request(&request("x", ToolChoice::Named("nope".into())))
        .unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    let p = planner("llamacpp:http://127.0.0.1:8080");
    let e = p
        .engine_request(&request("x", ToolChoice::Named("nope".into())))
        .unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}
