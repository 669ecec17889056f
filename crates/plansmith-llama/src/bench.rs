//! `plansmith bench lm`: prefill / decode throughput and time-to-first-token with and without a
//! cached tools prefix. The llama.cpp peer (`bench/llama_peer.py`) measures the same cases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bundle::GgufBundle;
use crate::error::{LlamaError, Result};
use crate::model::argmax;
use crate::prefix::{PrefixCache, PrefixKey, PrefixOutcome};

/// What to measure.
#[derive(Debug, Clone, Serialize)]
pub struct BenchOptions {
    /// Prompt lengths for prefill throughput.
    pub prefill_lens: Vec<usize>,
    /// Context before decoding.
    pub decode_context: usize,
    /// Tokens decoded.
    pub decode_tokens: usize,
    /// Length of the cached tools prefix for the TTFT cases.
    pub prefix_tokens: usize,
    /// Repetitions per case (the median is reported).
    pub reps: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            prefill_lens: vec![300, 1500],
            decode_context: 300,
            decode_tokens: 64,
            prefix_tokens: 1500,
            reps: 3,
        }
    }
}

/// One measured case.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub case: String,
    pub tokens: usize,
    /// Median wall time in milliseconds.
    pub ms: f64,
    /// Tokens per second (0 for latency-only rows).
    pub tok_per_s: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub threads: usize,
    pub rows: Vec<BenchRow>,
    /// TTFT cached / uncached.
    pub ttft_ratio: f64,
}

impl BenchReport {
    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<34} {:>7} {:>10} {:>9}\n",
            "case", "tokens", "ms", "tok/s"
        );
        for r in &self.rows {
            s.push_str(&format!(
                "{:<34} {:>7} {:>10.1} {:>9.1}\n",
                r.case, r.tokens, r.ms, r.tok_per_s
            ));
        }
        s.push_str(&format!(
            "TTFT cached/uncached: {:.2}% ({} threads)\n",
            self.ttft_ratio * 100.0,
            self.threads
        ));
        s
    }
}

/// Deterministic filler text tokenized to exactly `n` tokens.
pub fn synthetic_tokens(b: &GgufBundle, n: usize) -> Vec<u32> {
    let para = "The planner reads a request and a catalog of tools, then emits the calls that \
                fulfil it. Tools live in the prompt, not in the weights: adding one is a line of \
                JSON. Only verified plans leave; the rest escalate to a teacher. 12 timers, 3 \
                lights, and 7 playlists were configured on 2024-06-01. ";
    let mut text = String::new();
    let mut ids = Vec::new();
    while ids.len() < n {
        text.push_str(para);
        ids = b.tokenizer.encode(&text, false, false);
    }
    ids.truncate(n);
    ids
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Run the benchmark on a loaded model (threads are whatever candle was configured with:
/// set `RAYON_NUM_THREADS` before the first tensor op).
pub fn bench_lm(b: &GgufBundle, opts: &BenchOptions) -> Result<BenchReport> {
    if opts.reps == 0 {
        return Err(LlamaError::State("reps must be >= 1".into()));
    }
    let model = &b.model;
    let mut rows = Vec::new();
    // Warm-up (page in weights, thread pool).
    model.session().prefill(&synthetic_tokens(b, 32))?;

    for &n in &opts.prefill_lens {
        let toks = synthetic_tokens(b, n);
        let mut times = Vec::new();
        for _ in 0..opts.reps {
            let mut s = model.session();
            let t = Instant::now();
            s.prefill(&toks)?;
            times.push(t.elapsed());
        }
        let m = median(times);
        rows.push(BenchRow {
            case: format!("prefill {n}"),
            tokens: n,
            ms: m.as_secs_f64() * 1e3,
            tok_per_s: n as f64 / m.as_secs_f64(),
        });
    }

    // Decode: greedy steps after a context.
    let ctx = synthetic_tokens(b, opts.decode_context);
    let mut times = Vec::new();
    for _ in 0..opts.reps {
        let mut s = model.session();
        let mut logits = s.prefill(&ctx)?;
        let t = Instant::now();
        for _ in 0..opts.decode_tokens {
            logits = s.step(argmax(&logits))?;
        }
        times.push(t.elapsed());
    }
    let m = median(times);
    rows.push(BenchRow {
        case: format!("decode (ctx {})", opts.decode_context),
        tokens: opts.decode_tokens,
        ms: m.as_secs_f64() * 1e3,
        tok_per_s: opts.decode_tokens as f64 / m.as_secs_f64(),
    });

    // TTFT with a tools prefix: uncached (full prefill) vs cached (restore + request).
    let prefix = synthetic_tokens(b, opts.prefix_tokens);
    let request = b
        .tokenizer
        .encode("<|im_start|>user\nset a timer for 5 minutes and play some jazz<|im_end|>\n<|im_start|>assistant\n", false, true);
    let full: Vec<u32> = prefix.iter().chain(&request).copied().collect();
    let mut unc = Vec::new();
    for _ in 0..opts.reps {
        let mut s = model.session();
        let t = Instant::now();
        s.prefill(&full)?;
        unc.push(t.elapsed());
    }
    let cache = PrefixCache::new(1 << 30);
    let key = PrefixKey {
        model: model.fingerprint(),
        catalog: "bench".into(),
        template: b.template.id(),
    };
    let mut warm = model.session();
    cache.prefill(&mut warm, &key, &prefix, &request)?;
    let mut cached = Vec::new();
    for _ in 0..opts.reps {
        let mut s = model.session();
        let t = Instant::now();
        let (_, outcome) = cache.prefill(&mut s, &key, &prefix, &request)?;
        cached.push(t.elapsed());
        if outcome != PrefixOutcome::Hit {
            return Err(LlamaError::State(
                "prefix cache missed in the benchmark".into(),
            ));
        }
    }
    let (mu, mc) = (median(unc), median(cached));
    rows.push(BenchRow {
        case: format!("TTFT uncached ({}+{})", prefix.len(), request.len()),
        tokens: full.len(),
        ms: mu.as_secs_f64() * 1e3,
        tok_per_s: 0.0,
    });
    rows.push(BenchRow {
        case: format!("TTFT cached prefix ({}+{})", prefix.len(), request.len()),
        tokens: request.len(),
        ms: mc.as_secs_f64() * 1e3,
        tok_per_s: 0.0,
    });
    let _ = Arc::strong_count(model);
    Ok(BenchReport {
        threads: candle_core::utils::get_num_threads(),
        rows,
        ttft_ratio: mc.as_secs_f64() / mu.as_secs_f64(),
    })
}
