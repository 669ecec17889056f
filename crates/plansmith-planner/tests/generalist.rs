//! The committed generalist planner, `planners/generalist-qwen05`: a LoRA adapter on
//! Qwen2.5-Coder-0.5B-Instruct (`scripts/assets.sh qwen05`) in the model's own `<tool_call>`
//! format. It loads like any planner directory, stays within the size the repository allows,
//! carries a certified floor, and calls a tool that no training example holds.

use std::path::PathBuf;
use std::sync::OnceLock;

use plansmith_core::Catalog;
use plansmith_planner::{PlanRequest, Planner};
use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir() -> PathBuf {
    root().join("planners/generalist-qwen05")
}

fn manifest() -> Value {
    let bytes = std::fs::read(dir().join("planner.json")).expect("the committed planner.json");
    serde_json::from_slice(&bytes).unwrap()
}

fn planner() -> &'static Planner {
    static P: OnceLock<Planner> = OnceLock::new();
    P.get_or_init(|| {
        let base = root().join("assets/qwen05.gguf");
        assert!(
            base.exists(),
            "{} is missing: run scripts/assets.sh qwen05 first",
            base.display()
        );
        Planner::load(&dir()).expect("load planners/generalist-qwen05")
    })
}

#[test]
fn the_committed_adapter_is_small_and_its_floor_is_certified() {
    let adapter = dir().join("adapter/adapter_model.safetensors");
    let size = std::fs::metadata(&adapter).unwrap().len();
    assert!(size <= 8 << 20, "{} is {size} bytes", adapter.display());
    let m = manifest();
    // the base is found from the planner directory, wherever the repository is cloned
    assert_eq!(m["llama"]["base"], "../../assets/qwen05.gguf");
    let fit = &m["floor_fit"];
    assert_eq!(fit["certified"], true, "{fit}");
    assert!(fit["alpha"].as_f64().unwrap() <= 0.05, "{fit}");
    assert!(
        m["conf_floor"].as_f64().unwrap() < 0.0,
        "{}",
        m["conf_floor"]
    );
}

#[test]
fn it_plans_a_pace_request_in_its_own_format_and_the_gate_lets_it_through() {
    let out = planner()
        .plan_request(&PlanRequest::new("press the OK button"))
        .unwrap();
    assert!(out.text.starts_with("<tool_call>"), "{}", out.text);
    assert_eq!(out.calls.len(), 1, "{}", out.text);
    let call = &out.calls[0];
    assert_eq!(call.name, "perform", "{}", out.text);
    assert_eq!(call.arguments["action"], "click", "{}", out.text);
    assert_eq!(
        call.arguments["target"],
        json!({"type": "ui_element", "label": "OK"}),
        "{}",
        out.text
    );
    assert!(!out.escalated, "{:?}: {}", out.reason, out.text);
}

#[test]
fn it_calls_a_tool_added_to_the_catalog_without_retraining() {
    let mut tools: Vec<Value> =
        serde_json::from_slice(&std::fs::read(root().join("examples/pace/tools.json")).unwrap())
            .unwrap();
    tools.push(json!({
        "name": "water_plants",
        "description": "Start the garden irrigation for one zone.",
        "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "enum": ["front yard", "back yard", "greenhouse"]},
            "minutes": {"type": "integer", "description": "How long to water."}
        }, "required": ["zone"]}
    }));
    let catalog = Catalog::from_value(&Value::Array(tools)).unwrap();
    let req = PlanRequest {
        catalog: Some(std::sync::Arc::new(catalog)),
        ..PlanRequest::new("water the greenhouse for 10 minutes")
    };
    // what the model decodes, gate aside: the floor was fitted on Pace-style traffic
    let out = planner().decode(&req).unwrap();
    let plan = out.plan.as_ref().expect("a plan");
    assert!(
        out.violations.is_empty(),
        "{:?}: {}",
        out.violations,
        out.text
    );
    let call = plan.calls.first().expect("a call");
    assert_eq!(call.name, "water_plants", "{}", out.text);
    assert_eq!(call.arguments["zone"], "greenhouse", "{}", out.text);
    assert_eq!(call.arguments["minutes"], 10, "{}", out.text);
}
