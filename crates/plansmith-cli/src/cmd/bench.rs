use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use plansmith_core::trace::read_traces;
use plansmith_lm::bench::{bench_decode, bench_train, DecodeBenchConfig, TrainBenchConfig};

use crate::Outcome;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Grammar compile, cache-hit and per-token mask times on Qwen's 151k vocabulary
    /// (the xgrammar peer runs from bench/grammar_peer.py on the files --peer-dir writes).
    Grammar {
        #[arg(long, default_value = "assets/qwen.tiktoken")]
        tiktoken: PathBuf,
        #[arg(long, default_value = "examples/pace/tools.json")]
        pace: PathBuf,
        #[arg(long, default_value_t = 20)]
        repeats: usize,
        /// Write the peer's inputs (schemas, token sequences) here.
        #[arg(long)]
        peer_dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Tiny-GPT training throughput (characters/s) at the given batch sizes.
    Train {
        #[arg(long, value_delimiter = ',', default_value = "8,32")]
        batches: Vec<usize>,
        #[arg(long, default_value_t = 10)]
        steps: usize,
        /// Time the hand-written fast path (`auto`, what training uses) or the candle-autograd
        /// `reference`.
        #[arg(long, default_value = "auto", value_parser = ["auto", "reference"])]
        engine: String,
        #[arg(long)]
        json: bool,
    },
    /// Tiny-GPT per-token decode latency, cached vs full recompute (mixle's decode).
    Decode {
        #[arg(long)]
        json: bool,
    },
    /// plan() latency of a planner on real requests (one thread).
    Plan(PlanBenchArgs),
    /// The HTTP server under load: /v1/plan and /v1/chat/completions at a given concurrency.
    Serve(super::bench_serve::BenchServeArgs),
    /// How long a live MCP catalog takes to refresh: every server listed again (all pages),
    /// the union checked tool by tool, and the planner's grammar compiled for it, as
    /// `serve --mcp` does on `notifications/tools/list_changed`.
    Mcp {
        /// An MCP server: a command line (stdio) or an http(s) URL. Repeatable.
        #[arg(long = "mcp", required = true, value_name = "CMD|URL")]
        servers: Vec<String>,
        /// The planner whose grammar is compiled (the one `serve` would run).
        #[command(flatten)]
        model: super::plan::ModelArgs,
        #[arg(long, default_value_t = 20)]
        refreshes: usize,
        #[arg(long)]
        json: bool,
    },
    /// LoRA training step on real Pace-catalog examples: tokens/s and peak memory at 256 and
    /// 1,024 tokens and with a shared 600-token catalog prefix; with --peer, PyTorch + PEFT
    /// (bench/lora_peer.py) runs the same steps in the same run and the ratios are printed.
    Lora(super::bench_lora::BenchLoraArgs),
    /// Pretrained model runtime: prefill tok/s at 300 and 1,500 tokens, decode tok/s, and
    /// time-to-first-token with and without a cached 1,500-token tools prefix. With --peer,
    /// llama.cpp (llama-cpp-python, bench/llama_peer.py) runs the same cases in the same run
    /// and the ratios are printed.
    Lm {
        /// A Llama-family GGUF file or Hugging Face directory.
        #[arg(long, default_value = "assets/smollm2.gguf")]
        gguf: PathBuf,
        /// Repetitions per case (medians are reported).
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Also run the llama.cpp peer (needs python3 with llama-cpp-python).
        #[arg(long)]
        peer: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct PlanBenchArgs {
    #[command(flatten)]
    planner: super::plan::PlannerArgs,
    /// Requests to plan (traces JSONL); default: 200 generated Pace test requests.
    #[arg(long)]
    data: Option<PathBuf>,
    #[arg(long, default_value_t = 200)]
    n: usize,
    #[arg(long)]
    json: bool,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn run(command: BenchCommand) -> anyhow::Result<Outcome> {
    match command {
        BenchCommand::Grammar {
            tiktoken,
            pace,
            repeats,
            peer_dir,
            json,
        } => {
            let report = plansmith_grammar::bench::run(&plansmith_grammar::bench::BenchConfig {
                tiktoken,
                pace,
                repeats,
                peer_dir,
            })?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", plansmith_grammar::bench::table(&report));
            }
        }
        BenchCommand::Train {
            batches,
            steps,
            engine,
            json,
        } => {
            let engine = if engine == "reference" {
                plansmith_lm::TrainEngine::Reference
            } else {
                plansmith_lm::TrainEngine::Auto
            };
            let mut rows = Vec::new();
            for batch_size in batches {
                rows.push(bench_train(&TrainBenchConfig {
                    batch_size,
                    steps,
                    engine,
                    ..TrainBenchConfig::default()
                })?);
            }
            if json {
                println!("{}", serde_json::to_string(&rows)?);
            } else {
                println!("| batch | seq len | ms/step | chars/s |\n|---:|---:|---:|---:|");
                for r in rows {
                    println!(
                        "| {} | {} | {:.1} | {:.0} |",
                        r.batch_size, r.seq_len, r.ms_per_step, r.chars_per_sec
                    );
                }
            }
        }
        BenchCommand::Decode { json } => {
            let r = bench_decode(&DecodeBenchConfig::default())?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("| {}-token prompt | µs |\n|---|---:|", r.prompt_len);
                println!("| prefill | {:.0} |", r.prefill_us);
                println!(
                    "| cached decode, per token | {:.1} |",
                    r.cached_us_per_token
                );
                println!(
                    "| flat-buffer prefill (what planners decode with) | {:.0} |",
                    r.flat_prefill_us
                );
                println!(
                    "| flat-buffer decode, per token | {:.1} |",
                    r.flat_us_per_token
                );
                println!(
                    "| full recompute (mixle), per token | {:.1} |",
                    r.uncached_us_per_token
                );
                println!("| speed-up | {:.1}x |", r.speedup);
            }
        }
        BenchCommand::Plan(args) => bench_plan(args)?,
        BenchCommand::Serve(args) => return super::bench_serve::run(args),
        BenchCommand::Mcp {
            servers,
            model,
            refreshes,
            json,
        } => super::bench_mcp::run(&servers, &model, refreshes, json)?,
        BenchCommand::Lora(args) => super::bench_lora::run(args)?,
        BenchCommand::Lm {
            gguf,
            reps,
            peer,
            json,
        } => bench_lm(&gguf, reps, peer, json)?,
    }
    Ok(Outcome::Ok)
}

fn bench_plan(args: PlanBenchArgs) -> anyhow::Result<()> {
    let planner = super::plan::load_planner(&args.planner)?;
    let requests: Vec<String> = match &args.data {
        Some(path) => read_traces(path)?
            .into_iter()
            .map(|t| t.request)
            .take(args.n)
            .collect(),
        None => {
            let mut cfg = plansmith_data::PaceConfig::with_n(1500);
            cfg.seed = 1234;
            plansmith_data::generate_pace(&cfg)?
                .test
                .into_iter()
                .map(|t| t.request)
                .take(args.n)
                .collect()
        }
    };
    // Warm the caches (grammar template, validator) like a running server would be.
    for r in requests.iter().take(3) {
        planner.plan(r)?;
    }
    let mut ms = Vec::with_capacity(requests.len());
    let t0 = Instant::now();
    for r in &requests {
        let t = Instant::now();
        planner.plan(r)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let total = t0.elapsed().as_secs_f64();
    ms.sort_by(f64::total_cmp);
    let report = serde_json::json!({
        "requests": ms.len(), "p50_ms": percentile(&ms, 0.5), "p90_ms": percentile(&ms, 0.9),
        "p99_ms": percentile(&ms, 0.99), "plans_per_sec": ms.len() as f64 / total,
    });
    if args.json {
        println!("{report}");
    } else {
        println!("| requests | p50 ms | p90 ms | p99 ms | plans/s |\n|---:|---:|---:|---:|---:|");
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.1} |",
            ms.len(),
            percentile(&ms, 0.5),
            percentile(&ms, 0.9),
            percentile(&ms, 0.99),
            ms.len() as f64 / total
        );
    }
    Ok(())
}

