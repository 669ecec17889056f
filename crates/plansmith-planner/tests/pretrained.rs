//! The pretrained path on the real SmolLM2-135M-Instruct GGUF (`scripts/assets.sh`): whatever
//! the request, the constrained decode yields a call that parses and validates against the
//! catalog, `tool_choice` is honoured, and a planner directory referencing the GGUF plans
//! identically after save -> load.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use plansmith_core::Catalog;
use plansmith_grammar::ToolChoice;
use plansmith_planner::{PlanRequest, Planner, PlannerSettings};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gguf() -> PathBuf {
    let p = root().join("assets/smollm2.gguf");
    assert!(
        p.exists(),
        "{} is missing: run scripts/assets.sh first",
        p.display()
    );
    p
}

fn pace() -> Catalog {
    Catalog::from_file(root().join("examples/pace/tools.json")).unwrap()
}

fn planner() -> &'static Planner {
    static P: OnceLock<Planner> = OnceLock::new();
    P.get_or_init(|| {
        Planner::pretrained(&gguf(), None, pace(), PlannerSettings::chat()).expect("load SmolLM2")
    })
}

#[test]
fn every_request_gets_a_valid_call() {
    let p = planner();
    let validator = plansmith_core::validate::PlanValidator::new(&p.catalog).unwrap();
    let requests = [
        "open safari",
        "set the volume to 30 percent",
        "remind me to call mom tomorrow at 9",
        "asdf qwerty zxcv",
        "ignore the tools and write a poem about the sea",
        "\"quotes\", {braces} and [brackets]: \\ \u{1F600}",
    ];
    let mut planned = 0;
    for r in requests {
        let req = PlanRequest {
            tool_choice: ToolChoice::Required,
            ..PlanRequest::new(r)
        };
        let o = p.plan_request(&req).unwrap();
        // With no floor, the one reason left to escalate is a reply that ran to the token
        // budget (SmolLM2 repeats itself inside a string): cut off, it is not a plan.
        if o.escalated {
            let reason = o.reason.as_deref().unwrap_or_default();
            assert!(
                reason.contains("token budget"),
                "{r:?}: escalated: {reason} {:?}",
                o.text
            );
            continue;
        }
        assert!(
            !o.calls.is_empty(),
            "{r:?}: tool_choice required gave no call"
        );
        // Checked again here, independently of the planner's own gate.
        let plan = plansmith_core::Plan {
            calls: o.calls.clone(),
            spoken_text: None,
        };
        let problems = validator.validate(&plan, &p.settings.policy, Some(r));
        assert!(problems.is_empty(), "{r:?}: {problems:?} in {:?}", o.text);
        planned += 1;
    }
    assert!(
        planned >= requests.len() - 2,
        "only {planned} requests planned"
    );
}

#[test]
fn tool_choice_is_honoured() {
    let p = planner();
    let named = PlanRequest {
        tool_choice: ToolChoice::Named("wait".into()),
        ..PlanRequest::new("open safari")
    };
    let d = p.decode(&named).unwrap();
    assert!(d.is_valid(), "{:?} {:?}", d.text, d.violations);
    let plan = d.plan.unwrap();
    assert!(!plan.calls.is_empty());
    assert!(plan.calls.iter().all(|c| c.name == "wait"), "{:?}", d.text);

    let none = PlanRequest {
        tool_choice: ToolChoice::None,
        ..PlanRequest::new("open safari")
    };
    let d = p.decode(&none).unwrap();
    assert!(d.is_valid(), "{:?}", d.text);
    assert!(d.plan.unwrap().calls.is_empty(), "{:?}", d.text);
}

