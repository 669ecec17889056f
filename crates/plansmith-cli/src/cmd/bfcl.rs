//! `plansmith eval bfcl`: a planner (tiny or pretrained, constrained or free) or any
//! OpenAI-compatible endpoint answers BFCL items; BFCL's own rules score them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use plansmith_core::{Catalog, Plan, Syntax};
use plansmith_eval::{
    load_categories, run_eval_resuming, BfclCall, BfclItem, CheckOptions, Journal, Subject,
    SubjectError, SubjectOutput, PUBLISHED_ANCHORS,
};
use plansmith_planner::teacher::OpenAiTeacher;
use plansmith_planner::{GrammarError, PlanRequest, Planner, PlannerError};
use serde_json::{json, Map, Value};

use crate::Outcome;

/// The data directory as a report names it: as the user gave it, or for the default the
/// repository-relative `assets/bfcl` rather than this build's absolute path (reports are
/// committed and read on other machines).
fn data_dir_label(args: &BfclArgs, resolved: &Path) -> String {
    match (&args.data_dir, std::env::var_os("PLANSMITH_ASSETS")) {
        (Some(given), _) => given.display().to_string(),
        (None, Some(_)) => resolved.display().to_string(),
        (None, None) => "assets/bfcl".to_string(),
    }
}

/// The journal a run with --out keeps in its directory until it finishes.
const JOURNAL: &str = "items.partial.jsonl";

/// The categories BFCL's non-live AST score averages, plus irrelevance.
const DEFAULT_CATEGORIES: &str = "simple_python,multiple,parallel,parallel_multiple,irrelevance";

#[derive(Args)]
pub struct BfclArgs {
    /// The model is scored on its own decode (constrained, or --free), before any confidence
    /// gate or teacher; with --cascade, on the plan that leaves the cascade (a model hop's or
    /// the teacher's).
    #[command(flatten)]
    local: super::plan::ModelArgs,
    /// Decode without the grammar (free text, parsed leniently) to measure what the
    /// constraint buys.
    #[arg(long)]
    free: bool,
    /// Score an OpenAI-compatible server instead of a local planner (e.g.
    /// http://127.0.0.1:8080/v1 for llama.cpp's server, vLLM, or `plansmith serve`).
    #[arg(long, value_name = "URL", conflicts_with_all = ["planner", "gguf", "free", "cascade"])]
    endpoint: Option<String>,
    /// Model name sent to --endpoint.
    #[arg(long, requires = "endpoint", default_value = "default")]
    model: String,
    /// Environment variable holding the endpoint's API key.
    #[arg(long, requires = "endpoint", default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// Seconds per request to --endpoint.
    #[arg(long, requires = "endpoint", default_value_t = 120)]
    timeout: u64,
    /// BFCL data directory (`BFCL_v4_<category>.json` + `possible_answer/`); default: the
    /// copy `scripts/assets.sh` puts in assets/bfcl.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Comma-separated categories.
    #[arg(long, default_value = DEFAULT_CATEGORIES, value_delimiter = ',')]
    categories: Vec<String>,
    /// At most this many items per category (the first ones, in file order).
    #[arg(long)]
    limit: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write report.json, items.jsonl, report.md and chart.svg here. Until the run ends, each
    /// scored item is appended to items.partial.jsonl there: the same command run again
    /// resumes a stopped run (another model or mode is refused: remove the file to start over).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A local planner as a BFCL subject: each item's functions become the request's catalog.
struct PlannerSubject {
    planner: Planner,
    free: bool,
    name: String,
}

impl Subject for PlannerSubject {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        let start = Instant::now();
        let request = item.request().unwrap_or_default();
        let catalog = match item_catalog(item) {
            Ok(c) => c,
            Err(e) => {
                let gate = (!self.free).then_some(false);
                return Ok(no_answer(e, start, gate));
            }
        };
        let decoded = if self.free {
            let mut greedy = plansmith_lm::Sampler::new(0.0, 0);
            self.planner
                .decode_free(request, Some(&catalog), &mut greedy)
        } else {
            let req = PlanRequest {
                catalog: Some(catalog),
                ..PlanRequest::new(request)
            };
            self.planner.decode(&req)
        };
        let decoded = match decoded {
            Ok(d) => d,
            // A schema the grammar cannot constrain (e.g. a required key with no schema) is a
            // catalog this planner refuses, as a server would with a 400: no answer for this
            // item, not the end of the run.
            Err(e @ PlannerError::Grammar(GrammarError::Unsupported { .. })) => {
                let gate = (!self.free).then_some(false);
                return Ok(no_answer(e.to_string(), start, gate));
            }
            Err(e) => return Err(SubjectError::model(e)),
        };
        let calls = match (&decoded.plan, &decoded.dead) {
            (Some(plan), None) => Some(bfcl_calls(plan)),
            _ => None,
        };
        // Free decoding has no gate; constrained decoding reports what the floor would do.
        let accepted = (!self.free).then(|| self.planner.gate(&decoded).is_none());
        let confidence =
            (!self.free).then(|| f64::from(decoded.confidence(self.planner.settings.confidence)));
        Ok(SubjectOutput {
            text: decoded.text,
            calls,
            latency: start.elapsed(),
            accepted,
            confidence,
        })
    }
}

