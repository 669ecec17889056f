//! `llama_bench <gguf> [--threads N] [--reps N] [--json out.json]`: prints the benchmark table.

use plansmith_llama::{bench_lm, BenchOptions, GgufBundle};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut threads = 2usize;
    let mut reps = 3usize;
    let mut json = None;
    let mut path = None;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--threads" => {
                threads = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(2);
                i += 1;
            }
            "--reps" => {
                reps = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(3);
                i += 1;
            }
            "--json" => {
                json = args.get(i + 1).cloned();
                i += 1;
            }
            p => path = Some(p.to_string()),
        }
        i += 1;
    }
    let Some(path) = path else {
        eprintln!("usage: llama_bench <gguf> [--threads N] [--reps N] [--json out.json]");
        std::process::exit(2);
    };
    // candle reads the thread count from the environment on first use.
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        let b = GgufBundle::load(&path)?;
        let opts = BenchOptions {
            reps,
            ..BenchOptions::default()
        };
        let r = bench_lm(&b, &opts)?;
        print!("{}", r.table());
        if let Some(j) = json {
            std::fs::write(j, serde_json::to_string_pretty(&r)?)?;
        }
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
