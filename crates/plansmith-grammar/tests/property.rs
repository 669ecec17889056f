//! Random catalogs x random "models": every constrained output must parse and validate.
//!
//! 10,000 decodes in total (4 syntaxes x 2,500), over random catalogs with nested objects,
//! enums, arrays, optional parameters, bounded integers / numbers, booleans, entity refs,
//! random policies (copy words / chars / none), random requests with visible entities, and
//! random tool_choice / max_calls.
//!
//! And for the plan DSL, where copied values are checked while decoding beside one shared
//! grammar: on random walks the shared grammar plus the copy check allow exactly the tokens
//! the request's own compiled grammar allows, at every step.

mod common;

use common::{random_decode, Decode, Rng};
use plansmith_core::{Catalog, CopyRule, CopyUnit, ParamRef, PlanValidator, Policy, Syntax};
use plansmith_grammar::{Engine, Entity, Options, Request, TokEnv, ToolChoice};
use serde_json::{json, Map, Value};

const WORDS: &[&str] = &[
    "open",
    "Safari",
    "alpha",
    "beta",
    "4242",
    "gamma",
    "set",
    "volume",
    "to",
    "42",
    "the",
    "Save",
    "draft",
    "cmd+s",
    "please",
    "x-ray",
    "2024-05-01",
    "Ana",
    "notes.txt",
    "a=b",
    "(x)",
    "why?",
    "3.5",
    "-7",
    // numbers no span spells as JSON writes them: copied as 1000, 2.5, 3, 70 / 72, 2
    "1,000",
    "2.50",
    "three",
    "seventy",
    "two",
    "twice",
];
const ENUMS: &[&str] = &[
    "red", "green", "blue", "on", "off", "up", "down", "a b", "x-1", "0",
];
const ENTITY_TYPES: &[&str] = &["app", "file", "ui_element"];

fn leaf(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 | 1 => {
            let mut s = json!({"type": "string"});
            if rng.chance(0.2) {
                s["maxLength"] = json!(1 + rng.below(12));
            }
            s
        }
        2 => {
            let n = 1 + rng.below(4);
            let start = rng.below(ENUMS.len());
            let vals: Vec<&str> = (0..n).map(|i| ENUMS[(start + i) % ENUMS.len()]).collect();
            json!({"type": "string", "enum": vals})
        }
        3 | 4 => {
            let mut s = json!({"type": "integer"});
            if rng.chance(0.6) {
                let lo = rng.below(200) as i64 - 100;
                s["minimum"] = json!(lo);
                if rng.chance(0.7) {
                    s["maximum"] = json!(lo + rng.below(500) as i64);
                }
            }
            s
        }
        5 => {
            let mut s = json!({"type": "number"});
            if rng.chance(0.5) {
                s["minimum"] = json!(-2.5);
                s["exclusiveMaximum"] = json!(1000);
            }
            s
        }
        6 => json!({"type": "boolean"}),
        _ => json!({"type": "integer", "enum": [1, 2, 3]}),
    }
}

fn schema(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth >= 2 { 6 } else { 9 }) {
        6 => {
            let n = 1 + rng.below(3);
            object(rng, depth + 1, n)
        }
        7 => {
            let items = if rng.chance(0.3) && depth < 2 {
                object(rng, depth + 1, 2)
            } else {
                leaf(rng)
            };
            let mut a = json!({"type": "array", "items": items});
            if rng.chance(0.7) {
                a["maxItems"] = json!(1 + rng.below(4));
            }
            if rng.chance(0.3) {
                a["minItems"] = json!(1);
            }
            a
        }
        8 => json!({"type": "object", "properties": {
                "type": {"type": "string", "enum": ENTITY_TYPES},
                "label": {"type": "string"}},
            "required": ["type", "label"], "additionalProperties": false}),
        _ => leaf(rng),
    }
}

fn object(rng: &mut Rng, depth: usize, n: usize) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("p{depth}{i}");
        props.insert(name.clone(), schema(rng, depth));
        if rng.chance(0.5) {
            required.push(name);
        }
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

fn catalog(rng: &mut Rng) -> Catalog {
    let n = 1 + rng.below(4);
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            let k = rng.below(5);
            json!({"name": format!("tool_{i}"), "description": "d", "parameters": object(rng, 0, k)})
        })
        .collect();
    Catalog::from_value(&Value::Array(tools)).expect("generated catalog is valid")
}

