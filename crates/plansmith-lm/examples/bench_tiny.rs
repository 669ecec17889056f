//! Prints the training-throughput and decode-latency table of the default TinyGpt.
//!
//! `cargo run --release -p plansmith-lm --example bench_tiny [-- --batches 8,16,32,64 --json]`
//! (`--reference` times the candle-autograd training step instead of the fast path,
//! `--train-only` skips the decode benchmark)

use plansmith_lm::bench::{bench_decode, bench_train, DecodeBenchConfig, TrainBenchConfig};
use plansmith_lm::TrainEngine;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--json");
    let engine = if args.iter().any(|a| a == "--reference") {
        TrainEngine::Reference
    } else {
        TrainEngine::Auto
    };
    let train_only = args.iter().any(|a| a == "--train-only");
    let batches: Vec<usize> = args
        .iter()
        .position(|a| a == "--batches")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![32]);
    let steps: usize = args
        .iter()
        .position(|a| a == "--steps")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);

    let mut train = Vec::new();
    for &bs in &batches {
        let r = bench_train(&TrainBenchConfig {
            batch_size: bs,
            steps,
            engine,
            ..TrainBenchConfig::default()
        })?;
        train.push(r);
    }
    if train_only {
        if json {
            println!("{}", serde_json::json!({ "train": train }));
        } else {
            for r in &train {
                println!(
                    "| {} ({}, {} threads) | {} | {:.1} | {:.0} |",
                    r.batch_size, r.engine, r.threads, r.seq_len, r.ms_per_step, r.chars_per_sec
                );
            }
        }
        return Ok(());
    }
    let dec = bench_decode(&DecodeBenchConfig::default())?;
    if json {
        println!("{}", serde_json::json!({"train": train, "decode": dec}));
        return Ok(());
    }
    println!(
        "TinyGpt d_model 96, 3 layers, 4 heads, block 192, vocab 64 ({} params)",
        train[0].params
    );
    println!();
    println!("| train batch | seq len | ms/step | chars/s |");
    println!("|---:|---:|---:|---:|");
    for r in &train {
        println!(
            "| {} | {} | {:.1} | {:.0} |",
            r.batch_size, r.seq_len, r.ms_per_step, r.chars_per_sec
        );
    }
    println!();
    println!(
        "| decode ({}-token prompt, {} new) | value |",
        dec.prompt_len, dec.new_tokens
    );
    println!("|---|---:|");
    println!("| prefill (µs) | {:.0} |", dec.prefill_us);
    println!("| cached µs/token | {:.1} |", dec.cached_us_per_token);
    println!(
        "| uncached µs/token (full recompute) | {:.1} |",
        dec.uncached_us_per_token
    );
    println!("| speedup | {:.1}x |", dec.speedup);
    println!("| snapshot restore (µs) | {:.2} |", dec.restore_us);
    Ok(())
}