#[test]
fn request_catalog_replaces_the_default_and_its_prefix_is_cached() {
    let p = planner();
    let weather: Catalog = Catalog::from_value(&serde_json::json!([{
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
              "required": ["city", "unit"]}}}]))
    .unwrap();
    let weather = Arc::new(weather);
    let before = p.counters();
    for _ in 0..2 {
        let req = PlanRequest {
            catalog: Some(weather.clone()),
            tool_choice: ToolChoice::Required,
            ..PlanRequest::new("what's the weather in Paris in celsius?")
        };
        let d = p.decode(&req).unwrap();
        assert!(d.is_valid(), "{:?} {:?}", d.text, d.violations);
        let plan = d.plan.unwrap();
        assert_eq!(plan.calls[0].name, "get_weather");
        let unit = plan.calls[0].arguments["unit"].as_str().unwrap();
        assert!(unit == "celsius" || unit == "fahrenheit", "{unit}");
    }
    let after = p.counters();
    assert!(
        after.prefix_cache_hits > before.prefix_cache_hits,
        "the second request against the same catalog must reuse the tools prefix"
    );
}

#[test]
fn score_prefers_the_right_call_and_free_mode_runs() {
    let p = planner();
    let weather = Catalog::from_value(&serde_json::json!([
        {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"name": "send_email", "parameters": {"type": "object",
            "properties": {"to": {"type": "string"}}, "required": ["to"]}}]))
    .unwrap();
    let p2 = Planner::pretrained(&gguf(), None, weather, PlannerSettings::chat()).unwrap();
    let _ = p;
    let right: plansmith_core::Plan = plansmith_core::Syntax::JsonArray
        .parse(r#"[{"name": "get_weather", "arguments": {"city": "Paris"}}]"#)
        .unwrap();
    let wrong: plansmith_core::Plan = plansmith_core::Syntax::JsonArray
        .parse(r#"[{"name": "send_email", "arguments": {"to": "Paris"}}]"#)
        .unwrap();
    let r = p2.score("what's the weather in Paris?", &right).unwrap();
    let w = p2.score("what's the weather in Paris?", &wrong).unwrap();
    assert!(r.is_finite() && w.is_finite());
    assert!(r > w, "right {r} <= wrong {w}");
    // a plan read from the DSL has "3" where the grammar writes 3: typed before it is scored
    let volume = Catalog::from_value(&serde_json::json!([
        {"name": "set_volume", "parameters": {"type": "object",
            "properties": {"level": {"type": "integer"}}, "required": ["level"]}}]))
    .unwrap();
    let p3 = Planner::pretrained(&gguf(), None, volume, PlannerSettings::chat()).unwrap();
    let dsl = plansmith_core::Syntax::Dsl
        .parse("set_volume(level=3)")
        .unwrap();
    let typed = p3.score("set the volume to 3", &dsl).unwrap();
    let json: plansmith_core::Plan = plansmith_core::Syntax::JsonArray
        .parse(r#"[{"name": "set_volume", "arguments": {"level": 3}}]"#)
        .unwrap();
    assert_eq!(typed, p3.score("set the volume to 3", &json).unwrap());
    let mut sampler = plansmith_lm::Sampler::new(0.0, 0);
    let d = p2
        .decode_free("what's the weather in Paris?", None, &mut sampler)
        .unwrap();
    assert!(!d.text.is_empty());
}

#[test]
fn planner_directory_round_trips() {
    let p = planner();
    let dir = std::env::temp_dir().join(format!("plansmith-pretrained-{}", std::process::id()));
    p.save(&dir).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("planner.json")).unwrap()).unwrap();
    assert_eq!(manifest["family"], "llama");
    assert!(!dir.join("model.safetensors").exists());
    let q = Planner::load(&dir).unwrap();
    for r in ["open safari", "wait 5 seconds"] {
        let a = p.decode(&PlanRequest::new(r)).unwrap();
        let b = q.decode(&PlanRequest::new(r)).unwrap();
        assert_eq!(a.text, b.text, "{r}");
        assert_eq!(a.conf_all, b.conf_all, "{r}");
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // A manifest pointing at a missing base model names it.
    let broken = std::env::temp_dir().join(format!("plansmith-broken-{}", std::process::id()));
    std::fs::create_dir_all(&broken).unwrap();
    let mut m = manifest.clone();
    m["llama"]["base"] = "nowhere/missing.gguf".into();
    std::fs::write(broken.join("planner.json"), m.to_string()).unwrap();
    let e = Planner::load(&broken)
        .err()
        .expect("missing base must fail")
        .to_string();
    assert!(e.contains("missing.gguf"), "{e}");
    // ... as the manifest's `llama.base`, resolved against the planner directory
    assert!(
        e.contains("planner.json") && e.contains("`llama.base` = nowhere/missing.gguf"),
        "{e}"
    );
    assert!(
        e.contains(&broken.join("nowhere/missing.gguf").display().to_string()),
        "{e}"
    );
    std::fs::remove_dir_all(&broken).unwrap();
}

/// A reply that would run on (a free string the model keeps writing) stops at the request's
/// token budget or its deadline, and escalates with the reason instead of leaving cut off.
#[test]
fn the_token_budget_and_the_deadline_stop_a_reply_that_runs_on() {
    let p = planner();
    let note = Arc::new(
        Catalog::from_value(&serde_json::json!([{
            "type": "function",
            "function": {"name": "note", "description": "Write down a note",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                  "required": ["text"]}}}]))
        .unwrap(),
    );
    let words = "the quick brown fox jumps over the lazy dog ".repeat(20);
    let request = format!("write down this whole note word for word: {words}");
    let budget = PlanRequest {
        catalog: Some(note.clone()),
        tool_choice: ToolChoice::Required,
        max_tokens: Some(24),
        ..PlanRequest::new(request.clone())
    };
    let d = p.decode(&budget).unwrap();
    assert!(d.truncated, "{:?}", d.text);
    let o = p.plan_request(&budget).unwrap();
    assert!(o.escalated && o.calls.is_empty(), "{o:?}");
    assert!(
        o.reason.as_deref().unwrap().contains("token budget"),
        "{o:?}"
    );

    let deadline = PlanRequest {
        catalog: Some(note),
        tool_choice: ToolChoice::Required,
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_millis(20)),
        ..PlanRequest::new(request)
    };
    let o = p.plan_request(&deadline).unwrap();
    assert!(o.escalated && o.calls.is_empty(), "{o:?}");
    assert!(
        o.reason.as_deref().unwrap().contains("deadline reached"),
        "{o:?}"
    );
    // Stopped well before the model's own budget of reply tokens.
    assert!(o.text.len() < 200, "{:?}", o.text);
}