/// A cascade as a BFCL subject: the plan that leaves it (from a model hop or the teacher) is
/// the answer; a request every hop escalated, with no teacher answer, gets none.
struct CascadeSubject {
    planner: Planner,
    name: String,
}

impl Subject for CascadeSubject {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        let start = Instant::now();
        let request = item.request().unwrap_or_default();
        let catalog = match item_catalog(item) {
            Ok(c) => c,
            Err(e) => return Ok(no_answer(e, start, Some(false))),
        };
        let req = PlanRequest {
            catalog: Some(catalog),
            ..PlanRequest::new(request)
        };
        let o = match self.planner.plan_request(&req) {
            Ok(o) => o,
            // As for a single planner: a catalog the grammar refuses is no answer.
            Err(e @ PlannerError::Grammar(GrammarError::Unsupported { .. })) => {
                return Ok(no_answer(e.to_string(), start, Some(false)))
            }
            Err(e) => return Err(SubjectError::model(e)),
        };
        let answered = o.source != plansmith_planner::Source::None;
        let plan = Plan {
            calls: o.calls,
            spoken_text: None,
        };
        Ok(SubjectOutput {
            text: format!(
                "{} ({})",
                o.text.trim_end(),
                o.hop.as_deref().unwrap_or("no hop")
            ),
            calls: answered.then(|| bfcl_calls(&plan)),
            latency: start.elapsed(),
            accepted: Some(answered),
            confidence: None,
        })
    }
}

/// An item's functions as the request's catalog. A schema the planner cannot constrain is an
/// answer it cannot give (the error, as the subject's text), not a crash.
fn item_catalog(item: &BfclItem) -> Result<Arc<Catalog>, String> {
    Catalog::from_value(&Value::Array(item.functions.clone()))
        .map(Arc::new)
        .map_err(|e| format!("catalog: {e}"))
}

/// No answer at all: nothing acts, so a gated subject counts it as escalated (`Some(false)`).
fn no_answer(text: String, start: Instant, accepted: Option<bool>) -> SubjectOutput {
    SubjectOutput {
        text,
        calls: None,
        latency: start.elapsed(),
        accepted,
        confidence: None,
    }
}

fn bfcl_calls(plan: &Plan) -> Vec<BfclCall> {
    plan.calls
        .iter()
        .map(|c| {
            let args: Map<String, Value> = c.arguments.clone();
            BfclCall::new(c.name.clone(), args)
        })
        .collect()
}

/// An OpenAI-compatible endpoint as a BFCL subject. Function names with dots are sent with
/// underscores (OpenAI's name pattern forbids dots, as BFCL's own OpenAI handler does) and
/// mapped back.
struct EndpointSubject {
    client: OpenAiTeacher,
}