fn bench_lm(gguf: &std::path::Path, reps: usize, peer: bool, json: bool) -> anyhow::Result<()> {
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or(2);
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // The peer runs at the same thread count; candle reads it on first use.
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
    let bundle = plansmith_llama::GgufBundle::load(gguf)?;
    let opts = plansmith_llama::BenchOptions {
        reps,
        ..Default::default()
    };
    let ours = plansmith_llama::bench_lm(&bundle, &opts)?;
    let mut out = serde_json::json!({"ours": ours});
    if !json {
        println!("plansmith ({threads} threads):");
        print!("{}", ours.table());
    }
    if peer {
        let tmp =
            std::env::temp_dir().join(format!("plansmith-llama-peer-{}.json", std::process::id()));
        let status = std::process::Command::new("python3")
            .arg("bench/llama_peer.py")
            .args(["--gguf", &gguf.display().to_string()])
            .args([
                "--threads",
                &threads.to_string(),
                "--reps",
                &reps.to_string(),
            ])
            .args(["--json", &tmp.display().to_string()])
            .stdout(if json {
                std::process::Stdio::null()
            } else {
                std::process::Stdio::inherit()
            })
            .status()?;
        anyhow::ensure!(status.success(), "bench/llama_peer.py failed ({status})");
        let peer: serde_json::Value = serde_json::from_slice(&std::fs::read(&tmp)?)?;
        let _ = std::fs::remove_file(&tmp);
        let rows = peer["llama_cpp"].as_array().cloned().unwrap_or_default();
        let mut ratios = Vec::new();
        if !json {
            println!("\nratios (tok/s rows: ours / llama.cpp, higher is better; TTFT rows: time ours / llama.cpp, lower is better):");
        }
        for (a, b) in ours.rows.iter().zip(&rows) {
            let (bt, bms) = (
                b["tok_per_s"].as_f64().unwrap_or(0.0),
                b["ms"].as_f64().unwrap_or(0.0),
            );
            let (ratio, kind) = if bt > 0.0 {
                (a.tok_per_s / bt, "throughput")
            } else {
                (a.ms / bms.max(1e-9), "time")
            };
            if !json {
                println!("  {:<34} {:6.2}x {kind}", a.case, ratio);
            }
            ratios.push(serde_json::json!({"case": a.case, "ratio": ratio, "kind": kind}));
        }
        out["llama_cpp"] = peer["llama_cpp"].clone();
        out["llama_cpp_ttft_ratio"] = peer["llama_cpp_ttft_ratio"].clone();
        out["ratios"] = serde_json::Value::Array(ratios);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}
