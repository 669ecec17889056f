use std::path::{Path, PathBuf};

use clap::Args;
use plansmith_core::overlap::{Decontaminator, EvalRequests, Excluded};
use plansmith_core::{Policy, Syntax};
use plansmith_lm::{DropoutEncoder, PosEncoding, Progress, TinyGptConfig, TrainConfig};
use plansmith_planner::train::{auto_epochs, CodecChoice, Splits, TrainSpec};
use plansmith_planner::train_files::{train_from_files, TraceFiles};
use plansmith_planner::{ConfidenceMode, PlannerSettings};

use crate::Outcome;

#[derive(Args)]
pub struct TrainArgs {
    /// Training traces (JSONL); repeat to combine, e.g. --data train.jsonl --data harvest.jsonl.
    /// With --continue: the old data a replay sample is drawn from (optional).
    #[arg(long, required_unless_present = "continue_from")]
    data: Vec<PathBuf>,
    /// The catalog the planner plans against (traces may carry their own `tools`).
    #[arg(long, required_unless_present = "continue_from")]
    tools: Option<PathBuf>,
    /// Output planner directory (written atomically). With --continue: where the retrained
    /// planner goes (default: replace the continued one).
    #[arg(long, required_unless_present = "continue_from")]
    out: Option<PathBuf>,
    /// Calibration traces for the confidence floor (default: 10% split off --data).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// Test traces for the report (default: 10% split off --data).
    #[arg(long)]
    test: Option<PathBuf>,
    /// Leave out every trace (training, calibration and test) whose request repeats an
    /// evaluation request or shares 8 words in a row with one, case and punctuation aside.
    /// PATH: a BFCL question file, a directory of them, or a trace file; repeat for more. The
    /// project's recipes pass `eval/handwritten`, so the hand-written sets stay unseen; how
    /// many traces were left out is reported.
    #[arg(long, value_name = "PATH")]
    exclude_overlap: Vec<PathBuf>,
    /// Put the catalog in the prompt with a line per tool, its signature and the first
    /// sentence of its description. Without this flag (and without --no-tools-in-prompt) the
    /// prompt carries the signatures only, on one line (`tools: open(target) ...`): the
    /// embedded planner's setting, short prompts, and a planner that reads its tools at run
    /// time.
    #[arg(long, conflicts_with = "no_tools_in_prompt")]
    tools_in_prompt: bool,
    /// With --tools-in-prompt: signatures only, on one line (the default without
    /// --tools-in-prompt; shorter prompts; cannot match a request to a tool by its words).
    #[arg(long, requires = "tools_in_prompt")]
    no_descriptions: bool,
    /// No catalog in the prompt: the planner learns one catalog by heart (mixle's planners;
    /// the shortest prompts, but a renamed or added tool is never read).
    #[arg(long)]
    no_tools_in_prompt: bool,
    /// The planner calls a tool by its place in the prompt's catalog (`tools: t0=open(target)
    /// t1=set(target, value)`, reply `t1(...)`), in a catalog shuffled per training example,
    /// instead of spelling its name. Plans still leave with real names. For tools whose names
    /// the training data never spelt. Needs the signatures-only prompt.
    #[arg(long, conflicts_with = "no_tools_in_prompt")]
    tool_pointers: bool,
    /// Output syntax the model learns: dsl or envelope.
    #[arg(long, default_value = "dsl")]
    syntax: Syntax,
    /// Passes over the training data. Default: enough to show the model ~300,000 examples
    /// (1 to 30 passes; 30 below 10,000 traces).
    #[arg(long)]
    epochs: Option<usize>,
    #[arg(long, default_value_t = 96)]
    d_model: usize,
    #[arg(long, default_value_t = 3)]
    layers: usize,
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Context length in tokens (prompt + completion). Default: the longest training example
    /// plus a quarter, in multiples of 64, at least 192.
    #[arg(long)]
    block: Option<usize>,
    /// Vocabulary of a new tiny planner: `piece` (sub-words learned from the training data;
    /// ~2.4x fewer tokens than characters on Pace, so training and decoding are faster) or
    /// `char` (one token per character, mixle's codec).
    #[arg(long, default_value = "piece")]
    codec: String,
    /// Most ids a `piece` vocabulary may have (512, the embedded planner's: a new tool's name
    /// is then spelt in pieces the planner has copied before).
    #[arg(long, default_value_t = 512)]
    vocab: usize,
    /// Piece codec: while encoding training examples, skip each sub-word merge with this
    /// probability (BPE-dropout), so names are also seen cut into smaller pieces; helps a
    /// planner copy a new tool's name spelt in pieces no training name began with. 0 = off;
    /// 0.1 is the usual rate. Planning always encodes canonically.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    piece_dropout: f64,
    /// Position encoding: rope or learned.
    #[arg(long, default_value = "rope")]
    pos: String,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Learning rate (default 3e-3 for tiny planners, 1e-3 for LoRA).
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    floor: super::calibrate::FloorArgs,
    /// Confidence is the summed log-prob of every reply token (all, the embedded planner's),
    /// the mean over the tokens the model chose (chosen), or the lowest one (weakest: one
    /// doubtful token is not averaged away); `auto` fits a floor for each on the calibration
    /// split and keeps the one that answers the most (the guarantee's delta is shared among
    /// the three). Default: all for tiny planners, chosen with --base.
    #[arg(long)]
    confidence: Option<String>,
    /// Continue training from this planner's weights and codec (e.g. after harvesting).
    #[arg(long, conflicts_with = "base")]
    init: Option<PathBuf>,
    /// Retrain this tiny planner on --harvest (what its teacher answered, repeated
    /// --harvest-copies times) plus --replay traces sampled from --data, recalibrate it on
    /// --calibration, and compare old and new on every --check set: the new planner replaces
    /// the old one (atomically) only if it is not worse on any (agreement no lower, no more
    /// silent wrong); otherwise it is saved beside it as `<name>.rejected` and the exit code
    /// is 1. Settings, codec and catalog are the old planner's.
    #[arg(long = "continue", value_name = "PLANNER", conflicts_with_all = ["init", "base", "tools"], requires_all = ["harvest", "calibration"])]
    continue_from: Option<PathBuf>,
    /// With --continue: the harvested traces (teacher answers) to learn.
    #[arg(long, value_name = "FILE", requires = "continue_from")]
    harvest: Option<PathBuf>,
    /// With --continue: how many traces of --data to replay beside the harvest.
    #[arg(long, default_value_t = 2000, requires = "continue_from")]
    replay: usize,
    /// With --continue: how many times each harvested trace is repeated in the mix.
    #[arg(long, default_value_t = 3, requires = "continue_from")]
    harvest_copies: usize,
    /// With --continue: traces (with reference plans) the old and new planner are compared on.
    #[arg(long, value_name = "FILE", requires = "continue_from")]
    check: Vec<PathBuf>,
    /// LoRA-tune a pretrained model instead of training a tiny one: a Llama-family `.gguf`
    /// file or Hugging Face directory. The output directory references it and holds the
    /// adapter (PEFT layout) in `adapter/`.
    #[arg(long, value_name = "FILE")]
    base: Option<PathBuf>,
    /// LoRA: start from this trained planner's adapter (its directory, or the `adapter/`
    /// inside) with a fresh optimizer, to teach it something more in a short run; same
    /// --lora-rank, --lora-alpha and --lora-targets as it was trained with.
    #[arg(long, value_name = "PLANNER", requires = "base")]
    init_adapter: Option<PathBuf>,
    /// LoRA rank (with --base).
    #[arg(long, default_value_t = 16, requires = "base")]
    lora_rank: usize,
    /// LoRA alpha (the update is scaled by alpha / rank).
    #[arg(long, default_value_t = 32.0, requires = "base")]
    lora_alpha: f64,
    /// LoRA dropout on each adapter's input. Off by default (PEFT's default too): one epoch
    /// over thousands of traces sees each example once, and the masks cost ~15% of a step.
    #[arg(long, default_value_t = 0.0, requires = "base")]
    lora_dropout: f32,
    /// Projections that get adapters: any of q,k,v,o,gate,up,down, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all", requires = "base")]
    lora_targets: Vec<String>,
    /// Memory a LoRA step may spend keeping activations, in GB. A batch whose activations fit
    /// skips the backward's recompute (a third less work); the shared catalog prompt makes a
    /// 32-example Pace batch need ~3 GB. Lower it on a small machine.
    #[arg(long, default_value_t = 4.0, requires = "base")]
    activation_memory: f64,
    /// The frozen base's precision in the LoRA step's matrix products: `bf16` rounds the base
    /// and the activations to bfloat16 and sums in f32 (about 1.5x faster; needs AVX-512
    /// BF16), `f32` is exact, `auto` takes bf16 where the CPU has it. The adapter, its
    /// gradients and AdamW are f32 either way.
    #[arg(long, value_enum, default_value_t = super::bench_lora::PrecisionArg::Auto, requires = "base")]
    base_precision: super::bench_lora::PrecisionArg,
    /// Store the trained adapter in f16 instead of f32: half the size (r=8 on every
    /// projection of SmolLM2-135M is 4.9 MB instead of 9.8), for adapters you commit or ship.
    /// The floor is fitted on the rounded weights.
    #[arg(long, requires = "base")]
    adapter_f16: bool,
    /// How the prompt lists the tools: `json` (each tool's function object on a line) or
    /// `compact` (a line per tool and per parameter with its type and description: the same
    /// information in about half the tokens, so per-request catalogs cost half the prefill
    /// in training and planning). The planner keeps it.
    #[arg(long, value_enum, default_value_t = super::plan::ToolListArg::Json, requires = "base")]
    tool_list: super::plan::ToolListArg,
    /// The reply format the adapter learns: `json` (plansmith's system message lists the
    /// tools; the model answers a JSON array of calls; every model) or `tool_call` (the model's
    /// own chat template renders the tools and it answers in its `<tool_call>` tags, the
    /// format Qwen2.5 / Qwen3 were trained to call tools in). The planner keeps it, and so does
    /// the adapter directory (`plansmith.json`), which `plan --gguf BASE --lora DIR` reads.
    #[arg(long, value_enum, default_value_t = TrainReplyFormat::Json, requires = "base",
          value_name = "FORMAT")]
    reply_format: TrainReplyFormat,
    /// LoRA optimizer steps of --batch-size examples (default: one pass over the data).
    #[arg(long, requires = "base")]
    steps: Option<usize>,
    /// Skip LoRA examples longer than this many tokens (prompt + reply).
    #[arg(long, default_value_t = 2048, requires = "base")]
    max_tokens: usize,
    /// LoRA: write a resumable checkpoint every this many steps (and on Ctrl-C / SIGTERM).
    #[arg(long, default_value_t = 50, requires = "base")]
    checkpoint_every: usize,
    /// LoRA: continue the run whose checkpoints are in DIR (same options and data). Without
    /// it, checkpoints go to `<out>.checkpoint/`.
    #[arg(long, value_name = "DIR", requires = "base")]
    resume: Option<PathBuf>,
    /// With --json: print a progress line every this many steps (LoRA).
    #[arg(long, default_value_t = 10)]
    log_every: usize,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// The reply format a LoRA adapter learns (`--reply-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrainReplyFormat {
    /// plansmith's system message; a JSON array of calls.
    Json,
    /// The template's own tools prompt; `<tool_call>` tags.
    #[value(name = "tool_call")]
    ToolCall,
}