impl Subject for EndpointSubject {
    fn name(&self) -> String {
        format!("{} @ {}", self.client.model, self.client.url)
    }

    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError> {
        let start = Instant::now();
        let mut renamed: Vec<(String, String)> = Vec::new();
        let tools: Vec<Value> = item
            .functions
            .iter()
            .map(|f| {
                let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
                let sent = name.replace('.', "_");
                renamed.push((sent.clone(), name.to_string()));
                let parameters = plansmith_eval::bfcl_schema::function_parameters_schema(f)
                    .unwrap_or_else(|_| json!({"type": "object", "properties": {}}));
                json!({"type": "function", "function": {
                    "name": sent, "description": f.get("description").cloned().unwrap_or(json!("")),
                    "parameters": parameters}})
            })
            .collect();
        let messages: Vec<Value> = item
            .question
            .iter()
            .flatten()
            .map(|m| json!({"role": m.role, "content": m.content}))
            .collect();
        let body = json!({"model": self.client.model, "messages": messages, "tools": tools,
                          "tool_choice": "auto", "temperature": 0});
        let (response, _) = self
            .client
            .complete(&body)
            .map_err(SubjectError::endpoint)?;
        let message = response
            .pointer("/choices/0/message")
            .cloned()
            .unwrap_or(Value::Null);
        let text = message.to_string();
        let calls = Syntax::OpenAi.parse(&text).ok().map(|plan| {
            let mut calls = bfcl_calls(&plan);
            for c in &mut calls {
                if let Some((_, original)) = renamed.iter().find(|(sent, _)| *sent == c.name) {
                    c.name = original.clone();
                }
            }
            calls
        });
        Ok(SubjectOutput {
            text,
            calls,
            latency: start.elapsed(),
            accepted: None,
            confidence: None,
        })
    }
}

