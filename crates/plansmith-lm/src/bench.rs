//! Benchmarks the CLI exposes as `plansmith bench train` and `plansmith bench decode`.
//!
//! Both run on synthetic data of a fixed shape so the numbers compare across machines and with
//! `bench/pytorch_tiny_gpt.py`, which runs the same architecture, shapes and batch size in
//! PyTorch. Timings are wall-clock on the current thread pool.

use std::time::Instant;

use candle_core::Device;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::decode::Session;
use crate::error::{LmError, Result};
use crate::fast::FastTrainer;
use crate::optim::{clip_grad_norm, AdamW, AdamWParams};
use crate::tiny_gpt::{TinyGpt, TinyGptConfig};
use crate::train::{fast_batch, loss_and_grads, TrainEngine};

/// Training-throughput benchmark settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainBenchConfig {
    pub model: TinyGptConfig,
    pub batch_size: usize,
    /// Prompt tokens per synthetic pair.
    pub prompt_len: usize,
    /// Completion tokens per synthetic pair (these carry loss).
    pub completion_len: usize,
    /// Untimed warm-up steps.
    pub warmup_steps: usize,
    /// Timed optimizer steps.
    pub steps: usize,
    pub seed: u64,
    /// Which training step to time: the fast path (default, what `fit_pairs` uses) or the
    /// candle-autograd reference.
    #[serde(default)]
    pub engine: TrainEngine,
}

impl Default for TrainBenchConfig {
    fn default() -> Self {
        Self {
            model: TinyGptConfig::with_vocab(64),
            batch_size: 32,
            prompt_len: 64,
            completion_len: 32,
            warmup_steps: 2,
            steps: 10,
            seed: 0,
            engine: TrainEngine::Auto,
        }
    }
}

/// Training-throughput result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainBenchResult {
    pub batch_size: usize,
    pub seq_len: usize,
    pub steps: usize,
    pub seconds: f64,
    /// Sequence characters (prompt + completion) per second.
    pub chars_per_sec: f64,
    pub ms_per_step: f64,
    pub params: usize,
    pub final_loss: f32,
    /// `"fast"` or `"reference"`.
    #[serde(default)]
    pub engine: String,
    /// Rayon threads available to the step.
    #[serde(default)]
    pub threads: usize,
}

fn synthetic_pairs(
    n: usize,
    prompt_len: usize,
    completion_len: usize,
    vocab: usize,
    rng: &mut StdRng,
) -> Vec<(Vec<u32>, Vec<u32>)> {
    (0..n)
        .map(|_| {
            let p = (0..prompt_len)
                .map(|_| rng.random_range(2..vocab as u32))
                .collect();
            let c = (0..completion_len)
                .map(|_| rng.random_range(2..vocab as u32))
                .collect();
            (p, c)
        })
        .collect()
}

/// Full optimizer steps (forward, backward, clip, AdamW) on fixed-shape synthetic batches.
pub fn bench_train(cfg: &TrainBenchConfig) -> Result<TrainBenchResult> {
    if cfg.steps == 0 || cfg.batch_size == 0 || cfg.completion_len == 0 {
        return Err(LmError::Config(
            "bench train needs steps, batch_size and completion_len > 0".into(),
        ));
    }
    let seq_len = cfg.prompt_len + cfg.completion_len;
    if seq_len > cfg.model.block + 1 {
        return Err(LmError::ContextOverflow {
            needed: seq_len - 1,
            block: cfg.model.block,
        });
    }
    let model = TinyGpt::new(cfg.model.clone(), cfg.seed, &Device::Cpu)?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let adam = AdamWParams {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.01,
    };
    let batches: Vec<_> = (0..cfg.warmup_steps + cfg.steps)
        .map(|_| {
            synthetic_pairs(
                cfg.batch_size,
                cfg.prompt_len,
                cfg.completion_len,
                cfg.model.vocab,
                &mut rng,
            )
        })
        .collect();
    let mut loss = 0f32;
    let fast = cfg.engine == TrainEngine::Auto && FastTrainer::supports(&model);
    let seconds = if fast {
        // the optimizer loop of `fit_pairs`: batch assembly, forward/backward, clip, AdamW
        let mut ft = FastTrainer::from_model(&model)?;
        let mut t0 = Instant::now();
        for (i, b) in batches.iter().enumerate() {
            if i == cfg.warmup_steps {
                t0 = Instant::now();
            }
            let batch = fast_batch(&cfg.model, b)?;
            loss = ft.loss_and_grads(&batch)?;
            ft.clip_grad_norm(1.0);
            ft.adamw_step(&adam);
        }
        let s = t0.elapsed().as_secs_f64();
        ft.write_to(&model)?;
        s
    } else {
        let mut opt = AdamW::new(model.vars(), adam)?;
        let mut t0 = Instant::now();
        for (i, b) in batches.iter().enumerate() {
            if i == cfg.warmup_steps {
                t0 = Instant::now();
            }
            let (l, mut grads) = loss_and_grads(&model, b)?;
            clip_grad_norm(model.vars(), &mut grads, 1.0)?;
            opt.step(&grads)?;
            loss = l;
        }
        t0.elapsed().as_secs_f64()
    };
    let chars = cfg.steps * cfg.batch_size * seq_len;
    Ok(TrainBenchResult {
        batch_size: cfg.batch_size,
        seq_len,
        steps: cfg.steps,
        seconds,
        chars_per_sec: chars as f64 / seconds,
        ms_per_step: seconds * 1e3 / cfg.steps as f64,
        params: model.num_params(),
        final_loss: loss,
        engine: if fast { "fast" } else { "reference" }.into(),
        threads: rayon::current_num_threads(),
    })
}

