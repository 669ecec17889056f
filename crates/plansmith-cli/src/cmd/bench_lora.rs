//! `plansmith bench lora`: throughput and peak memory of one LoRA training step on real
//! Pace-catalog examples, side by side with PyTorch + PEFT (bench/lora_peer.py) on the same
//! model, the same token ids and the same thread count, reported as ratios.
//!
//! Cases (each example is the Pace tools prompt cut to length, then a real request and reply):
//! - `len256` / `len1024`: examples of 256 / 1,024 tokens, each run on its own;
//! - `shared600`: 32 examples with a common 600-token catalog prefix, unshared and shared;
//! - `pace`: 32 examples exactly as `train --base` sees them (the whole ~1,300-token Pace
//!   tools prompt), shared only — the step a real training run repeats. Neither its unshared
//!   form nor the peer runs it: at ~45,000 tokens per step each would take many minutes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use plansmith_llama::{BasePrecision, EngineConfig, Example, LoraEngine};
use serde::Serialize;

#[derive(Args)]
pub struct BenchLoraArgs {
    /// A Llama-family GGUF file or Hugging Face directory.
    #[arg(long, default_value = "assets/smollm2.gguf")]
    gguf: PathBuf,
    #[arg(long, default_value = "examples/pace/tools.json")]
    tools: PathBuf,
    /// Timed steps per case (after one warm-up step).
    #[arg(long, default_value_t = 2)]
    steps: usize,
    #[arg(long, default_value_t = 16)]
    rank: usize,
    /// Also run the PyTorch + PEFT peer (python3 with torch, transformers, peft, gguf).
    #[arg(long)]
    peer: bool,
    /// Python interpreter for the peer.
    #[arg(long, default_value = "python3")]
    python: String,
    /// Only these cases (default: all).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Time the shared600 case with prefix sharing only (skips its slow unshared baseline,
    /// so no "vs unshared" ratio is printed).
    #[arg(long)]
    shared_only: bool,
    /// Activation memory a step may keep to skip the backward's recompute, in GB (as
    /// `train --base --activation-memory`).
    #[arg(long, default_value_t = 1.5)]
    activation_memory: f64,
    /// The frozen base's precision in our step (as `train --base --base-precision`). The peer
    /// runs f32 either way; `--peer-bf16` adds PyTorch's bf16 autocast.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Auto)]
    base_precision: PrecisionArg,
    /// Also time the peer under `torch.autocast("cpu", dtype=torch.bfloat16)`: bf16 against
    /// bf16.
    #[arg(long, requires = "peer")]
    peer_bf16: bool,
    #[arg(long)]
    json: bool,
}

/// `--base-precision`: how the frozen base enters the LoRA step's matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrecisionArg {
    /// bf16 where the CPU has AVX-512 BF16, f32 elsewhere.
    Auto,
    /// Exact: the dequantized base in f32.
    F32,
    /// Base and activations rounded to bfloat16, sums in f32; about 1.5x faster. Needs
    /// AVX-512 BF16.
    Bf16,
}

