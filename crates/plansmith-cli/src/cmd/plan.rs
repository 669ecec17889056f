use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use plansmith_planner::{PlanRequest, Planner};
use serde_json::json;

use crate::Outcome;

/// Flags shared by every command that runs a planner.
#[derive(Args, Clone)]
pub struct PlannerArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub gate: GateArgs,
}

/// How a pretrained model is asked for calls (`--reply-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplyFormat {
    /// The model's template decides: tool_call where it teaches `<tool_call>`, else json.
    Auto,
    /// plansmith's system message; a JSON array of calls.
    Json,
    /// The template's own tools prompt; `<tool_call>` tags.
    #[value(name = "tool_call")]
    ToolCall,
}

/// How plansmith's system message lists the tools (`--tool-list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolListArg {
    /// Each tool's function object as a line of JSON.
    Json,
    /// A line per tool and per parameter (type, enum values, description): half the tokens.
    Compact,
}

impl From<ToolListArg> for plansmith_llama::ToolList {
    fn from(a: ToolListArg) -> Self {
        match a {
            ToolListArg::Json => plansmith_llama::ToolList::Json,
            ToolListArg::Compact => plansmith_llama::ToolList::Compact,
        }
    }
}

/// Which argument values a pretrained model must copy from the request (`--copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CopyValues {
    /// None: the model writes any value the schema allows.
    None,
    /// Every free value (a string with no enum, const, pattern or format; a number with no
    /// enum or const) is a span of the request's words, so nothing is invented.
    #[value(name = "free-strings")]
    FreeStrings,
}

impl CopyValues {
    pub fn policy(self) -> plansmith_core::Policy {
        match self {
            CopyValues::None => plansmith_core::Policy::default(),
            CopyValues::FreeStrings => plansmith_core::Policy::copy_free_strings(),
        }
    }
}

/// Which model plans.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// Planner directory (default: the planner embedded in this binary).
    #[arg(long)]
    pub planner: Option<PathBuf>,
    /// Plan with a pretrained model instead: a `.gguf` file (architectures llama, qwen2,
    /// qwen3, gemma3; F32/F16/BF16, Q4_0-Q8_0 and K-quant tensors) or a Hugging Face directory
    /// (config.json + safetensors + tokenizer.json; Llama, Qwen2, Qwen3, Gemma 3). Tools go in
    /// its prompt; its reply is decoded under the catalog's grammar (see --reply-format).
    #[arg(long, conflicts_with = "planner", value_name = "FILE")]
    pub gguf: Option<PathBuf>,
    /// A PEFT LoRA adapter directory merged into the --gguf model at load.
    #[arg(long, requires = "gguf", value_name = "DIR")]
    pub lora: Option<PathBuf>,
    /// How a --gguf model is asked for calls: `json` (plansmith's system message, a JSON
    /// array of calls; every model), `tool_call` (the model's own chat template renders the
    /// tools and the model answers in its own `<tool_call>` tags; Qwen2.5 / Qwen3), or `auto`
    /// (tool_call where the template teaches it, else json: the better of the two as measured
    /// in docs/results/model-families.md; with --lora, the format the adapter was trained in,
    /// which `train --base` records beside it, or json).
    /// Decoded under the catalog's grammar either way.
    #[arg(long, requires = "gguf", value_enum, default_value_t = ReplyFormat::Auto, value_name = "FORMAT")]
    pub reply_format: ReplyFormat,
    /// Which argument values a --gguf model must copy from the request: `none` (the default;
    /// chat models paraphrase values) or `free-strings` (every string without enum / pattern /
    /// format, and every number without enum, is a span of the request's words: the grammar
    /// allows nothing else, so an optional value the request does not state is left out).
    #[arg(long, requires = "gguf", value_enum, default_value_t = CopyValues::None, value_name = "WHICH")]
    pub copy: CopyValues,
    /// How a --gguf model's prompt lists the tools with the json reply format: `json` (each
    /// tool's function object) or `compact` (a line per tool and parameter, half the tokens).
    /// An adapter must be used with the list it was trained on (`train --tool-list`; a
    /// planner directory records it).
    #[arg(long, requires = "gguf", value_enum, default_value_t = ToolListArg::Json, value_name = "LIST")]
    pub tool_list: ToolListArg,
    /// Rank the first call's tool name by how much the request raises it over an empty
    /// request: log p(name | request) - W * log p(name | no request). Helps tools the planner
    /// never saw against ones it saw often; 0 (the default) is the model's own ranking.
    #[arg(long, value_name = "W", allow_hyphen_values = true)]
    pub name_prior: Option<f32>,
    /// A cascade file: hops tried in order (the embedded planner, planner directories, GGUF
    /// models with adapters), each below its floor escalating to the next, then a teacher.
    /// Outcomes say which hop answered and every hop's confidence and floor
    /// (docs/guide/teachers.md).
    #[arg(long, conflicts_with_all = ["planner", "gguf", "lora"], value_name = "FILE")]
    pub cascade: Option<PathBuf>,
    /// Run the model on an inference engine you already operate, through its
    /// OpenAI-compatible API: DIALECT:URL#MODEL with DIALECT one of vllm, sglang (the
    /// catalog's Lark grammar), llamacpp, openai (its JSON Schema). The reply is validated
    /// and gated here; the engine's logprobs are the confidence (docs/guide/backends.md).
    /// API key from PLANSMITH_BACKEND_API_KEY.
    #[arg(
        long,
        conflicts_with_all = ["planner", "gguf", "lora", "cascade", "name_prior"],
        value_name = "SPEC"
    )]
    pub backend: Option<String>,
    /// Seconds a --backend engine may take to answer (a request's own deadline may cut it
    /// shorter); past it the request fails with the engine's address (HTTP 504 when serving).
    #[arg(
        long,
        default_value_t = 30,
        requires = "backend",
        value_name = "SECONDS"
    )]
    pub backend_timeout: u64,
}