fn request(rng: &mut Rng) -> Request {
    let n = 3 + rng.below(8);
    let words: Vec<&str> = (0..n).map(|_| *rng.pick(WORDS)).collect();
    let text = words.join(if rng.chance(0.2) { ", " } else { " " });
    let mut entities = Vec::new();
    for _ in 0..rng.below(4) {
        let label = if rng.chance(0.7) {
            words[rng.below(words.len())].to_string()
        } else {
            "Elsewhere".to_string()
        };
        entities.push(Entity {
            entity_type: rng.pick(ENTITY_TYPES).to_string(),
            label,
        });
    }
    Request { text, entities }
}

fn policy(rng: &mut Rng, catalog: &Catalog, syntax: Syntax) -> Policy {
    let unit = if rng.chance(0.7) {
        CopyUnit::Words
    } else {
        CopyUnit::Chars
    };
    let copy = match rng.below(if syntax == Syntax::Dsl { 4 } else { 5 }) {
        0 | 1 => CopyRule::FreeStrings,
        2 => {
            // copy the first top-level parameter of every tool, whatever its type
            let params = catalog
                .tools
                .iter()
                .filter_map(|t| {
                    t.param_names().first().map(|p| ParamRef {
                        tool: t.name.clone(),
                        path: p.to_string(),
                    })
                })
                .collect();
            CopyRule::Only(params)
        }
        _ => CopyRule::None,
    };
    Policy {
        copy,
        copy_unit: unit,
    }
}