impl PrecisionArg {
    pub fn resolve(self) -> BasePrecision {
        match self {
            Self::Auto => BasePrecision::fastest(),
            Self::F32 => BasePrecision::F32,
            Self::Bf16 => BasePrecision::Bf16,
        }
    }
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CaseResult {
    pub case: String,
    pub examples: usize,
    pub tokens_per_step: usize,
    pub shared: bool,
    pub seconds_per_step: f64,
    pub tokens_per_sec: f64,
    pub peak_rss_gb: Option<f64>,
    /// `f32` or `bf16`: the frozen base's products (ours) or autocast (the peer).
    #[serde(default = "f32_name")]
    pub precision: String,
}

fn f32_name() -> String {
    "f32".into()
}

struct Case {
    name: &'static str,
    batch: Vec<Example>,
}

/// Real examples from the Pace test generator rendered as the planner prompts them.
fn real_examples(gguf: &Path, tools: &Path, n: usize) -> anyhow::Result<Vec<Example>> {
    let catalog = super::catalog::load(&tools.to_path_buf())?;
    let mut cfg = plansmith_data::PaceConfig::with_n(n.max(40) * 10);
    cfg.seed = 77;
    let traces: Vec<_> = plansmith_data::generate_pace(&cfg)?
        .test
        .into_iter()
        .take(n)
        .collect();
    let lm = plansmith_planner::llama::LlamaLm::load(plansmith_planner::llama::LlamaSource {
        base: gguf.to_path_buf(),
        adapter: None,
    })?;
    let eos = plansmith_planner::ModelBackend::grammar_eos(&lm);
    let data = plansmith_planner::lora_train::examples(
        &lm.bundle,
        &traces,
        &catalog,
        eos,
        usize::MAX,
        plansmith_planner::lora_train::ExampleFormat {
            reply: plansmith_core::Syntax::JsonArray,
            tool_list: plansmith_llama::ToolList::Json,
        },
    )?;
    Ok(data.examples)
}

/// `len` tokens: the shared prompt start cut so that example `e`'s own tail (request + reply)
/// ends the sequence.
fn cut(prefix: &[u32], e: &Example, lcp: usize, len: usize) -> Example {
    let tail = &e.tokens[lcp..];
    let keep = len.saturating_sub(tail.len()).min(prefix.len());
    let mut tokens = prefix[..keep].to_vec();
    tokens.extend_from_slice(tail);
    tokens.truncate(len);
    let reply = e.tokens.len() - e.prompt_len;
    Example {
        prompt_len: tokens.len().saturating_sub(reply).max(1),
        tokens,
    }
}

fn cases(examples: &[Example], wanted: &[String]) -> Vec<Case> {
    let first = &examples[0].tokens;
    let lcp = examples
        .iter()
        .map(|e| {
            first
                .iter()
                .zip(&e.tokens)
                .take_while(|(a, b)| a == b)
                .count()
        })
        .min()
        .unwrap_or(0);
    let prefix = &first[..lcp];
    let make = |n: usize, len: usize| {
        examples
            .iter()
            .take(n)
            .map(|e| cut(prefix, e, lcp, len))
            .collect()
    };
    let shared_len = |e: &Example| 600 + (e.tokens.len() - lcp);
    let shared: Vec<Example> = examples
        .iter()
        .take(32)
        .map(|e| cut(prefix, e, lcp, shared_len(e)))
        .collect();
    let all = vec![
        Case {
            name: "len256",
            batch: make(8, 256),
        },
        Case {
            name: "len1024",
            batch: make(4, 1024),
        },
        Case {
            name: "shared600",
            batch: shared,
        },
        Case {
            name: "pace",
            batch: examples.iter().take(32).cloned().collect(),
        },
    ];
    all.into_iter()
        .filter(|c| wanted.is_empty() || wanted.iter().any(|w| w == c.name))
        .collect()
}

fn time_case(
    model: &plansmith_llama::LlamaModel,
    case: &Case,
    shared: bool,
    rank: usize,
    steps: usize,
    keep_activations_bytes: usize,
    base_precision: BasePrecision,
) -> anyhow::Result<CaseResult> {
    let mut engine = LoraEngine::new(
        model,
        EngineConfig {
            rank,
            alpha: 2.0 * rank as f64,
            total_steps: steps + 1,
            share_prefix: shared.then_some(32),
            dropout: 0.0,
            keep_activations_bytes,
            base_precision,
            ..EngineConfig::default()
        },
    )?;
    engine.step(&case.batch)?;
    let start = Instant::now();
    for _ in 0..steps {
        engine.step(&case.batch)?;
    }
    let s = start.elapsed().as_secs_f64() / steps as f64;
    let tokens: usize = case.batch.iter().map(|e| e.tokens.len()).sum();
    Ok(CaseResult {
        case: case.name.to_string(),
        examples: case.batch.len(),
        tokens_per_step: tokens,
        shared,
        seconds_per_step: s,
        tokens_per_sec: tokens as f64 / s,
        peak_rss_gb: plansmith_planner::lora_train::peak_rss().map(|b| b as f64 / 1e9),
        precision: base_precision.name().into(),
    })
}

pub fn run(args: BenchLoraArgs) -> anyhow::Result<()> {
    let threads = rayon::current_num_threads();
    let examples = real_examples(&args.gguf, &args.tools, 32)?;
    let cases = cases(&examples, &args.cases);
    let bundle = plansmith_llama::GgufBundle::load(&args.gguf)?;
    let keep = (args.activation_memory * 1e9) as usize;
    let precision = args.base_precision.resolve();
    let mut ours = Vec::new();
    for c in &cases {
        for shared in [false, true] {
            let shares = matches!(c.name, "shared600" | "pace");
            if (shared && !shares)
                || (!shared && c.name == "pace")
                || (!shared && args.shared_only && c.name == "shared600")
            {
                continue;
            }
            let r = time_case(
                &bundle.model,
                c,
                shared,
                args.rank,
                args.steps,
                keep,
                precision,
            )?;
            if !args.json {
                eprintln!(
                    "ours {} {} shared={} {:.2} s/step {:.0} tok/s",
                    r.case, r.precision, r.shared, r.seconds_per_step, r.tokens_per_sec
                );
            }
            ours.push(r);
        }
    }
    let mut peer: Vec<CaseResult> = Vec::new();
    if args.peer {
        let dir = std::env::temp_dir().join(format!("plansmith-lora-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let input = dir.join("cases.json");
        let spec: Vec<_> = cases
            .iter()
            .filter(|c| c.name != "pace")
            .map(|c| serde_json::json!({"case": c.name, "examples": c.batch.iter()
                .map(|e| serde_json::json!({"tokens": e.tokens, "prompt_len": e.prompt_len})).collect::<Vec<_>>()}))
            .collect();
        std::fs::write(&input, serde_json::to_vec(&spec)?)?;
        let out = dir.join("peer.json");
        let status = std::process::Command::new(&args.python)
            .arg("bench/lora_peer.py")
            .args([
                "--gguf",
                &args.gguf.display().to_string(),
                "--cases",
                &input.display().to_string(),
            ])
            .args([
                "--threads",
                &threads.to_string(),
                "--steps",
                &args.steps.to_string(),
            ])
            .args([
                "--rank",
                &args.rank.to_string(),
                "--out",
                &out.display().to_string(),
            ])
            .args(args.peer_bf16.then_some("--bf16"))
            .status()?;
        anyhow::ensure!(status.success(), "bench/lora_peer.py failed ({status})");
        peer = serde_json::from_slice(&std::fs::read(&out)?)?;
        let _ = std::fs::remove_dir_all(&dir);
    }
    let unshared = |case: &str| {
        ours.iter()
            .find(|r| r.case == case && !r.shared)
            .map(|r| r.tokens_per_sec)
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({"threads": threads, "ours": ours, "peer": peer})
        );
        return Ok(());
    }
    println!(
        "LoRA r={} on all projections, {} ({threads} threads), {} timed steps per case; our \
         frozen base in {}",
        args.rank,
        args.gguf.display(),
        args.steps,
        ours.first().map_or("-", |r| r.precision.as_str())
    );
    println!("| case | examples x tokens | prefix shared | s/step | tokens/s | peak RSS | PEFT tokens/s | PEFT peak RSS | vs PEFT | vs unshared | PEFT bf16 tokens/s | vs PEFT bf16 |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &ours {
        let p = peer
            .iter()
            .find(|p| p.case == r.case && p.precision == "f32");
        let pb = peer
            .iter()
            .find(|p| p.case == r.case && p.precision == "bf16");
        let gb = |v: Option<f64>| {
            v.map(|g| format!("{g:.2} GB"))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "| {} | {} x {} | {} | {:.2} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            r.case,
            r.examples,
            r.tokens_per_step / r.examples,
            if r.shared { "yes" } else { "no" },
            r.seconds_per_step,
            r.tokens_per_sec,
            gb(r.peak_rss_gb),
            p.map(|p| format!("{:.0}", p.tokens_per_sec))
                .unwrap_or_else(|| "-".into()),
            gb(p.and_then(|p| p.peak_rss_gb)),
            p.map(|p| format!("{:.2}x", r.tokens_per_sec / p.tokens_per_sec))
                .unwrap_or_else(|| "-".into()),
            if r.shared {
                unshared(&r.case)
                    .map(|u| format!("{:.1}x", r.tokens_per_sec / u))
                    .unwrap_or_default()
            } else {
                String::new()
            },
            pb.map(|p| format!("{:.0}", p.tokens_per_sec))
                .unwrap_or_else(|| "-".into()),
            pb.map(|p| format!("{:.2}x", r.tokens_per_sec / p.tokens_per_sec))
                .unwrap_or_else(|| "-".into()),
        );
    }
    Ok(())
}
