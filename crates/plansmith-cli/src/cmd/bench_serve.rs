//! `plansmith bench serve`: the HTTP server under load, in process, over loopback: `/v1/plan`
//! and then `/v1/chat/completions`, with latency percentiles, throughput and status counts.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use plansmith_core::trace::read_traces;
use plansmith_serve::ServeConfig;

use super::plan::{load_planner, PlannerArgs};
use crate::Outcome;

#[derive(Args)]
pub struct BenchServeArgs {
    #[command(flatten)]
    pub planner: PlannerArgs,
    /// Requests per route.
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// Concurrent clients (each on its own kept-alive connection).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Planner worker threads (default: the number of CPUs).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Request texts (traces JSONL); default: generated Pace test requests.
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchServeArgs) -> anyhow::Result<Outcome> {
    let planner = Arc::new(load_planner(&args.planner)?);
    let texts: Vec<String> = match &args.data {
        Some(path) => read_traces(path)?.into_iter().map(|t| t.request).collect(),
        None => {
            let mut cfg = plansmith_data::PaceConfig::with_n(300);
            cfg.seed = 1234;
            plansmith_data::generate_pace(&cfg)?
                .test
                .into_iter()
                .map(|t| t.request)
                .collect()
        }
    };
    let defaults = ServeConfig::default();
    let config = ServeConfig {
        workers: args.workers.unwrap_or(defaults.workers),
        model_id: "plansmith-bench".into(),
        ..defaults
    };
    let workers = config.workers;
    let reports = plansmith_serve::bench::in_process(
        planner,
        config,
        &texts,
        args.requests,
        args.concurrency,
    )?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"workers": workers, "routes": reports})
        );
    } else {
        println!(
            "{} workers, {} distinct request texts",
            workers,
            texts.len()
        );
        print!("{}", plansmith_serve::bench::table(&reports));
    }
    let failed = reports
        .iter()
        .any(|r| r.server_errors > 0 || r.transport_errors > 0);
    if failed {
        eprintln!("error: some requests failed with 5xx or got no response");
    }
    Ok(if failed { Outcome::Failed } else { Outcome::Ok })
}