/// Decode-latency benchmark settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeBenchConfig {
    pub model: TinyGptConfig,
    /// Prompt tokens (96 characters by default).
    pub prompt_len: usize,
    /// Tokens generated per repetition.
    pub new_tokens: usize,
    /// Timed repetitions (the best and mean are reported).
    pub reps: usize,
    pub seed: u64,
}

impl Default for DecodeBenchConfig {
    fn default() -> Self {
        Self {
            model: TinyGptConfig::with_vocab(64),
            prompt_len: 96,
            new_tokens: 64,
            reps: 5,
            seed: 0,
        }
    }
}

/// Decode-latency result (microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeBenchResult {
    pub prompt_len: usize,
    pub new_tokens: usize,
    /// Feeding the whole prompt into an empty cache (one batched pass).
    pub prefill_us: f64,
    /// Per generated token with the KV cache (mean over all tokens and repetitions).
    pub cached_us_per_token: f64,
    /// Prefill on the flat-buffer forward planners decode with ([`crate::InferModel`]).
    pub flat_prefill_us: f64,
    /// Per generated token on the flat-buffer forward, with its KV cache.
    pub flat_us_per_token: f64,
    /// Per generated token recomputing the whole sequence each step (mixle's `generate`).
    pub uncached_us_per_token: f64,
    /// `uncached / cached`.
    pub speedup: f64,
    /// Restoring a prefix snapshot (vs. `prefill_us` to recompute it).
    pub restore_us: f64,
}

/// Per-token latency of cached vs. uncached greedy decoding after a fixed-length prompt.
pub fn bench_decode(cfg: &DecodeBenchConfig) -> Result<DecodeBenchResult> {
    if cfg.prompt_len == 0 || cfg.new_tokens == 0 || cfg.reps == 0 {
        return Err(LmError::Config(
            "bench decode needs prompt_len, new_tokens and reps > 0".into(),
        ));
    }
    let needed = cfg.prompt_len + cfg.new_tokens;
    if needed > cfg.model.block {
        return Err(LmError::ContextOverflow {
            needed,
            block: cfg.model.block,
        });
    }
    let model = TinyGpt::new(cfg.model.clone(), cfg.seed, &Device::Cpu)?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let prompt: Vec<u32> = (0..cfg.prompt_len)
        .map(|_| rng.random_range(2..cfg.model.vocab as u32))
        .collect();
    // tokens to append are fixed in advance so both paths do the same work
    let extra: Vec<u32> = (0..cfg.new_tokens)
        .map(|_| rng.random_range(2..cfg.model.vocab as u32))
        .collect();

    // warm-up
    {
        let mut s = Session::new(&model);
        s.feed(&prompt)?;
        for &t in extra.iter().take(4) {
            s.push(t)?;
        }
        model.forward(&prompt)?;
    }

    let mut prefill = 0f64;
    let mut cached = 0f64;
    let mut restore = 0f64;
    let mut snap = None;
    for _ in 0..cfg.reps {
        let mut s = Session::new(&model);
        let t0 = Instant::now();
        s.feed(&prompt)?;
        prefill += t0.elapsed().as_secs_f64();
        snap = Some(s.snapshot());
        let t0 = Instant::now();
        for &t in &extra {
            std::hint::black_box(s.push(t)?);
        }
        cached += t0.elapsed().as_secs_f64();
    }
    if let Some(snap) = &snap {
        let mut s = Session::new(&model);
        let t0 = Instant::now();
        for _ in 0..cfg.reps * 100 {
            s.restore(snap);
        }
        restore = t0.elapsed().as_secs_f64() / 100.0;
    }

    let fast = crate::InferModel::from_model(&model)?;
    let (mut flat_prefill, mut flat) = (0f64, 0f64);
    for _ in 0..cfg.reps {
        let mut cache = crate::InferCache::new();
        let t0 = Instant::now();
        std::hint::black_box(fast.forward(&prompt, &mut cache, crate::Rows::Last)?);
        flat_prefill += t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        for &t in &extra {
            std::hint::black_box(fast.forward(&[t], &mut cache, crate::Rows::Last)?);
        }
        flat += t0.elapsed().as_secs_f64();
    }

    let mut uncached = 0f64;
    for _ in 0..cfg.reps {
        let mut seq = prompt.clone();
        let t0 = Instant::now();
        for &t in &extra {
            seq.push(t);
            let logits = model.forward(&seq)?;
            let last = logits
                .narrow(0, seq.len() - 1, 1)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            std::hint::black_box(last);
        }
        uncached += t0.elapsed().as_secs_f64();
    }
    let per = (cfg.reps * cfg.new_tokens) as f64;
    let cached_us = cached * 1e6 / per;
    let uncached_us = uncached * 1e6 / per;
    Ok(DecodeBenchResult {
        prompt_len: cfg.prompt_len,
        new_tokens: cfg.new_tokens,
        prefill_us: prefill * 1e6 / cfg.reps as f64,
        cached_us_per_token: cached_us,
        flat_prefill_us: flat_prefill * 1e6 / cfg.reps as f64,
        flat_us_per_token: flat * 1e6 / per,
        uncached_us_per_token: uncached_us,
        speedup: uncached_us / cached_us,
        restore_us: restore * 1e6 / cfg.reps as f64,
    })
}
