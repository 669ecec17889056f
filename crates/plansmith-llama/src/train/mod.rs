//! The LoRA training engine: loss and exact LoRA gradients of a batch of examples over a frozen
//! Llama-family base (SmolLM2 / Llama, Qwen2 with q/k/v biases, Qwen3 with q/k norms), written as
//! flat f32 buffers and `gemm` products like the tiny GPT's step (`plansmith-lm`), instead of
//! candle autograd (which keeps every layer's attention scores and spends ~20 GB on one
//! 1,300-token SmolLM2 example; see DESIGN.md on candle gradients).
//!
//! - [`pack`]: a batch becomes one flat sequence; examples sharing a prompt prefix store and run
//!   it once (exact: attention never crosses examples).
//! - [`step`]: forward keeping one checkpoint per block, loss on reply rows only, backward that
//!   recomputes each block's activations (or keeps them when they fit the budget).
//! - [`attention`]: blocked causal attention that recomputes probabilities in the backward.
//! - [`optim`]: AdamW with f32 moments, warm-up + cosine, global-norm clipping.
//! - [`checkpoint`]: atomic resumable checkpoints.
//!
//! The adapters, moments and gradients are f32: they are ~1% of a small model, so bf16 would
//! save little memory and cost accuracy in the updates.

mod attention;
pub mod bf16;
pub mod checkpoint;
mod kernels;
pub mod optim;
pub mod pack;
mod step;
mod weights;

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{LlamaError, Result};
use crate::lora::{gguf_to_hf_rows, LoraConfig, LoraTarget, PeftAdapter};
use crate::model::LlamaModel;
pub use pack::Example;
use step::{Ctx, Dropout, Grads, Saved, Scratch};
use weights::{FrozenBase, LoraParams};

/// How to train: the adapter's shape and the optimizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    pub rank: usize,
    pub alpha: f64,
    /// LoRA dropout on each adapter's input (0 disables it).
    pub dropout: f32,
    pub targets: Vec<LoraTarget>,
    pub seed: u64,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warm-up steps, then cosine decay to 0 at `total_steps`.
    pub warmup_steps: usize,
    pub total_steps: usize,
    pub weight_decay: f64,
    /// Clip the global gradient norm to this (0 disables clipping).
    pub clip_norm: f64,
    /// Share a prompt prefix between examples of a step when they have at least this many
    /// tokens in common (`None`: never).
    pub share_prefix: Option<usize>,
    /// Most rows per forward/backward pass; a larger batch runs as several passes whose
    /// gradients add up (exact).
    pub max_pack_rows: usize,
    /// Memory for activations. Passes are sized so that every block's activations from the
    /// forward fit in it and the backward needs no recompute (a third less work); a single
    /// example too long for that runs with per-block recompute and only the blocks' inputs
    /// kept.
    pub keep_activations_bytes: usize,
    /// The frozen base's precision in the step's matrix products.
    #[serde(default)]
    pub base_precision: BasePrecision,
}

/// How the frozen base enters the training step's matrix products. LoRA weights, gradients and
/// AdamW are f32 either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BasePrecision {
    /// Exact: the dequantized base in f32 (what the PEFT cross-checks compare).
    #[default]
    F32,
    /// Base and activations rounded to bfloat16, sums in f32 (AVX-512 BF16 CPUs only): about
    /// twice the multiply-adds per cycle, half the base's memory.
    Bf16,
}