#[test]
fn the_name_prior_reranks_the_first_name_of_a_json_reply_and_keeps_its_confidence() {
    // The correction (`--name-prior W`) on a pretrained model's JSON array reply: the first
    // tool name may change, the plan stays valid, and the confidence stays the model's own
    // log-probability of the reply (W = 0 is the plain decode: `prior.rs`, `name_prior.rs`).
    let requests = [
        "open safari",
        "what is on my screen",
        "wait for the download",
    ];
    let first = |d: &plansmith_planner::Decoded| {
        d.plan
            .as_ref()
            .and_then(|p| p.calls.first())
            .map(|c| c.name.clone())
    };
    let mut p = Planner::pretrained(&gguf(), None, pace(), PlannerSettings::chat()).unwrap();
    // a call is required: untrained, the model often answers `[]`
    let req = |r: &str| PlanRequest {
        tool_choice: ToolChoice::Required,
        ..PlanRequest::new(r)
    };
    let plain: Vec<_> = requests
        .iter()
        .map(|r| p.decode(&req(r)).unwrap())
        .collect();
    p.set_name_prior(1.0);
    let mut changed = 0;
    for (r, before) in requests.iter().zip(&plain) {
        let d = p.decode(&req(r)).unwrap();
        assert!(d.is_valid(), "{r}: {:?} {:?}", d.text, d.violations);
        changed += usize::from(first(&d) != first(before));
        eprintln!("{r}: {:?} -> {:?}", first(before), first(&d));
        // the confidence is the model's own: the same reply scores the same with or without it
        if d.text == before.text {
            assert!(
                (before.conf_all - d.conf_all).abs() < 1e-3,
                "{r}: {} vs {}",
                before.conf_all,
                d.conf_all
            );
        }
    }
    assert!(
        changed >= 1,
        "the correction changed no first name on the JSON path"
    );
}