impl TrainArgs {
    fn out(&self) -> &std::path::Path {
        self.out
            .as_deref()
            .expect("clap requires --out without --continue")
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<Outcome> {
    if let Some(planner) = &args.continue_from {
        return super::continue_train::run(super::continue_train::Continue {
            planner,
            harvest: args.harvest.as_deref().expect("clap requires --harvest"),
            data: &args.data,
            replay: args.replay,
            harvest_copies: args.harvest_copies,
            calibration: args
                .calibration
                .as_deref()
                .expect("clap requires --calibration"),
            check: &args.check,
            floor: args.floor.rule()?,
            epochs: args.epochs.unwrap_or(0),
            lr: args.lr,
            batch_size: args.batch_size,
            seed: args.seed,
            out: args.out.as_deref(),
            json: args.json,
            quiet: args.quiet,
        });
    }
    let tools = args
        .tools
        .as_ref()
        .expect("clap requires --tools without --continue");
    let catalog = super::catalog::load(tools)?;
    let exclude = match args.exclude_overlap.is_empty() {
        true => None,
        false => Some(std::sync::Arc::new(Decontaminator::new(
            EvalRequests::load(&args.exclude_overlap)?,
        ))),
    };
    let files = TraceFiles {
        data: args.data.clone(),
        calibration: args.calibration.clone(),
        test: args.test.clone(),
        seed: args.seed,
        exclude,
    };
    if let Some(base) = &args.base {
        let splits = files.read_splits()?;
        let excluded = report_excluded(&files, &args);
        return train_lora(&args, base, splits, catalog, excluded);
    }
    let pos = match args.pos.as_str() {
        "rope" => PosEncoding::Rope,
        "learned" => PosEncoding::Learned,
        other => anyhow::bail!("unknown --pos `{other}` (expected rope or learned)"),
    };
    let modes = confidence_modes(args.confidence.as_deref().unwrap_or("all"))?;
    let codec = match args.codec.as_str() {
        "piece" => CodecChoice::Piece { vocab: args.vocab },
        "char" => CodecChoice::Char,
        other => anyhow::bail!("unknown --codec `{other}` (expected piece or char)"),
    };
    // Checked before the data is read, not minutes later when training encodes it.
    if DropoutEncoder::check_rate(args.piece_dropout).is_err() {
        anyhow::bail!(
            "--piece-dropout must be in [0, 1), got {}",
            args.piece_dropout
        );
    }
    if args.tool_pointers && args.tools_in_prompt && !args.no_descriptions {
        anyhow::bail!("--tool-pointers needs the signatures-only prompt: drop --tools-in-prompt or add --no-descriptions");
    }
    if args.piece_dropout > 0.0 && args.codec != "piece" {
        anyhow::bail!("--piece-dropout needs --codec piece");
    }
    let policy = if args.syntax == Syntax::Dsl {
        Policy::copy_free_strings()
    } else {
        Policy::default()
    };
    let spec = TrainSpec {
        model: TinyGptConfig {
            d_model: args.d_model,
            n_layer: args.layers,
            n_head: args.heads,
            block: args.block.unwrap_or(0),
            pos,
            ..TinyGptConfig::default()
        },
        codec,
        train: TrainConfig {
            epochs: args.epochs.unwrap_or(0),
            batch_size: args.batch_size,
            lr: args.lr.unwrap_or(3e-3),
            seed: args.seed,
            ..TrainConfig::default()
        },
        settings: PlannerSettings {
            syntax: args.syntax,
            policy,
            tools_in_prompt: !args.no_tools_in_prompt,
            tool_descriptions: args.tools_in_prompt && !args.no_descriptions,
            tool_pointers: args.tool_pointers,
            confidence: modes[0],
            ..PlannerSettings::dsl()
        },
        floor: args.floor.rule()?,
        piece_dropout: args.piece_dropout,
        other_confidence: modes[1..].to_vec(),
    };
    let bar = (!args.quiet).then(|| crate::progress::bar(0, "evaluating"));
    let mut excluded = None;
    let trained = train_from_files(
        &files,
        catalog,
        &spec,
        args.init.as_deref(),
        if args.quiet {
            Progress::Hidden
        } else {
            Progress::Bar
        },
        |pairs, held_out| {
            match &bar {
                Some(b) => b.suspend(|| excluded = report_excluded(&files, &args)),
                None => excluded = report_excluded(&files, &args),
            }
            if let Some(b) = &bar {
                let epochs = match args.epochs {
                    Some(e) => format!("{e} epochs"),
                    None => format!(
                        "{} epochs (default for {pairs} traces: ~{} examples seen)",
                        auto_epochs(pairs),
                        auto_epochs(pairs) * pairs
                    ),
                };
                b.suspend(|| {
                    eprintln!(
                        "training on {pairs} traces (calibration {}, test {}), {epochs}",
                        held_out.calibration.len(),
                        held_out.test.len()
                    )
                });
            }
        },
        crate::progress::stages(&bar),
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    trained.planner.save(args.out())?;
    let meta = &trained.planner.meta;
    let report = serde_json::json!({
        "out": args.out(),
        "conf_floor": trained.planner.settings.conf_floor,
        "floor_fit": meta.floor_fit,
        "calibration": meta.calibration,
        "test": meta.test,
        "train": trained.report,
        "excluded_overlap": excluded,
    });
    if args.json {
        println!("{report}");
    } else {
        println!("saved planner to {}", args.out().display());
        println!("{}", settings_line(&trained.planner));
        println!(
            "trained {} steps in {:.0}s ({:.0} tokens/s), final loss {:.4}",
            trained.report.steps,
            trained.report.seconds,
            trained.report.tokens_per_sec,
            trained.report.final_loss
        );
        super::calibrate::print_floor_fit(&trained.planner);
        crate::cmd::eval::print_gate_table(&[
            ("calibration", meta.calibration.as_ref()),
            ("test", meta.test.as_ref()),
        ]);
    }
    Ok(Outcome::Ok)
}

/// What `--exclude-overlap` left out of the run (`None` without it), told on stderr unless
/// `--quiet` / `--json`.
fn report_excluded(files: &TraceFiles, args: &TrainArgs) -> Option<Excluded> {
    let d = files.exclude.as_ref()?;
    let ex = d.excluded();
    if !args.quiet && !args.json {
        let first = ex
            .examples
            .first()
            .map(|(request, id)| format!("; e.g. {request:?} (like {id})"))
            .unwrap_or_default();
        eprintln!(
            "left out {} traces that overlap {} of the {} evaluation requests ({} whole, {} sharing {} words in a row){first}",
            ex.total(),
            ex.eval_requests_hit,
            d.eval_requests(),
            ex.whole,
            ex.ngram,
            plansmith_core::overlap::NGRAM,
        );
    }
    Some(ex)
}

/// What a trained tiny planner is, defaults included, in one line.
fn settings_line(planner: &plansmith_planner::Planner) -> String {
    let t = &planner.meta.training;
    let model = &t["model"];
    let prompt = match (
        planner.settings.tools_in_prompt,
        planner.settings.tool_descriptions,
    ) {
        (false, _) => "none",
        (true, false) => "signatures",
        (true, true) => "signatures and descriptions",
    };
    format!(
        "model: {} layers of {}, {} heads, block {}; vocabulary {}; {} epochs at lr {}; catalog in the prompt: {prompt}; confidence: {}",
        model["n_layer"],
        model["d_model"],
        model["n_head"],
        model["block"],
        model["vocab"],
        t["train"]["epochs"],
        t["train"]["lr"],
        serde_json::to_value(planner.settings.confidence)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    )
}

fn train_lora(
    args: &TrainArgs,
    base: &std::path::Path,
    splits: Splits,
    catalog: plansmith_core::Catalog,
    excluded: Option<Excluded>,
) -> anyhow::Result<Outcome> {
    use plansmith_llama::LoraTarget;
    if args.reply_format == TrainReplyFormat::ToolCall
        && args.tool_list == super::plan::ToolListArg::Compact
    {
        anyhow::bail!(
            "--tool-list compact shapes plansmith's system message; with --reply-format \
             tool_call the model's chat template lists the tools itself: drop one of them"
        );
    }
    let mut targets = Vec::new();
    for t in &args.lora_targets {
        let add: &[LoraTarget] = match t.as_str() {
            "all" => &LoraTarget::ALL,
            "q" => &[LoraTarget::Q],
            "k" => &[LoraTarget::K],
            "v" => &[LoraTarget::V],
            "o" => &[LoraTarget::O],
            "gate" => &[LoraTarget::Gate],
            "up" => &[LoraTarget::Up],
            "down" => &[LoraTarget::Down],
            other => anyhow::bail!(
                "unknown --lora-targets entry `{other}` (expected q, k, v, o, gate, up, down or all)"
            ),
        };
        for a in add {
            if !targets.contains(a) {
                targets.push(*a);
            }
        }
    }
    // Before the model loads (seconds to minutes), not after.
    plansmith_llama::check_lora_settings(args.lora_rank, args.lora_dropout, targets.len())
        .map_err(|e| anyhow::anyhow!("--lora-rank / --lora-dropout / --lora-targets: {e}"))?;
    let checkpoint_dir = args.resume.clone().unwrap_or_else(|| {
        let mut name = args.out().file_name().unwrap_or_default().to_os_string();
        name.push(".checkpoint");
        args.out().with_file_name(name)
    });
    let spec = plansmith_planner::lora_train::LoraSpec {
        base: base.to_path_buf(),
        rank: args.lora_rank,
        alpha: args.lora_alpha,
        dropout: args.lora_dropout,
        targets,
        batch_size: args.batch_size,
        steps: args.steps,
        lr: args.lr.unwrap_or(1e-3),
        seed: args.seed,
        max_tokens: args.max_tokens,
        activation_memory_bytes: (args.activation_memory.max(0.0) * 1e9) as usize,
        base_precision: args.base_precision.resolve(),
        floor: args.floor.rule()?,
        confidence: confidence_modes(args.confidence.as_deref().unwrap_or("chosen"))?,
        adapter_f16: args.adapter_f16,
        tool_list: args.tool_list.into(),
        reply_format: match args.reply_format {
            TrainReplyFormat::Json => Syntax::JsonArray,
            TrainReplyFormat::ToolCall => Syntax::ToolCall,
        },
        checkpoint_every: args.checkpoint_every,
        checkpoint_dir,
        resume: args.resume.is_some(),
        init_adapter: args.init_adapter.clone(),
    };
    if !args.quiet && !args.json {
        eprintln!(
            "LoRA r={} on {}, frozen base in {} ({} train traces, calibration {}, test {}); \
             checkpoints in {}",
            spec.rank,
            base.display(),
            spec.base_precision.name(),
            splits.train.len(),
            splits.calibration.len(),
            splits.test.len(),
            spec.checkpoint_dir.display()
        );
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        // Ctrl-C / SIGTERM finish the current step, write a checkpoint and exit.
        let _ = ctrlc::set_handler(move || stop.store(true, std::sync::atomic::Ordering::SeqCst));
    }
    let bar = (!args.quiet && !args.json).then(|| crate::progress::bar(1, "LoRA"));
    let (planner, report) = match plansmith_planner::lora_train::train_lora(
        &splits,
        catalog,
        &spec,
        args.out(),
        &stop,
        |p| {
            if let Some(b) = &bar {
                b.set_length(p.steps as u64);
                b.set_position(p.step as u64);
                let mem = p
                    .peak_rss
                    .map(|b| format!(" · peak {:.2} GB", b as f64 / 1e9))
                    .unwrap_or_default();
                b.set_message(format!(
                    "loss {:.4} · {:.0} tok/s{mem}",
                    p.smoothed_loss, p.tokens_per_sec
                ));
            } else if args.json && (p.step % args.log_every.max(1) == 0 || p.step == p.steps) {
                println!("{}", serde_json::json!({"progress": p}));
            }
        },
        calibration_stages(&bar, &stop, args.out(), !args.quiet && !args.json),
    ) {
        Err(e @ plansmith_planner::PlannerError::Interrupted { .. }) => {
            if let Some(b) = bar {
                b.abandon();
            }
            eprintln!("{e}");
            return Ok(Outcome::Failed);
        }
        other => other?,
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let meta = &planner.meta;
    if args.json {
        let mut summary = serde_json::to_value(&report)?;
        summary["losses"] = serde_json::Value::Null;
        println!(
            "{}",
            serde_json::json!({"out": args.out(), "conf_floor": planner.settings.conf_floor,
                "floor_fit": meta.floor_fit,
                "calibration": meta.calibration, "test": meta.test, "lora": summary,
                "excluded_overlap": excluded})
        );
    } else {
        println!(
            "saved planner to {} (adapter in {}/adapter)",
            args.out().display(),
            args.out().display()
        );
        println!(
            "{} steps of {} on {} examples in {:.0}s ({:.0} tokens/s), loss {:.4} -> {:.4}{}",
            report.steps,
            report.batch_size,
            report.examples,
            report.seconds,
            report.tokens_per_sec,
            report.first_loss,
            report.final_loss,
            report
                .peak_rss
                .map(|b| format!(", peak memory {:.2} GB", b as f64 / 1e9))
                .unwrap_or_default()
        );
        super::calibrate::print_floor_fit(&planner);
        crate::cmd::eval::print_gate_table(&[
            ("calibration", meta.calibration.as_ref()),
            ("test", meta.test.as_ref()),
        ]);
    }
    Ok(Outcome::Ok)
}

/// The trained planner's evaluation stages, driven like any others, except that by the time
/// they start the planner is saved (with a floor that accepts nothing): Ctrl-C then stops the
/// calibration and keeps that planner, for `plansmith calibrate` to finish.
fn calibration_stages<'a>(
    bar: &'a Option<indicatif::ProgressBar>,
    stop: &'a std::sync::atomic::AtomicBool,
    out: &'a Path,
    tell: bool,
) -> impl FnMut(&str, usize, usize) + 'a {
    let mut stages = crate::progress::stages(bar);
    let mut told = false;
    move |stage, done, total| {
        // A hidden bar (stderr is no terminal) prints nothing, its `println` included.
        let say = |line: String| match bar {
            Some(b) if !b.is_hidden() => b.println(line),
            _ => eprintln!("{line}"),
        };
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            say(format!(
                "stopped during {stage}: the trained planner is saved in {} with no floor yet \
                 (it accepts nothing); fit one with `plansmith calibrate --planner {} \
                 --calibration FILE`, which goes on from the requests judged so far \
                 where FILE holds them (they are journaled in {})",
                out.display(),
                out.display(),
                out.join(plansmith_planner::journal::FILE).display()
            ));
            std::process::exit(1);
        }
        if tell && !told {
            told = true;
            say(format!(
                "trained; saved to {} with no floor yet — now the {stage} split ({total} \
                 requests; Ctrl-C stops here and keeps the planner)",
                out.display()
            ));
        }
        stages(stage, done, total)
    }
}

/// `--confidence` for `train` and `calibrate`: one mode, or `auto` for all three (the
/// calibration split chooses).
pub(crate) fn confidence_modes(name: &str) -> anyhow::Result<Vec<ConfidenceMode>> {
    Ok(match name {
        "chosen" => vec![ConfidenceMode::ChosenTokens],
        "all" => vec![ConfidenceMode::AllTokens],
        "weakest" => vec![ConfidenceMode::WeakestToken],
        "auto" => vec![
            ConfidenceMode::ChosenTokens,
            ConfidenceMode::AllTokens,
            ConfidenceMode::WeakestToken,
        ],
        other => {
            anyhow::bail!("unknown --confidence `{other}` (expected chosen, all, weakest or auto)")
        }
    })
}
