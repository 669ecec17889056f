//! A Qwen2 GGUF end to end: Qwen2.5-Coder-0.5B-Instruct (`scripts/assets.sh qwen05`; Q5_0,
//! Q8_0, Q4_K and Q6_K tensors, q/k/v biases, a 151k vocabulary, a chat template that renders
//! tools itself). Both reply formats give plans that parse and validate against the catalog;
//! the model's own `<tool_call>` format plans "open safari" as Pace's `open` of the app.

use std::path::PathBuf;
use std::sync::OnceLock;

use plansmith_core::{Catalog, Syntax};
use plansmith_planner::{PlanRequest, Planner, PlannerSettings};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gguf() -> PathBuf {
    let p = root().join("assets/qwen05.gguf");
    assert!(
        p.exists(),
        "{} is missing: run scripts/assets.sh qwen05 first",
        p.display()
    );
    p
}

fn pace() -> Catalog {
    Catalog::from_file(root().join("examples/pace/tools.json")).unwrap()
}

fn planner(syntax: Syntax) -> Planner {
    let mut settings = PlannerSettings::chat();
    settings.syntax = syntax;
    Planner::pretrained(&gguf(), None, pace(), settings).expect("load Qwen2.5-Coder-0.5B")
}

fn tool_call_planner() -> &'static Planner {
    static P: OnceLock<Planner> = OnceLock::new();
    P.get_or_init(|| planner(Syntax::ToolCall))
}

#[test]
fn tool_call_format_plans_open_safari_and_reuses_the_tools_prefix() {
    let p = tool_call_planner();
    let out = p.plan_request(&PlanRequest::new("open safari")).unwrap();
    assert!(
        out.text.starts_with("<tool_call>\n{\"name\": \"open\""),
        "{}",
        out.text
    );
    let first = out.calls.first().expect("a call");
    assert_eq!(first.name, "open", "{}", out.text);
    assert_eq!(
        first.arguments["target"],
        serde_json::json!({"type": "app", "label": "Safari"}),
        "{}",
        out.text
    );
    // The second request against the same catalog starts from the cached tools prompt.
    let before = p.counters().prefix_cache_hits;
    let again = p
        .plan_request(&PlanRequest::new("set a timer for 5 minutes"))
        .unwrap();
    assert_eq!(p.counters().prefix_cache_hits, before + 1);
    assert!(again.calls.iter().all(|c| pace().get(&c.name).is_some()));
}

#[test]
fn json_format_gives_a_valid_plan_too() {
    let p = planner(Syntax::JsonArray);
    let out = p.plan_request(&PlanRequest::new("open safari")).unwrap();
    assert!(out.text.starts_with('['), "{}", out.text);
    // What the grammar let through parses and validates (a failure would be a `reason`).
    assert!(out.reason.is_none(), "{:?}: {}", out.reason, out.text);
}

/// A LoRA training example in the `<tool_call>` format is what the planner will see and write:
/// the template's own tools prompt token for token, then the reply as the model writes it
/// itself (its `<tool_call>` token, Python's JSON spacing: here the very text the untrained
/// model decodes for this request), then the end of the turn.
#[test]
fn lora_examples_in_the_tool_call_format_are_the_planners_prompt_and_the_models_own_reply() {
    use plansmith_planner::lora_train::{examples, ExampleFormat};
    use plansmith_planner::{LlamaLm, LlamaSource, ModelBackend};
    let lm = LlamaLm::load(LlamaSource {
        base: gguf(),
        adapter: None,
    })
    .unwrap();
    let eos = lm.grammar_eos();
    let trace: plansmith_core::Trace = serde_json::from_value(serde_json::json!({
        "request": "open safari",
        "calls": [{"name": "open", "arguments": {"target": {"type": "app", "label": "Safari"}}}]
    }))
    .unwrap();
    let format = ExampleFormat {
        reply: Syntax::ToolCall,
        tool_list: plansmith_llama::ToolList::Json,
    };
    let out = examples(&lm.bundle, &[trace], &pace(), eos, usize::MAX, format).unwrap();
    let e = &out.examples[0];
    let tok = &lm.bundle.tokenizer;
    let prompt = lm
        .bundle
        .template
        .native_tools_prompt(&pace().to_openai(), "open safari")
        .unwrap();
    assert_eq!(e.tokens[..e.prompt_len], prompt.tokenize(tok).tokens[..]);
    let reply = &e.tokens[e.prompt_len..];
    assert_eq!(reply.last(), Some(&eos));
    assert_eq!(Some(reply[0]), tok.special_id("<tool_call>"));
    let text = tok.decode(&reply[..reply.len() - 1], false).unwrap();
    let decoded = tool_call_planner()
        .plan_request(&PlanRequest::new("open safari"))
        .unwrap()
        .text;
    assert_eq!(
        text,
        decoded.trim_end(),
        "what training teaches vs what the planner writes"
    );
}