fn run(syntax: Syntax, env: &TokEnv, total: usize, seed: u64) {
    let engine = Engine::new(env.clone()).unwrap();
    let mut rng = Rng::new(seed);
    let (mut done, mut unfinished, mut compile_errors, mut refused) =
        (0usize, 0usize, 0usize, 0usize);
    let mut failures: Vec<String> = Vec::new();
    let mut calls_seen = 0usize;
    while done + unfinished < total {
        let cat = catalog(&mut rng);
        let validator = PlanValidator::new(&cat).unwrap();
        let tool_choice = match rng.below(6) {
            0 => ToolChoice::None,
            1 => ToolChoice::Required,
            2 => ToolChoice::Named(cat.tools[rng.below(cat.tools.len())].name.clone()),
            _ => ToolChoice::Auto,
        };
        let max_calls = 1 + rng.below(3);
        let options = Options {
            syntax,
            policy: policy(&mut rng, &cat, syntax),
            tool_choice: tool_choice.clone(),
            max_calls,
        };
        let prepared = match engine.prepare(&cat, &options) {
            Ok(p) => p,
            Err(e) => {
                // only documented, typed refusals are acceptable
                assert!(
                    matches!(e, plansmith_grammar::GrammarError::Unsupported { .. }),
                    "{e}"
                );
                compile_errors += 1;
                continue;
            }
        };
        for _ in 0..10 {
            let req = request(&mut rng);
            let mut c = match engine.constraint_for(&prepared, &req) {
                Ok(c) => c,
                // a required call whose every tool needs a value this request cannot supply
                Err(plansmith_grammar::GrammarError::NoCallableTool)
                    if !matches!(tool_choice, ToolChoice::Auto | ToolChoice::None) =>
                {
                    refused += 1;
                    continue;
                }
                Err(e) => panic!("{syntax}: per-request compile failed: {e}"),
            };
            let out = match random_decode(&mut c, env, &mut rng, 600) {
                Ok(Decode::Done(text)) => text,
                Ok(Decode::Unfinished) => {
                    unfinished += 1;
                    continue;
                }
                Ok(Decode::Stuck(why)) => panic!(
                    "{syntax}: stuck: {why}\n{:?}",
                    prepared.template().grammar(&req)
                ),
                Err(dead) => panic!("{syntax}: dead: {dead}"),
            };
            done += 1;
            let plan = match syntax.parse(&out) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("parse error {e}: {out:?}"));
                    continue;
                }
            };
            let plan = if syntax.is_untyped() {
                validator.type_values(&plan)
            } else {
                plan
            };
            let violations = validator.validate(&plan, &options.policy, Some(&req.text));
            if !violations.is_empty() {
                failures.push(format!(
                    "{out:?} (request {:?}, policy {:?}): {}",
                    req.text,
                    options.policy,
                    violations
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            let n = plan.calls.len();
            calls_seen += n;
            let choice_ok = n <= max_calls
                && match &tool_choice {
                    ToolChoice::None => n == 0,
                    ToolChoice::Auto => true,
                    ToolChoice::Required => n >= 1,
                    ToolChoice::Named(name) => n >= 1 && plan.calls.iter().all(|c| &c.name == name),
                };
            if !choice_ok {
                failures.push(format!(
                    "tool_choice {tool_choice:?} / max {max_calls} violated by {out:?}"
                ));
            }
            if done + unfinished >= total {
                break;
            }
        }
    }
    eprintln!(
        "{syntax}: {done} decodes, {unfinished} unfinished, {calls_seen} calls, {compile_errors} catalogs refused, {refused} requests refused, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
    assert!(
        unfinished * 50 < total,
        "too many unfinished decodes: {unfinished}"
    );
}

fn count() -> usize {
    std::env::var("PLANSMITH_PROPTEST_DECODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500)
}

#[test]
fn dsl_outputs_always_valid() {
    run(Syntax::Dsl, &common::char_env(), count(), 1);
}

#[test]
fn envelope_outputs_always_valid() {
    run(Syntax::Envelope, &common::small_bpe_env(), count(), 2);
}

#[test]
fn json_array_outputs_always_valid() {
    run(Syntax::JsonArray, &common::small_bpe_env(), count(), 3);
}

#[test]
fn tool_call_outputs_always_valid() {
    run(Syntax::ToolCall, &common::small_bpe_env(), count(), 5);
}

#[test]
fn openai_outputs_always_valid() {
    run(Syntax::OpenAi, &common::char_env(), count(), 4);
}

/// Random walks through the DSL with both constraints for one request: the shared grammar plus
/// the copy check, and the request's own grammar. Returns the number of steps compared.
fn same_masks(env: &TokEnv, walks: usize, seed: u64) -> usize {
    let engine = Engine::new(env.clone()).unwrap();
    let mut rng = Rng::new(seed);
    let (mut compared_walks, mut steps) = (0usize, 0usize);
    let mut tries = 0;
    while compared_walks < walks {
        tries += 1;
        assert!(
            tries < walks * 50,
            "too few catalogs take the shared-grammar path"
        );
        let cat = catalog(&mut rng);
        let tool_choice = match rng.below(4) {
            0 => ToolChoice::Required,
            _ => ToolChoice::Auto,
        };
        let options = Options {
            syntax: Syntax::Dsl,
            policy: policy(&mut rng, &cat, Syntax::Dsl),
            tool_choice,
            max_calls: 1 + rng.below(3),
        };
        let Ok(prepared) = engine.prepare(&cat, &options) else {
            continue;
        };
        for _ in 0..4 {
            let mut req = request(&mut rng);
            if rng.chance(0.7) {
                req.entities.clear();
            }
            let Ok(mut fast) = engine.constraint_for(&prepared, &req) else {
                continue;
            };
            if !fast.checks_copies_while_decoding() {
                continue;
            }
            let text = prepared.template().grammar(&req).unwrap();
            let mut exact = engine.constraint_from_lark(&text).unwrap();
            compared_walks += 1;
            for _ in 0..80 {
                let a = fast.mask().unwrap().allowed();
                let b = exact.mask().unwrap().allowed();
                assert_eq!(
                    a,
                    b,
                    "masks differ after {:?} for request {:?}\n{text}",
                    exact.output_text(),
                    req.text
                );
                steps += 1;
                if a.is_empty() || exact.is_stopped() {
                    break;
                }
                // lean towards value-ending tokens so walks cover several keys and calls
                let closing: Vec<u32> = a
                    .iter()
                    .copied()
                    .filter(|&t| env.token_bytes(t).iter().any(|c| b";)|\n".contains(c)))
                    .collect();
                let t = if !closing.is_empty() && rng.chance(0.25) {
                    *rng.pick(&closing)
                } else {
                    *rng.pick(&a)
                };
                fast.commit(t).unwrap();
                exact.commit(t).unwrap();
                if t == env.eos() {
                    break;
                }
            }
        }
    }
    steps
}

/// Bytes plus DSL pieces that close a value and open the next one inside one token.
fn dsl_crossing_env() -> TokEnv {
    common::bytes_plus(
        &[
            "; p00=",
            "; p01=",
            "; p02=",
            ")\n",
            ") | ",
            "; ",
            "=4",
            "2; p0",
            "a; p01=x",
            "s)",
            "tool_0(",
            "tool_1(p00=",
            " to",
            "ta",
        ],
        None,
    )
}

#[test]
fn dsl_copy_check_beside_a_shared_grammar_allows_exactly_the_request_grammar() {
    let steps = same_masks(&common::char_env(), 150, 11)
        + same_masks(&common::small_bpe_env(), 150, 12)
        + same_masks(&dsl_crossing_env(), 150, 13);
    eprintln!("{steps} masks compared");
    assert!(steps > 3000, "only {steps} masks compared");
}
