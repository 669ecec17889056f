//! `plansmith bench grammar`: compile and mask costs on a real vocabulary (Qwen's 151k
//! tiktoken), for the Pace catalog and a generated 100-tool catalog, envelope syntax.
//!
//! Per scenario: cold compile (generate + llguidance compile + first mask, cache cleared),
//! cache hit (prepare hit + per-request constraint + first mask), and the per-token mask
//! time (p50 / p99) while forcing a valid ~120-byte output token by token. The same schema,
//! output tokens and vocabulary are written out for `bench/grammar_peer.py` (xgrammar).

use std::path::{Path, PathBuf};
use std::time::Instant;

use plansmith_core::{Call, Catalog, CopyRule, CopyUnit, Plan, Policy, Syntax};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::{Engine, GrammarError, Options, Request, TokEnv, TokEnvError, ToolChoice};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Vocab(#[from] TokEnvError),
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    #[error("constraint rejected the benchmark output: {0}")]
    Rejected(String),
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// `qwen.tiktoken` (see `scripts/assets.sh`).
    pub tiktoken: PathBuf,
    /// The Pace catalog (`examples/pace/tools.json`).
    pub pace: PathBuf,
    /// Repetitions per measurement (medians are reported; masks pool all repetitions).
    pub repeats: usize,
    /// Where to write peer inputs (`<scenario>.json`), if anywhere.
    pub peer_dir: Option<PathBuf>,
}

/// One scenario's results (times in microseconds).
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub scenario: String,
    pub tools: usize,
    pub policy: String,
    pub cold_compile_us: f64,
    pub cache_hit_us: f64,
    pub mask_p50_us: f64,
    pub mask_p99_us: f64,
    pub mask_mean_us: f64,
    pub tokens: usize,
    pub output_bytes: usize,
    pub grammar_bytes: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub engine: String,
    pub vocab: usize,
    pub model_vocab: usize,
    /// One-time per-tokenizer setup (token trie + llguidance slicer).
    pub tokenizer_setup_ms: f64,
    pub rows: Vec<BenchRow>,
}

struct Scenario {
    name: &'static str,
    syntax: Syntax,
    catalog: Catalog,
    policy: Policy,
    request: Request,
    output: String,
}

/// Run every scenario.
pub fn run(cfg: &BenchConfig) -> Result<BenchReport, BenchError> {
    let t = Instant::now();
    let env = TokEnv::qwen_tiktoken(&cfg.tiktoken)?;
    let engine = Engine::new(env.clone())?;
    let setup = t.elapsed().as_secs_f64() * 1e3;
    let pace = Catalog::from_file(&cfg.pace)
        .map_err(|e| BenchError::Rejected(format!("pace catalog: {e}")))?;
    let pace_out = envelope(
        "perform",
        json!({"action": "click", "target": {"type": "ui_element", "label": "Save draft"}, "amount": 3}),
        "On it, saving.",
    );
    let gen = generated_catalog(100);
    let tool = &gen.tools[57];
    let gen_out = envelope(&tool.name, example_value(&tool.parameters), "Done.");
    let scenarios = vec![
        Scenario {
            name: "pace",
            syntax: Syntax::Envelope,
            catalog: pace.clone(),
            policy: Policy::default(),
            request: Request::new("click Save draft three times"),
            output: pace_out.clone(),
        },
        Scenario {
            name: "pace+copy",
            syntax: Syntax::Envelope,
            catalog: pace.clone(),
            policy: Policy {
                copy: CopyRule::FreeStrings,
                copy_unit: CopyUnit::Words,
            },
            // numbers are copied too: the request must hold the amount
            request: Request::new("click Save draft 3 times"),
            output: pace_out,
        },
        // the plan DSL checks copy spans beside one shared grammar (no per-request compile)
        Scenario {
            name: "pace+copy-dsl",
            syntax: Syntax::Dsl,
            catalog: pace,
            policy: Policy {
                copy: CopyRule::FreeStrings,
                copy_unit: CopyUnit::Words,
            },
            request: Request::new("click Save draft 3 times"),
            output:
                "perform(action=click; target.type=ui_element; target.label=Save draft; amount=3)\n"
                    .into(),
        },
        Scenario {
            name: "tools100",
            syntax: Syntax::Envelope,
            catalog: gen,
            policy: Policy::default(),
            request: Request::new("whatever the user said"),
            output: gen_out,
        },
    ];
    let mut rows = Vec::new();
    for s in &scenarios {
        rows.push(run_scenario(&engine, &env, s, cfg)?);
    }
    Ok(BenchReport {
        engine: "plansmith-grammar (llguidance 1.9, Rust)".into(),
        vocab: env.vocab_size(),
        model_vocab: env.model_vocab(),
        tokenizer_setup_ms: setup,
        rows,
    })
}

