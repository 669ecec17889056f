//! `cargo run --release -p plansmith-grammar --example bench_grammar [-- REPEATS [PEER_DIR]]`
//!
//! Prints the table, then the report as JSON (one line). Writes peer inputs for
//! `bench/grammar_peer.py` to PEER_DIR (default: target/bench-grammar).

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = std::env::args().skip(1);
    let repeats = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let peer_dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/bench-grammar"));
    let cfg = plansmith_grammar::bench::BenchConfig {
        tiktoken: root.join("assets/qwen.tiktoken"),
        pace: root.join("examples/pace/tools.json"),
        repeats,
        peer_dir: Some(peer_dir),
    };
    match plansmith_grammar::bench::run(&cfg) {
        Ok(report) => {
            print!("{}", plansmith_grammar::bench::table(&report));
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
        }
        Err(e) => {
            eprintln!("bench grammar: {e}");
            std::process::exit(2);
        }
    }
}