/// What happens to a plan after decoding: the confidence floor and escalation.
#[derive(Args, Clone)]
pub struct GateArgs {
    /// Escalation teacher: traces:FILE, cmd:COMMAND (JSON lines) or openai:URL#MODEL
    /// (API key from PLANSMITH_TEACHER_API_KEY).
    #[arg(long)]
    pub teacher: Option<String>,
    /// Teacher timeout in seconds.
    #[arg(long, default_value_t = 30)]
    pub teacher_timeout: u64,
    /// Append every escalation the teacher answered to this JSONL file (fsynced).
    #[arg(long)]
    pub harvest: Option<PathBuf>,
    /// Override the planner's calibrated confidence floor.
    #[arg(long, allow_hyphen_values = true)]
    pub floor: Option<f32>,
}

/// The model alone (no floor override, no teacher).
pub fn load_model(args: &ModelArgs) -> anyhow::Result<Planner> {
    if let Some(path) = &args.cascade {
        // A hop refitted on calibration traces at load decodes each of them (minutes for a
        // pretrained hop the first time): say so as it goes.
        let bar = Some(crate::progress::bar(0, "calibrating"));
        let mut stages = crate::progress::stages(&bar);
        let cascade = plansmith_planner::cascade::load_with_progress(path, |hop, done, total| {
            stages(&format!("calibrating hop {hop}"), done, total)
        })?;
        drop(stages);
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        for note in &cascade.notes {
            eprintln!("{note}");
        }
        for (hop, fit) in &cascade.fits {
            let line = format!("cascade hop {hop}: {}", fit.summary());
            if fit.certified {
                eprintln!("{line}");
            } else {
                eprintln!("warning: {line}");
            }
        }
        anyhow::ensure!(
            args.name_prior.is_none(),
            "--name-prior does not apply to a --cascade"
        );
        return Ok(cascade.planner);
    }
    if let Some(spec) = &args.backend {
        let spec = plansmith_planner::remote::BackendSpec::parse(spec)?;
        let engine = plansmith_planner::remote::RemoteEngine::new(
            spec,
            std::env::var("PLANSMITH_BACKEND_API_KEY").ok(),
            Duration::from_secs(args.backend_timeout),
        );
        // Like --gguf: the embedded planner's catalog (Pace) by default; requests usually
        // bring their own.
        let catalog = plansmith_planner::default_planner()?
            .catalog
            .as_ref()
            .clone();
        return Ok(Planner::remote(
            engine,
            catalog,
            plansmith_planner::PlannerSettings::chat(),
        )?);
    }
    let mut planner = match (&args.planner, &args.gguf) {
        (Some(dir), _) => Planner::load(dir)?,
        (None, Some(model)) => {
            // The default catalog of a pretrained planner is the embedded planner's (Pace);
            // requests usually bring their own (`--tools`, the server's `tools`).
            let catalog = plansmith_planner::default_planner()?
                .catalog
                .as_ref()
                .clone();
            let mut settings = plansmith_planner::PlannerSettings::chat();
            settings.tool_list = args.tool_list.into();
            // An adapter `train --base` wrote says how it was prompted.
            let trained = match &args.lora {
                Some(dir) => plansmith_planner::lora_train::AdapterPrompt::load(dir)?,
                None => None,
            };
            settings.policy = args.copy.policy();
            let syntax = match args.reply_format {
                // An adapter learnt the format it records, else (PEFT's own) the JSON array.
                ReplyFormat::Auto if args.lora.is_some() => {
                    Some(trained.map_or(plansmith_core::Syntax::JsonArray, |t| t.reply_format))
                }
                ReplyFormat::Auto => None,
                ReplyFormat::Json => Some(plansmith_core::Syntax::JsonArray),
                ReplyFormat::ToolCall => Some(plansmith_core::Syntax::ToolCall),
            };
            match syntax {
                Some(syntax) => {
                    settings.syntax = syntax;
                    Planner::pretrained(model, args.lora.as_deref(), catalog, settings)?
                }
                None => Planner::pretrained_native(model, args.lora.as_deref(), catalog, settings)?,
            }
        }
        (None, None) => plansmith_planner::default_planner()?,
    };
    if let Some(w) = args.name_prior {
        anyhow::ensure!(
            w.is_finite() && w >= 0.0,
            "--name-prior must be a number >= 0, got {w}"
        );
        planner.set_name_prior(w);
    }
    Ok(planner)
}