fn envelope(verb: &str, args: Value, spoken: &str) -> String {
    let plan = Plan {
        calls: vec![Call::new(
            verb,
            args.as_object().cloned().unwrap_or_default(),
        )],
        spoken_text: Some(spoken.to_string()),
    };
    Syntax::Envelope.render(&plan)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn run_scenario(
    engine: &Engine,
    env: &TokEnv,
    s: &Scenario,
    cfg: &BenchConfig,
) -> Result<BenchRow, BenchError> {
    let options = Options {
        syntax: s.syntax,
        policy: s.policy.clone(),
        tool_choice: ToolChoice::Required,
        max_calls: 1,
    };
    let hash = s.catalog.hash();
    let repeats = cfg.repeats.max(1);
    let mut cold = Vec::new();
    let mut grammar_bytes = 0;
    for _ in 0..repeats {
        engine.clear_cache();
        let t = Instant::now();
        let p = engine.prepare_hashed(&hash, &s.catalog, &options)?;
        let mut c = engine.constraint_for(&p, &s.request)?;
        c.mask().map_err(|d| BenchError::Rejected(d.reason))?;
        cold.push(t.elapsed().as_secs_f64() * 1e6);
        grammar_bytes = p.template().template_text().len();
    }
    let mut hit = Vec::new();
    let mut masks = Vec::new();
    let tokens = env.tokenize(&s.output);
    for _ in 0..repeats {
        let t = Instant::now();
        let p = engine.prepare_hashed(&hash, &s.catalog, &options)?;
        let mut c = engine.constraint_for(&p, &s.request)?;
        c.mask().map_err(|d| BenchError::Rejected(d.reason))?;
        hit.push(t.elapsed().as_secs_f64() * 1e6);
        // the first mask is part of the hit time; then time every later mask
        c.commit(tokens[0])
            .map_err(|d| BenchError::Rejected(d.reason))?;
        for &tok in &tokens[1..] {
            let t = Instant::now();
            let ok = c
                .mask()
                .map_err(|d| BenchError::Rejected(d.reason))?
                .is_allowed(tok);
            masks.push(t.elapsed().as_secs_f64() * 1e6);
            if !ok {
                return Err(BenchError::Rejected(format!(
                    "{}: token {tok} refused in {:?}",
                    s.name,
                    c.output_text()
                )));
            }
            c.commit(tok).map_err(|d| BenchError::Rejected(d.reason))?;
        }
        if !c.is_accepting() {
            return Err(BenchError::Rejected(format!(
                "{}: output incomplete",
                s.name
            )));
        }
    }
    masks.sort_by(f64::total_cmp);
    // the JSON-schema peer takes the envelope only
    if let (Some(dir), Syntax::Envelope) = (&cfg.peer_dir, s.syntax) {
        write_peer_input(dir, s, &tokens)?;
    }
    Ok(BenchRow {
        scenario: s.name.into(),
        tools: s.catalog.tools.len(),
        policy: match &s.policy.copy {
            CopyRule::None => "none".into(),
            CopyRule::FreeStrings => "copy free strings".into(),
            CopyRule::Only(_) => "copy listed".into(),
        },
        cold_compile_us: median(cold),
        cache_hit_us: median(hit),
        mask_p50_us: percentile(&masks, 0.5),
        mask_p99_us: percentile(&masks, 0.99),
        mask_mean_us: masks.iter().sum::<f64>() / masks.len() as f64,
        tokens: tokens.len(),
        output_bytes: s.output.len(),
        grammar_bytes,
    })
}

/// The envelope as one JSON Schema (`anyOf` of `{verb: const, args, spoken_text?}`), the
/// form a JSON-schema engine such as xgrammar takes.
pub fn envelope_schema(catalog: &Catalog) -> Value {
    let branches: Vec<Value> = catalog
        .tools
        .iter()
        .map(|t| {
            json!({"type": "object", "properties": {
                "verb": {"const": t.name}, "args": t.parameters, "spoken_text": {"type": "string"}},
                "required": ["verb", "args"], "additionalProperties": false})
        })
        .collect();
    json!({"anyOf": branches})
}

fn write_peer_input(dir: &Path, s: &Scenario, tokens: &[u32]) -> Result<(), BenchError> {
    let io = |source| BenchError::Io {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let v = json!({"scenario": s.name, "schema": envelope_schema(&s.catalog), "output": s.output, "tokens": tokens,
                   "copy_policy": !matches!(s.policy.copy, CopyRule::None)});
    let path = dir.join(format!("{}.json", s.name));
    std::fs::write(&path, serde_json::to_string(&v).unwrap_or_default()).map_err(|source| {
        BenchError::Io {
            path: path.display().to_string(),
            source,
        }
    })
}

/// A deterministic catalog of `n` tools with strings, enums, bounded integers, booleans,
/// numbers and nested objects.
pub fn generated_catalog(n: usize) -> Catalog {
    let mut tools = Vec::with_capacity(n);
    for i in 0..n {
        let mut props = Map::new();
        let mut required = Vec::new();
        let k = 3 + i % 4;
        for j in 0..k {
            let name = format!("arg{j}");
            let schema = match (i + j) % 6 {
                0 => json!({"type": "string", "description": "free text"}),
                1 => {
                    json!({"type": "string", "enum": ["low", "medium", "high", format!("mode{i}")]})
                }
                2 => json!({"type": "integer", "minimum": 0, "maximum": 10 * (i as i64 + 1)}),
                3 => json!({"type": "boolean"}),
                4 => json!({"type": "number", "minimum": -5, "maximum": 500}),
                _ => json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "count": {"type": "integer", "minimum": 1, "maximum": 9}},
                    "required": ["name"], "additionalProperties": false}),
            };
            props.insert(name.clone(), schema);
            if j % 2 == 0 {
                required.push(name);
            }
        }
        tools.push(json!({"name": format!("tool_{i:03}"), "description": format!("generated tool {i}"),
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": false}}));
    }
    Catalog::from_value(&Value::Array(tools)).unwrap_or_else(|_| Catalog {
        tools: Vec::new(),
        format: plansmith_core::CatalogFormat::OpenAi,
    })
}

/// A valid value for the simple schemas of [`generated_catalog`] (every property filled).
pub fn example_value(schema: &Value) -> Value {
    if let Some(e) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return e.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut m = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    m.insert(k.clone(), example_value(v));
                }
            }
            Value::Object(m)
        }
        Some("integer") => json!(schema
            .get("minimum")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(1)),
        Some("number") => json!(2.5),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        _ => json!("hello world"),
    }
}

/// A fixed-width table of the report.
pub fn table(report: &BenchReport) -> String {
    let mut out = format!(
        "{} — vocab {} (logits {}), tokenizer setup {:.1} ms\n",
        report.engine, report.vocab, report.model_vocab, report.tokenizer_setup_ms
    );
    out.push_str(&format!(
        "{:<14} {:>5} {:<18} {:>12} {:>12} {:>10} {:>10} {:>10} {:>6} {:>6}\n",
        "scenario",
        "tools",
        "policy",
        "cold (ms)",
        "hit (us)",
        "mask p50",
        "mask p99",
        "mask mean",
        "tokens",
        "bytes"
    ));
    for r in &report.rows {
        out.push_str(&format!(
            "{:<14} {:>5} {:<18} {:>12.2} {:>12.1} {:>10.1} {:>10.1} {:>10.1} {:>6} {:>6}\n",
            r.scenario,
            r.tools,
            r.policy,
            r.cold_compile_us / 1e3,
            r.cache_hit_us,
            r.mask_p50_us,
            r.mask_p99_us,
            r.mask_mean_us,
            r.tokens,
            r.output_bytes
        ));
    }
    out
}