impl BasePrecision {
    /// The name the command line and the reports use (`f32`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
        }
    }

    /// Bf16 where this CPU has AVX-512 BF16, f32 elsewhere.
    pub fn fastest() -> Self {
        if bf16::supported() {
            Self::Bf16
        } else {
            Self::F32
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            rank: 16,
            alpha: 32.0,
            dropout: 0.0,
            targets: LoraTarget::ALL.to_vec(),
            seed: 0,
            lr: 2e-4,
            warmup_steps: 0,
            total_steps: 1,
            weight_decay: 0.0,
            clip_norm: 1.0,
            share_prefix: Some(32),
            max_pack_rows: 4096,
            keep_activations_bytes: 3 << 29,
            base_precision: BasePrecision::F32,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    /// Mean next-token cross-entropy over the batch's reply tokens.
    pub loss: f64,
    pub targets: usize,
    /// Rows run (after prefix sharing) and rows the same examples would cost unshared.
    pub rows: usize,
    pub unshared_rows: usize,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub lr: f64,
}

/// Frozen base + trainable LoRA adapters + optimizer state.
pub struct LoraEngine {
    base: FrozenBase,
    lora: LoraParams,
    grad: Vec<f32>,
    opt: optim::AdamW,
    config: EngineConfig,
    /// Steps taken (the next step is `step + 1`).
    step: u64,
    fingerprint: u64,
    saved: Vec<Saved>,
    grads: Grads,
    scratch: Scratch,
    ckpt: Vec<Vec<f32>>,
    scratch_peak: usize,
}

/// The LoRA settings no engine can run with: a rank of 0, a dropout outside `[0, 1)`, no
/// target projection. Checked by the engine, and by a caller before it loads a model.
pub fn check_lora_settings(rank: usize, dropout: f32, targets: usize) -> Result<()> {
    if rank == 0 {
        return Err(LlamaError::State("LoRA rank must be >= 1 (got 0)".into()));
    }
    if targets == 0 {
        return Err(LlamaError::State(
            "LoRA needs at least one target projection".into(),
        ));
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(LlamaError::State(format!(
            "LoRA dropout must be in [0, 1), got {dropout}"
        )));
    }
    Ok(())
}

impl LoraEngine {
    /// Dequantize `model` into the frozen base and create adapters (A random, B zero).
    ///
    /// Errors: a rank of 0, no target, a dropout outside `[0, 1)`, a model shape the step does
    /// not cover.
    pub fn new(model: &LlamaModel, config: EngineConfig) -> Result<Self> {
        check_lora_settings(config.rank, config.dropout, config.targets.len())?;
        let base = FrozenBase::from_model(model, config.base_precision)?;
        let lora = LoraParams::new(
            &base.cfg,
            config.rank,
            config.alpha,
            &config.targets,
            config.seed,
        );
        let n = lora.data.len();
        Ok(Self {
            base,
            grad: vec![0.0; n],
            opt: optim::AdamW::new(n),
            lora,
            config,
            step: 0,
            fingerprint: model.fingerprint(),
            saved: Vec::new(),
            grads: Grads::default(),
            scratch: Scratch::default(),
            ckpt: Vec::new(),
            scratch_peak: 0,
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Optimizer steps taken so far.
    pub fn steps_done(&self) -> u64 {
        self.step
    }

    /// Trainable parameters.
    pub fn num_params(&self) -> usize {
        self.lora.data.len()
    }

    /// Bytes of the frozen base and the largest step scratch so far.
    pub fn memory(&self) -> (usize, usize) {
        (self.base.bytes(), self.scratch_peak)
    }

    /// Check an example against the model; `i` names it in the error.
    fn check(&self, i: usize, ex: &Example) -> Result<()> {
        let bad =
            |reason: String| Err(LlamaError::State(format!("training example {i}: {reason}")));
        let len = ex.tokens.len();
        if ex.prompt_len == 0 || ex.prompt_len >= len {
            return bad(format!(
                "the reply must start inside the example (prompt_len {} of {len} tokens)",
                ex.prompt_len
            ));
        }
        if len > self.base.cfg.max_position {
            return bad(format!(
                "{len} tokens exceed the model's context of {}",
                self.base.cfg.max_position
            ));
        }
        if let Some(&t) = ex
            .tokens
            .iter()
            .find(|&&t| t as usize >= self.base.cfg.vocab_size)
        {
            return bad(format!(
                "token id {t} is outside the vocabulary ({})",
                self.base.cfg.vocab_size
            ));
        }
        Ok(())
    }

    /// The batch split into passes of at most `max_pack_rows` rows. Without a shared prefix,
    /// passes are also kept within the activation budget (no recompute); a batch whose examples
    /// share a prefix stays in as few passes as possible, since every pass would run the prefix
    /// again, and pays for it with the recompute instead. An example longer than the limit runs
    /// alone.
    fn passes(&self, batch: &[Example]) -> Vec<pack::Pack> {
        let share = self.config.share_prefix;
        let all: Vec<&Example> = batch.iter().collect();
        let shares = share.is_some() && {
            let p = pack::pack(&all, share);
            p.rows() * 5 < p.unshared_rows * 4
        };
        let per_row = self.base.cfg.num_layers * self.activation_bytes(1);
        let limit = if shares {
            self.config.max_pack_rows
        } else {
            self.config
                .max_pack_rows
                .min((self.config.keep_activations_bytes / per_row).max(64))
        };
        let mut out = Vec::new();
        let mut cur: Vec<&Example> = Vec::new();
        for ex in batch {
            cur.push(ex);
            if cur.len() > 1 && pack::pack(&cur, share).rows() > limit {
                cur.pop();
                out.push(pack::pack(&cur, share));
                cur = vec![ex];
            }
        }
        if !cur.is_empty() {
            out.push(pack::pack(&cur, share));
        }
        out
    }

    /// Loss of `batch` and its gradient with respect to every LoRA parameter (into the
    /// engine's gradient buffer, see [`Self::gradient`]); no update. Dropout draws from step
    /// `self.steps_done() + 1`.
    pub fn loss_and_grad(&mut self, batch: &[Example]) -> Result<StepStats> {
        if batch.is_empty() {
            return Err(LlamaError::State("empty training batch".into()));
        }
        for (i, ex) in batch.iter().enumerate() {
            self.check(i, ex)?;
        }
        let total: usize = batch.iter().map(|e| e.tokens.len() - e.prompt_len).sum();
        let inv_total = 1.0 / total as f32;
        self.grad.fill(0.0);
        let dropout = (self.config.dropout > 0.0).then(|| Dropout {
            p: self.config.dropout,
            seed: self.config.seed ^ (self.step + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
        });
        let (mut loss, mut rows, mut unshared) = (0f64, 0, 0);
        for p in self.passes(batch) {
            rows += p.rows();
            unshared += p.unshared_rows;
            loss += self.run_pass(&p, inv_total, dropout);
        }
        Ok(StepStats {
            loss: loss / total as f64,
            targets: total,
            rows,
            unshared_rows: unshared,
            grad_norm: optim::norm(&self.grad),
            lr: self.lr_at(self.step + 1),
        })
    }

    fn activation_bytes(&self, n: usize) -> usize {
        let c = &self.base.cfg;
        let (qd, kvd) = (c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim);
        let lora = self.config.targets.len() * self.config.rank;
        let first = self.base.layers.first();
        let norms = if first.is_some_and(|l| l.q_norm.is_some()) {
            qd + kvd
        } else {
            0
        };
        // Gemma 3 keeps each branch's output before its post norm, and the norm's factor.
        let post = if first.is_some_and(|l| l.post_attn_norm.is_some()) {
            2 * c.hidden_size + 2
        } else {
            0
        };
        4 * n
            * (c.hidden_size
                + 2 * qd
                + 2 * kvd
                + norms
                + post
                + 2 * c.intermediate_size
                + lora
                + c.num_heads
                + c.num_kv_heads
                + 2)
    }

    fn run_pass(&mut self, pack: &pack::Pack, inv_total: f32, dropout: Option<Dropout>) -> f64 {
        let n = pack.rows();
        let layers = self.base.cfg.num_layers;
        let d = self.base.cfg.hidden_size;
        let keep = layers * self.activation_bytes(n) <= self.config.keep_activations_bytes;
        let Self {
            base,
            lora,
            grad,
            saved,
            grads,
            scratch,
            ckpt,
            ..
        } = self;
        let cx = Ctx {
            base,
            lora,
            params: &lora.data,
            pack,
            dropout,
        };
        ckpt.resize_with(layers + 1, Vec::new);
        saved.resize_with(if keep { layers } else { 1 }, Saved::default);
        let x0 = sized(&mut ckpt[0], n * d);
        for (row, &t) in pack.tokens.iter().enumerate() {
            x0[row * d..(row + 1) * d]
                .copy_from_slice(&base.embed[t as usize * d..(t as usize + 1) * d]);
        }
        if base.cfg.gemma.scale_embeddings {
            // Gemma scales its embeddings by sqrt(hidden), in f32 as the runtime does.
            let scale = (d as f32).sqrt();
            x0.iter_mut().for_each(|v| *v *= scale);
        }
        for li in 0..layers {
            let (done, rest) = ckpt.split_at_mut(li + 1);
            let s = &mut saved[if keep { li } else { 0 }];
            step::block_forward(&cx, li, &done[li], sized(&mut rest[0], n * d), s, scratch);
        }
        let mut dx = vec![0f32; n * d];
        let loss = step::head_loss(&cx, &ckpt[layers], inv_total, &mut dx);
        let mut out = Vec::new();
        for li in (0..layers).rev() {
            let s = if keep {
                &mut saved[li]
            } else {
                let s = &mut saved[0];
                step::block_forward(&cx, li, &ckpt[li], sized(&mut out, n * d), s, scratch);
                s
            };
            step::block_backward(&cx, li, &ckpt[li], &mut dx, s, grads, grad);
        }
        let bytes = saved.iter().map(Saved::bytes).sum::<usize>()
            + grads.bytes()
            + 4 * ckpt.iter().map(Vec::capacity).sum::<usize>()
            + 8 * dx.capacity();
        self.scratch_peak = self.scratch_peak.max(bytes);
        loss
    }

    fn lr_at(&self, step: u64) -> f64 {
        optim::warmup_cosine(
            self.config.lr,
            step,
            self.config.warmup_steps,
            self.config.total_steps,
        )
    }

    /// One optimizer step on `batch`: gradient, clipping, AdamW update.
    pub fn step(&mut self, batch: &[Example]) -> Result<StepStats> {
        let stats = self.loss_and_grad(batch)?;
        self.step += 1;
        let clip = if self.config.clip_norm > 0.0 && stats.grad_norm > self.config.clip_norm {
            (self.config.clip_norm / stats.grad_norm) as f32
        } else {
            1.0
        };
        self.opt.update(
            &mut self.lora.data,
            &self.grad,
            clip,
            stats.lr,
            self.config.weight_decay,
            self.step,
        );
        Ok(stats)
    }

    /// The gradient of the last [`Self::loss_and_grad`] for one adapter, as `(dA, dB)` in the
    /// runtime's (GGUF) row layout.
    pub fn gradient(&self, layer: usize, target: LoraTarget) -> Option<(&[f32], &[f32])> {
        let s = self.lora.slot(layer, target)?;
        Some((self.lora.a(&s, &self.grad), self.lora.b(&s, &self.grad)))
    }

    /// The flat vector of every adapter's A and B.
    pub fn parameters(&self) -> &[f32] {
        &self.lora.data
    }

    /// The flat vector of every adapter's A and B (tests and custom initialisation).
    pub fn parameters_mut(&mut self) -> &mut [f32] {
        &mut self.lora.data
    }

    /// Every adapter's `(layer, target)`.
    pub fn adapters(&self) -> Vec<(usize, LoraTarget)> {
        self.lora
            .slots
            .iter()
            .map(|s| (s.layer, s.target))
            .collect()
    }

    /// Replace the adapter weights with a loaded PEFT adapter (same rank and targets).
    pub fn load_adapter(&mut self, adapter: &PeftAdapter) -> Result<()> {
        for s in self.lora.slots.clone() {
            let Some((a, b)) = adapter.weights.get(&(s.layer, s.target)) else {
                return Err(LlamaError::MissingTensor {
                    path: adapter.path.clone(),
                    tensor: format!("{}.lora_A.weight", s.target.peft_prefix(s.layer)),
                });
            };
            let (a, b) = (
                a.flatten_all()?.to_vec1::<f32>()?,
                b.flatten_all()?.to_vec1::<f32>()?,
            );
            if a.len() != self.lora.r * s.inp || b.len() != s.out * self.lora.r {
                return Err(LlamaError::TensorShape {
                    path: adapter.path.clone(),
                    tensor: s.target.peft_prefix(s.layer),
                    found: vec![a.len(), b.len()],
                    expected: vec![self.lora.r * s.inp, s.out * self.lora.r],
                });
            }
            self.lora.data[s.a..s.a + a.len()].copy_from_slice(&a);
            self.lora.data[s.b..s.b + b.len()].copy_from_slice(&b);
        }
        Ok(())
    }

    /// The adapters as PEFT tensors (q/k `lora_B` rows back in the Hugging Face layout), from
    /// `data` (the weights, or the gradient for comparisons with PEFT).
    fn peft_tensors(&self, data: &[f32]) -> Result<BTreeMap<String, Tensor>> {
        let (cfg, r) = (&self.base.cfg, self.lora.r);
        let mut out = BTreeMap::new();
        for s in &self.lora.slots {
            let p = s.target.peft_prefix(s.layer);
            let a = Tensor::from_slice(self.lora.a(s, data), (r, s.inp), &Device::Cpu)?;
            let b = Tensor::from_slice(self.lora.b(s, data), (s.out, r), &Device::Cpu)?;
            let b = match s.target.rope_heads(cfg) {
                Some(h) => gguf_to_hf_rows(&b, h, cfg.head_dim)?,
                None => b,
            };
            out.insert(format!("{p}.lora_A.weight"), a);
            out.insert(format!("{p}.lora_B.weight"), b);
        }
        Ok(out)
    }

    /// The last gradient under PEFT tensor names and layout.
    pub fn peft_gradient(&self) -> Result<BTreeMap<String, Tensor>> {
        self.peft_tensors(&self.grad)
    }

    /// Save the adapter in PEFT layout (`adapter_config.json` + `adapter_model.safetensors`),
    /// each file written atomically.
    pub fn save_peft(&self, dir: &Path, base_model: &str) -> Result<()> {
        self.save_peft_as(dir, base_model, DType::F32)
    }

    /// [`Self::save_peft`] with the weights stored as `dtype` (F16 halves a committed adapter;
    /// loading widens it back to f32, so a planner calibrated on the loaded file is calibrated
    /// on exactly the rounded weights it serves).
    pub fn save_peft_as(&self, dir: &Path, base_model: &str, dtype: DType) -> Result<()> {
        let config = LoraConfig {
            r: self.lora.r,
            alpha: self.config.alpha,
            targets: self.config.targets.clone(),
        };
        let tensors = self
            .peft_tensors(&self.lora.data)?
            .into_iter()
            .map(|(name, t)| Ok((name, t.to_dtype(dtype)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        crate::lora::write_peft(dir, &tensors, &config, self.config.dropout, base_model)
    }
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    v.resize(n, 0.0);
    &mut v[..n]
}