pub fn load_planner(args: &PlannerArgs) -> anyhow::Result<Planner> {
    let gate = &args.gate;
    if args.model.cascade.is_some() {
        anyhow::ensure!(
            gate.teacher.is_none() && gate.harvest.is_none() && gate.floor.is_none(),
            "--teacher, --harvest and --floor go in the --cascade file (its `teacher`, `harvest`, and each hop's `floor`)"
        );
    }
    let mut planner = load_model(&args.model)?;
    if let Some(f) = gate.floor {
        planner.set_floor(f);
    }
    if let Some(spec) = &gate.teacher {
        planner = planner.with_teacher(plansmith_planner::teacher::from_spec(
            spec,
            Duration::from_secs(gate.teacher_timeout),
        )?);
    }
    if let Some(path) = &gate.harvest {
        planner = planner.with_harvest(path)?;
    }
    Ok(planner)
}

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    planner: PlannerArgs,
    /// Catalog to plan against (default: the planner's own). Needs a tools-in-prompt planner
    /// to be used for anything beyond its training catalog.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// none, auto, required, or a tool name.
    #[arg(long, default_value = "auto")]
    tool_choice: plansmith_grammar::ToolChoice,
    /// One JSON object per request: {"calls", "confidence", "escalated", "source", ...}.
    #[arg(long)]
    json: bool,
    /// Requests to plan.
    #[arg(required = true)]
    requests: Vec<String>,
}

pub fn run(args: PlanArgs) -> anyhow::Result<Outcome> {
    let planner = load_planner(&args.planner)?;
    let catalog = args
        .tools
        .as_ref()
        .map(super::catalog::load)
        .transpose()?
        .map(Arc::new);
    for request in &args.requests {
        let req = PlanRequest {
            catalog: catalog.clone(),
            tool_choice: args.tool_choice.clone(),
            ..PlanRequest::new(request)
        };
        let o = planner.plan_request(&req)?;
        if args.json {
            let mut line = json!({"request": request, "calls": o.calls, "spoken_text": o.spoken_text, "confidence": o.confidence,
                       "escalated": o.escalated, "source": o.source, "reason": o.reason, "text": o.text,
                       "latency_ms": o.latency.as_secs_f64() * 1e3});
            if let Some(engine) = o.engine {
                line["engine_ms"] = json!(engine.as_secs_f64() * 1e3);
            }
            if let Some(n) = o.prompt_tokens {
                line["prompt_tokens"] = json!(n);
            }
            if !o.hops.is_empty() {
                line["hop"] = json!(o.hop);
                line["hops"] = json!(o.hops);
            }
            println!("{line}");
        } else {
            let plan = plansmith_core::Plan {
                calls: o.calls.clone(),
                spoken_text: None,
            };
            let shown = if !o.calls.is_empty() {
                plansmith_core::Syntax::Dsl
                    .render(&plan)
                    .trim_end()
                    .to_string()
            } else if o.escalated && !o.text.trim().is_empty() {
                // Not emitted (unverified), but worth seeing: what the model would have said.
                format!(
                    "(no verified plan; the model proposed `{}`)",
                    o.text.trim_end()
                )
            } else {
                "(no call)".to_string()
            };
            println!("{request}\n  -> {shown}");
            for h in &o.hops {
                println!(
                    "     hop {}: confidence {:.4}, floor {:.4}, {}, {:.1} ms",
                    h.hop,
                    h.confidence,
                    h.floor,
                    if h.accepted { "answered" } else { "escalated" },
                    h.latency.as_secs_f64() * 1e3
                );
            }
            println!(
                "     confidence {:.3}, source {:?}{}, {:.1} ms",
                o.confidence,
                o.source,
                o.reason
                    .as_deref()
                    .map(|r| format!(", escalated: {r}"))
                    .unwrap_or_default(),
                o.latency.as_secs_f64() * 1e3
            );
        }
    }
    Ok(Outcome::Ok)
}