pub fn run(args: BfclArgs) -> anyhow::Result<Outcome> {
    let dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => plansmith_eval::bfcl_dir()?,
    };
    let names: Vec<&str> = args.categories.iter().map(String::as_str).collect();
    let mut items = load_categories(&dir, &names)?;
    if let Some(limit) = args.limit {
        let mut kept: std::collections::HashMap<String, usize> = Default::default();
        items.retain(|it| {
            let n = kept.entry(it.category.clone()).or_default();
            *n += 1;
            *n <= limit
        });
    }
    let mut subject: Box<dyn Subject> = match &args.endpoint {
        Some(url) => Box::new(EndpointSubject {
            client: OpenAiTeacher::new(
                url,
                &args.model,
                std::env::var(&args.api_key_env).ok(),
                Duration::from_secs(args.timeout),
            ),
        }),
        None if args.local.cascade.is_some() => {
            anyhow::ensure!(!args.free, "--free does not apply to a --cascade");
            let path = args.local.cascade.as_ref().expect("checked above");
            Box::new(CascadeSubject {
                planner: super::plan::load_model(&args.local)?,
                name: format!("cascade {}", file_name(path)),
            })
        }
        None => {
            let planner = super::plan::load_model(&args.local)?;
            let base = match (&args.local.gguf, &args.local.planner) {
                (Some(g), _) => file_name(g),
                (None, Some(p)) => file_name(p),
                (None, None) => match planner.remote_engine() {
                    Some(engine) => engine.describe(),
                    None => "default planner".into(),
                },
            };
            let lora = args
                .local
                .lora
                .as_ref()
                .map(|l| format!(" + {}", file_name(l)))
                .unwrap_or_default();
            let mode = if args.free { "free" } else { "constrained" };
            Box::new(PlannerSubject {
                planner,
                free: args.free,
                name: format!("{base}{lora} ({mode})"),
            })
        }
    };
    let name = subject.name();
    // With --out, each scored item is appended to a journal there as it is scored: a stopped run
    // (every item of a category is hours on a laptop) resumes where it stopped.
    let journal_key = run_description(&name, &args, &dir);
    let (mut journal, done) = match &args.out {
        Some(out) => {
            std::fs::create_dir_all(out).map_err(|e| {
                anyhow::anyhow!("cannot make the --out directory {}: {e}", out.display())
            })?;
            let (journal, done) = Journal::open(out.join(JOURNAL), &journal_key)?;
            let resumed = items.iter().filter(|it| done.contains_key(&it.id)).count();
            if resumed > 0 && !args.json {
                eprintln!(
                    "resuming: {resumed} of {} items were scored by an earlier run ({})",
                    items.len(),
                    journal.path().display()
                );
            }
            (Some(journal), done)
        }
        None => (None, Default::default()),
    };
    // Progress goes to stderr with --json too (the report is stdout's).
    let bar = crate::progress::bar(items.len() as u64, "BFCL");
    let run = run_eval_resuming(
        subject.as_mut(),
        &items,
        &CheckOptions::default(),
        &done,
        |record| match journal.as_mut() {
            Some(j) => j.append(record),
            None => Ok(()),
        },
        |p| {
            let message = format!(
                "accuracy {:.1}%",
                100.0 * p.correct as f64 / p.done.max(1) as f64
            );
            bar.set_position(p.done as u64);
            crate::progress::log_when_hidden(&bar, p.done as u64, p.total as u64, &message);
            bar.set_message(message);
        },
    )?;
    bar.finish_and_clear();
    let report = &run.report;
    if let Some(out) = &args.out {
        let write = |file: &str, text: &str| {
            plansmith_core::trace::write_atomic(out.join(file), text.as_bytes())
        };
        let mut json_report: Value = serde_json::from_str(&report.to_json()?)?;
        json_report["subject"] = json!(name);
        json_report["data_dir"] = json!(data_dir_label(&args, &dir));
        json_report["limit"] = json!(args.limit);
        write("report.json", &serde_json::to_string_pretty(&json_report)?)?;
        write(
            "items.jsonl",
            &plansmith_eval::report::records_to_jsonl(&run.records)?,
        )?;
        write("report.md", &report.to_markdown(&name, &PUBLISHED_ANCHORS))?;
        write("chart.svg", &report.to_svg(&name, &PUBLISHED_ANCHORS))?;
        if let Some(journal) = journal {
            journal.finish()?;
        }
    }
    if args.json {
        println!("{}", report.to_json()?);
    } else {
        println!("{name}");
        print!("{}", report.to_markdown(&name, &PUBLISHED_ANCHORS));
        if let Some(out) = &args.out {
            println!(
                "wrote {}/{{report.json,items.jsonl,report.md,chart.svg}}",
                out.display()
            );
        }
    }
    Ok(Outcome::Ok)
}

/// What makes one run's answers another's: the subject, every option that changes a reply, the
/// data and the binary (a rebuilt binary starts a fresh run, even of the same code). A journal resumes only the run it describes.
fn run_description(subject: &str, args: &BfclArgs, data: &std::path::Path) -> String {
    let m = &args.local;
    let mut parts = vec![subject.to_string()];
    for (flag, path) in [
        ("planner", &m.planner),
        ("gguf", &m.gguf),
        ("lora", &m.lora),
        ("cascade", &m.cascade),
    ] {
        if let Some(p) = path {
            parts.push(format!("--{flag} {}", p.display()));
        }
    }
    if m.gguf.is_some() {
        parts.push(format!(
            "--reply-format {:?} --copy {:?} --tool-list {:?}",
            m.reply_format, m.copy, m.tool_list
        ));
    }
    if let Some(w) = m.name_prior {
        parts.push(format!("--name-prior {w}"));
    }
    if let Some(b) = &m.backend {
        parts.push(format!("--backend {b}"));
    }
    parts.push(format!("data {}", data.display()));
    // The binary itself (its size and build time): other code with the same version number
    // must not resume a journal of this one's answers.
    let binary = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let built = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            format!("{} bytes built at {built}", m.len())
        })
        .unwrap_or_else(|_| "unknown".into());
    parts.push(format!(
        "plansmith {} ({binary})",
        env!("CARGO_PKG_VERSION")
    ));
    parts.join(" · ")
}

fn file_name(p: &std::path::Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}
