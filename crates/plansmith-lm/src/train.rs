//! Prompt-masked supervised fine-tuning (SFT) of a [`TinyGpt`] on (prompt, completion) pairs.
//!
//! Objective: next-token cross-entropy on completion tokens only (every completion character,
//! including the final `\n`, carries loss; prompt tokens and padding carry none), averaged over
//! the loss tokens of a batch — mixle's `LM.fit_pairs` objective. Differences from mixle, all for
//! speed or robustness: batches are right-padded to the longest sequence *of the batch* (not to
//! the block), sequences of similar length are bucketed together, AdamW with linear warm-up and
//! cosine decay, global-norm gradient clipping, atomic resumable checkpoints.
//!
//! The step itself runs on [`FastTrainer`] (hand-written forward/backward on flat buffers) when
//! it supports the model, else — or with [`TrainEngine::Reference`] — on candle autograd; both
//! compute the same loss, gradients and AdamW update (`tests/fast_grad.rs`).
//!
//! Determinism: the initial weights come from the model seed, the batch order of epoch `e` from
//! `(seed, e)` only, so the same seed gives the same run and a resumed run is identical to an
//! uninterrupted one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Tensor, D};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::codec::Codec;
use crate::error::{LmError, Result};
use crate::fast::{FastBatch, FastTrainer};
use crate::io;
use crate::optim::{clip_grad_norm, AdamW, AdamWParams};
use crate::tiny_gpt::{TinyGpt, TinyGptConfig};

/// Where and how often to checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Directory holding `checkpoint.json` and the weights file it names.
    pub dir: PathBuf,
    /// Write a checkpoint every this many optimizer steps (0: only at the end).
    pub every_steps: usize,
    /// Continue from `dir/checkpoint.json` if present.
    pub resume: bool,
}

/// Training hyper-parameters. Defaults follow mixle's `sft_planner` (30 epochs, lr 3e-3,
/// batch 32) plus the schedule/clipping/decay that make the run stable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    pub epochs: usize,
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// The cosine decay ends at `lr * min_lr_ratio`.
    pub min_lr_ratio: f64,
    /// Fraction of all steps spent in linear warm-up (at least one step).
    pub warmup_frac: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Global gradient-norm clip (0 disables).
    pub grad_clip: f64,
    /// Seed of the batch order.
    pub seed: u64,
    /// Group sequences of similar length into the same batch (less padding).
    pub bucket_by_length: bool,
    /// Stop after this global step (the schedule still spans all epochs); for budgets and tests.
    pub stop_after: Option<usize>,
    /// Optional checkpointing.
    pub checkpoint: Option<CheckpointConfig>,
    /// Implementation of the training step (same objective and optimizer either way).
    pub engine: TrainEngine,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 30,
            batch_size: 32,
            lr: 3e-3,
            min_lr_ratio: 0.1,
            warmup_frac: 0.05,
            weight_decay: 0.01,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            grad_clip: 1.0,
            seed: 0,
            bucket_by_length: true,
            stop_after: None,
            checkpoint: None,
            engine: TrainEngine::Auto,
        }
    }
}

impl TrainConfig {
    fn validate(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(LmError::Config("train.epochs must be > 0".into()));
        }
        if self.batch_size == 0 {
            return Err(LmError::Config("train.batch_size must be > 0".into()));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(LmError::Config(format!(
                "train.lr must be > 0, got {}",
                self.lr
            )));
        }
        if !(0.0..=1.0).contains(&self.min_lr_ratio) || !(0.0..1.0).contains(&self.warmup_frac) {
            return Err(LmError::Config(
                "train.min_lr_ratio must be in [0, 1] and train.warmup_frac in [0, 1)".into(),
            ));
        }
        Ok(())
    }

    /// Learning rate at (0-based) step `step` of `total`.
    pub fn lr_at(&self, step: usize, total: usize) -> f64 {
        let warm = ((total as f64 * self.warmup_frac).round() as usize).max(1);
        if step < warm {
            return self.lr * (step + 1) as f64 / warm as f64;
        }
        let span = (total.saturating_sub(warm)).max(1) as f64;
        let t = ((step - warm) as f64 / span).min(1.0);
        let min = self.lr * self.min_lr_ratio;
        min + (self.lr - min) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
    }
}

/// Which implementation computes the training step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainEngine {
    /// The hand-written flat-buffer forward/backward ([`FastTrainer`]) when it supports the
    /// model (CPU), else the reference.
    #[default]
    Auto,
    /// candle autograd: the reference implementation the fast path is tested against.
    Reference,
}

/// Whether to draw a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// An indicatif bar on stderr with loss, tokens/s and ETA.
    Bar,
    /// Nothing (tests, libraries).
    Hidden,
}

/// What a training run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Token-weighted mean loss (nats/token) over the last epoch trained (partial if stopped).
    pub final_loss: f64,
    /// Loss of the last optimizer step.
    pub last_step_loss: f64,
    /// Sequence tokens (prompt + completion) processed per second in this run.
    pub tokens_per_sec: f64,
    /// Global optimizer steps done (including those before a resume).
    pub steps: usize,
    /// Steps of the whole schedule.
    pub total_steps: usize,
    /// Steps done by this call.
    pub steps_this_run: usize,
    /// Wall-clock seconds of this call's training loop.
    pub seconds: f64,
    /// Step the run resumed from, if it did.
    pub resumed_from: Option<usize>,
    /// Pairs whose prompt was cut from the left to fit the block.
    pub truncated_pairs: usize,
}

/// One training example: model inputs, targets, first loss position.
#[derive(Debug, Clone)]
struct Example {
    inputs: Vec<u32>,
    targets: Vec<u32>,
    loss_from: usize,
}

fn build_examples(
    pairs: &[(Vec<u32>, Vec<u32>)],
    block: usize,
    vocab: usize,
) -> Result<(Vec<Example>, usize)> {
    let mut out = Vec::with_capacity(pairs.len());
    let mut truncated = 0;
    for (i, (p, c)) in pairs.iter().enumerate() {
        if let Some(&id) = p.iter().chain(c.iter()).find(|&&id| id as usize >= vocab) {
            return Err(LmError::Data(format!(
                "pair {i}: token id {id} is outside the vocabulary [0, {vocab})"
            )));
        }
        if c.is_empty() {
            continue;
        }
        let mut seq: Vec<u32> = p.iter().chain(c.iter()).copied().collect();
        let mut plen = p.len();
        // inputs are seq[..len-1] at positions 0..len-2, so a sequence of block+1 tokens fits
        if seq.len() > block + 1 {
            let drop = seq.len() - (block + 1);
            seq.drain(..drop);
            plen = plen.saturating_sub(drop);
            truncated += 1;
        }
        if seq.len() < 2 {
            continue;
        }
        out.push(Example {
            inputs: seq[..seq.len() - 1].to_vec(),
            targets: seq[1..].to_vec(),
            loss_from: plen.saturating_sub(1),
        });
    }
    if out.is_empty() {
        return Err(LmError::Data(
            "no pair has a completion token to learn (all completions empty?)".into(),
        ));
    }
    Ok((out, truncated))
}

/// The batches (lists of example indices) of epoch `epoch`, deterministic in `(seed, epoch)`.
fn epoch_batches(examples: &[Example], cfg: &TrainConfig, epoch: usize) -> Vec<Vec<usize>> {
    let mut rng =
        StdRng::seed_from_u64(cfg.seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut order: Vec<usize> = (0..examples.len()).collect();
    order.shuffle(&mut rng);
    let bs = cfg.batch_size;
    let mut batches: Vec<Vec<usize>> = Vec::new();
    if cfg.bucket_by_length {
        for chunk in order.chunks(bs * 16) {
            let mut chunk = chunk.to_vec();
            chunk.sort_by_key(|&i| examples[i].inputs.len());
            batches.extend(chunk.chunks(bs).map(|b| b.to_vec()));
        }
        batches.shuffle(&mut rng);
    } else {
        batches.extend(order.chunks(bs).map(|b| b.to_vec()));
    }
    batches
}

fn steps_per_epoch(n: usize, cfg: &TrainConfig) -> usize {
    // chunks of bs*16 split into batches of bs: only the last chunk can be ragged
    n.div_ceil(cfg.batch_size)
}

/// Tensors of one right-padded batch.
struct Batch {
    ids: Tensor,
    sel: Tensor,
    tgt: Tensor,
    n_loss: usize,
    chars: usize,
}

fn make_batch(model: &TinyGpt, examples: &[Example], idx: &[usize]) -> Result<Batch> {
    let (fast, chars) = make_fast_batch(examples, idx);
    let (sel, tgt): (Vec<u32>, Vec<u32>) = fast.targets.into_iter().unzip();
    let dev = model.device();
    let n_loss = sel.len();
    Ok(Batch {
        ids: Tensor::from_vec(fast.ids, (fast.b, fast.t), dev)?,
        sel: Tensor::from_vec(sel, n_loss, dev)?,
        tgt: Tensor::from_vec(tgt, (n_loss, 1), dev)?,
        n_loss,
        chars,
    })
}

/// A right-padded, prompt-masked batch (the candle path's [`make_batch`] is this as tensors).
fn make_fast_batch(examples: &[Example], idx: &[usize]) -> (FastBatch, usize) {
    let t = idx
        .iter()
        .map(|&i| examples[i].inputs.len())
        .max()
        .unwrap_or(1);
    let b = idx.len();
    let mut ids = vec![0u32; b * t];
    let mut targets = Vec::new();
    let mut chars = 0;
    for (r, &i) in idx.iter().enumerate() {
        let e = &examples[i];
        ids[r * t..r * t + e.inputs.len()].copy_from_slice(&e.inputs);
        for p in e.loss_from..e.inputs.len() {
            targets.push(((r * t + p) as u32, e.targets[p]));
        }
        chars += e.inputs.len() + 1;
    }
    (FastBatch { b, t, ids, targets }, chars)
}

/// One batch of (prompt, completion) token pairs as the fast path takes it (prompt-masked,
/// right-padded, the same rows as [`loss_and_grads`] uses).
pub fn fast_batch(model_cfg: &TinyGptConfig, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<FastBatch> {
    let (examples, _) = build_examples(pairs, model_cfg.block, model_cfg.vocab)?;
    let idx: Vec<usize> = (0..examples.len()).collect();
    Ok(make_fast_batch(&examples, &idx).0)
}

/// Mean masked next-token loss of a batch, with the graph attached.
fn batch_loss(model: &TinyGpt, batch: &Batch) -> Result<Tensor> {
    let hidden = model.forward_hidden_train(&batch.ids)?;
    let h = hidden.index_select(&batch.sel, 0)?;
    let logits = model.head_train(&h)?;
    let logp = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
    let picked = logp.gather(&batch.tgt, 1)?;
    Ok((picked.sum_all()?.neg()? / batch.n_loss as f64)?)
}

/// Loss and gradients of one batch of (prompt, completion) token pairs, without updating anything.
/// Used by the gradient-flow test and benchmarks.
pub fn loss_and_grads(
    model: &TinyGpt,
    pairs: &[(Vec<u32>, Vec<u32>)],
) -> Result<(f32, candle_core::backprop::GradStore)> {
    let (examples, _) = build_examples(pairs, model.config().block, model.config().vocab)?;
    let idx: Vec<usize> = (0..examples.len()).collect();
    let batch = make_batch(model, &examples, &idx)?;
    let loss = batch_loss(model, &batch)?;
    let grads = loss.backward()?;
    Ok((loss.to_scalar::<f32>()?, grads))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CheckpointState {
    format: u32,
    step: usize,
    total_steps: usize,
    weights_file: String,
    model: TinyGptConfig,
    epochs: usize,
    batch_size: usize,
    seed: u64,
    data_fingerprint: String,
    epoch_loss_sum: f64,
    epoch_loss_tokens: usize,
    last_step_loss: f64,
}

const CHECKPOINT_JSON: &str = "checkpoint.json";

fn fnv1a(pairs: &[(Vec<u32>, Vec<u32>)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: u32| {
        for b in x.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (p, c) in pairs {
        eat(p.len() as u32);
        p.iter().for_each(|&x| eat(x));
        eat(c.len() as u32);
        c.iter().for_each(|&x| eat(x));
    }
    format!("{h:016x}")
}

fn write_checkpoint(
    dir: &Path,
    model: &TinyGpt,
    opt_state: HashMap<String, Tensor>,
    state: &CheckpointState,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| LmError::io(dir, e))?;
    let mut tensors = model.named_tensors();
    for (k, v) in opt_state {
        tensors.insert(format!("opt.{k}"), v);
    }
    let wpath = dir.join(&state.weights_file);
    io::atomic_write_with(&wpath, |tmp| {
        candle_core::safetensors::save(&tensors, tmp).map_err(LmError::from)
    })?;
    io::atomic_write_json(&dir.join(CHECKPOINT_JSON), state)?;
    // the json now names the new weights: older weight files are garbage
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("ckpt-")
                && name.ends_with(".safetensors")
                && name != state.weights_file
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Read the state of a checkpoint directory, if it has one.
fn read_checkpoint(dir: &Path) -> Result<Option<CheckpointState>> {
    let p = dir.join(CHECKPOINT_JSON);
    if !p.exists() {
        return Ok(None);
    }
    let st: CheckpointState = io::read_json(&p)?;
    if st.format != 1 {
        return Err(LmError::Config(format!(
            "{}: unsupported checkpoint format {}",
            p.display(),
            st.format
        )));
    }
    Ok(Some(st))
}

/// Train on text pairs: each prompt and completion is encoded with `codec`. The completion
/// should end with the end-of-completion character (`\n`) so generation learns to stop.
pub fn fit_pairs(
    model: &mut TinyGpt,
    codec: &dyn Codec,
    pairs: &[(String, String)],
    cfg: &TrainConfig,
    progress: Progress,
) -> Result<TrainReport> {
    if codec.vocab_size() != model.config().vocab {
        return Err(LmError::Config(format!(
            "codec vocabulary ({}) differs from the model's ({})",
            codec.vocab_size(),
            model.config().vocab
        )));
    }
    let ids: Vec<(Vec<u32>, Vec<u32>)> = pairs
        .iter()
        .map(|(p, c)| (codec.encode(p), codec.encode(c)))
        .collect();
    fit_token_pairs(model, &ids, cfg, progress)
}

/// Train on already-encoded (prompt, completion) pairs. See [`fit_pairs`].
pub fn fit_token_pairs(
    model: &mut TinyGpt,
    pairs: &[(Vec<u32>, Vec<u32>)],
    cfg: &TrainConfig,
    progress: Progress,
) -> Result<TrainReport> {
    cfg.validate()?;
    let (examples, truncated) = build_examples(pairs, model.config().block, model.config().vocab)?;
    let spe = steps_per_epoch(examples.len(), cfg);
    let total = spe * cfg.epochs;
    let end = cfg.stop_after.map_or(total, |s| s.min(total));
    let fingerprint = fnv1a(pairs);
    let adam = AdamWParams {
        lr: cfg.lr,
        beta1: cfg.beta1,
        beta2: cfg.beta2,
        eps: cfg.eps,
        weight_decay: cfg.weight_decay,
    };
    let mut resume_opt = None;

    let mut start = 0usize;
    let mut epoch_loss_sum = 0f64;
    let mut epoch_loss_tokens = 0usize;
    let mut last_step_loss = f64::NAN;
    let mut resumed_from = None;
    if let Some(ck) = cfg.checkpoint.as_ref().filter(|c| c.resume) {
        if let Some(st) = read_checkpoint(&ck.dir)? {
            let where_ = ck.dir.join(CHECKPOINT_JSON);
            let mismatch = |what: &str| {
                Err(LmError::Config(format!(
                    "{}: checkpoint was made with a different {what}; refusing to resume",
                    where_.display()
                )))
            };
            if &st.model != model.config() {
                return mismatch("model config");
            }
            if st.epochs != cfg.epochs || st.batch_size != cfg.batch_size || st.seed != cfg.seed {
                return mismatch("epochs / batch_size / seed");
            }
            if st.data_fingerprint != fingerprint {
                return mismatch("training set");
            }
            let wpath = ck.dir.join(&st.weights_file);
            let tensors = candle_core::safetensors::load(&wpath, model.device()).map_err(|e| {
                LmError::Weights {
                    path: wpath.clone(),
                    reason: e.to_string(),
                }
            })?;
            model.set_weights(&tensors, &wpath)?;
            let opt_t = tensors
                .iter()
                .filter_map(|(k, v)| k.strip_prefix("opt.").map(|k| (k.to_string(), v.clone())))
                .collect();
            resume_opt = Some((opt_t, st.step));
            start = st.step;
            epoch_loss_sum = st.epoch_loss_sum;
            epoch_loss_tokens = st.epoch_loss_tokens;
            last_step_loss = st.last_step_loss;
            resumed_from = Some(st.step);
        }
    }

    let mut opt = Stepper::new(model, cfg.engine, adam)?;
    if let Some((opt_t, step_t)) = &resume_opt {
        opt.load_state(opt_t, *step_t)?;
    }

    let plain_log =
        matches!(progress, Progress::Bar) && !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = match progress {
        Progress::Bar => {
            let pb = ProgressBar::new(total as u64);
            pb.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} steps  {msg}  ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=>-"),
            );
            pb.set_position(start as u64);
            pb
        }
        Progress::Hidden => ProgressBar::hidden(),
    };

    let t0 = Instant::now();
    let mut chars = 0usize;
    let mut step = start;
    let mut last_epoch_mean = if epoch_loss_tokens > 0 {
        epoch_loss_sum / epoch_loss_tokens as f64
    } else {
        f64::NAN
    };
    let save = |step: usize, opt: &Stepper, els: f64, elt: usize, lsl: f64| -> Result<()> {
        if let Some(ck) = &cfg.checkpoint {
            let st = CheckpointState {
                format: 1,
                step,
                total_steps: total,
                weights_file: format!("ckpt-{step:08}.safetensors"),
                model: model_cfg_clone(model),
                epochs: cfg.epochs,
                batch_size: cfg.batch_size,
                seed: cfg.seed,
                data_fingerprint: fingerprint.clone(),
                epoch_loss_sum: els,
                epoch_loss_tokens: elt,
                last_step_loss: lsl,
            };
            opt.sync(model)?;
            write_checkpoint(&ck.dir, model, opt.state_tensors()?, &st)?;
        }
        Ok(())
    };
    let mut cur_epoch_batches: Option<(usize, Vec<Vec<usize>>)> = None;
    while step < end {
        let epoch = step / spe;
        let in_epoch = step % spe;
        if cur_epoch_batches.as_ref().map(|(e, _)| *e) != Some(epoch) {
            cur_epoch_batches = Some((epoch, epoch_batches(&examples, cfg, epoch)));
        }
        let batches = &cur_epoch_batches.as_ref().expect("set above").1;
        let (l, n_loss, batch_chars) = opt.step(
            model,
            &examples,
            &batches[in_epoch],
            cfg.lr_at(step, total),
            cfg.grad_clip,
        )?;
        if !l.is_finite() {
            opt.sync(model)?;
            return Err(LmError::Data(format!("loss became {l} at step {step}")));
        }
        last_step_loss = l;
        epoch_loss_sum += l * n_loss as f64;
        epoch_loss_tokens += n_loss;
        chars += batch_chars;
        step += 1;
        let done_epoch = step.is_multiple_of(spe);
        if done_epoch {
            last_epoch_mean = epoch_loss_sum / epoch_loss_tokens.max(1) as f64;
            epoch_loss_sum = 0.0;
            epoch_loss_tokens = 0;
        }
        let secs = t0.elapsed().as_secs_f64();
        // Logs and CI have no terminal for the bar: print a line every 5% instead.
        if plain_log && (step - start).is_multiple_of((total / 20).max(1)) {
            eprintln!(
                "step {step}/{total} epoch {}/{} loss {l:.4} | {:.0} tok/s | {secs:.0}s",
                epoch + 1,
                cfg.epochs,
                chars as f64 / secs.max(1e-9)
            );
        }
        bar.set_position(step as u64);
        bar.set_message(format!(
            "epoch {}/{} loss {:.4} | {:.0} tok/s",
            epoch + 1,
            cfg.epochs,
            l,
            chars as f64 / secs.max(1e-9)
        ));
        if let Some(ck) = &cfg.checkpoint {
            if ck.every_steps > 0 && step.is_multiple_of(ck.every_steps) && step < end {
                save(
                    step,
                    &opt,
                    epoch_loss_sum,
                    epoch_loss_tokens,
                    last_step_loss,
                )?;
            }
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    opt.sync(model)?;
    if step > start || resumed_from.is_none() {
        save(
            step,
            &opt,
            epoch_loss_sum,
            epoch_loss_tokens,
            last_step_loss,
        )?;
    }
    bar.finish_and_clear();
    let final_loss = if epoch_loss_tokens > 0 {
        epoch_loss_sum / epoch_loss_tokens as f64
    } else {
        last_epoch_mean
    };
    Ok(TrainReport {
        final_loss,
        last_step_loss,
        tokens_per_sec: chars as f64 / seconds.max(1e-9),
        steps: step,
        total_steps: total,
        steps_this_run: step - start,
        seconds,
        resumed_from,
        truncated_pairs: truncated,
    })
}

fn model_cfg_clone(m: &TinyGpt) -> TinyGptConfig {
    m.config().clone()
}

/// The optimizer loop's engine: the fast path owns a copy of the weights while training (synced
/// back into the model for checkpoints and at the end), the reference updates the model's
/// variables in place.
enum Stepper {
    Fast(Box<FastTrainer>, AdamWParams),
    Reference(AdamW),
}

impl Stepper {
    fn new(model: &TinyGpt, engine: TrainEngine, adam: AdamWParams) -> Result<Self> {
        Ok(match engine {
            TrainEngine::Auto if FastTrainer::supports(model) => {
                Stepper::Fast(Box::new(FastTrainer::from_model(model)?), adam)
            }
            _ => Stepper::Reference(AdamW::new(model.vars(), adam)?),
        })
    }

    fn load_state(&mut self, t: &HashMap<String, Tensor>, step_t: usize) -> Result<()> {
        match self {
            Stepper::Fast(f, _) => f.load_opt_state(t, step_t),
            Stepper::Reference(o) => o.load_state(t, step_t),
        }
    }

    fn state_tensors(&self) -> Result<HashMap<String, Tensor>> {
        match self {
            Stepper::Fast(f, _) => f.opt_state_tensors(),
            Stepper::Reference(o) => Ok(o.state_tensors()),
        }
    }

    /// Make the model's variables hold the current weights.
    fn sync(&self, model: &TinyGpt) -> Result<()> {
        match self {
            Stepper::Fast(f, _) => f.write_to(model),
            Stepper::Reference(_) => Ok(()),
        }
    }

    /// One optimizer step on a batch; returns (loss, loss tokens, sequence characters).
    fn step(
        &mut self,
        model: &TinyGpt,
        examples: &[Example],
        idx: &[usize],
        lr: f64,
        clip: f64,
    ) -> Result<(f64, usize, usize)> {
        match self {
            Stepper::Fast(f, adam) => {
                let (batch, chars) = make_fast_batch(examples, idx);
                let n_loss = batch.targets.len();
                let l = f.loss_and_grads(&batch)? as f64;
                if l.is_finite() {
                    if clip > 0.0 {
                        f.clip_grad_norm(clip);
                    }
                    adam.lr = lr;
                    f.adamw_step(adam);
                }
                Ok((l, n_loss, chars))
            }
            Stepper::Reference(opt) => {
                let batch = make_batch(model, examples, idx)?;
                let loss = batch_loss(model, &batch)?;
                let mut grads = loss.backward()?;
                if clip > 0.0 {
                    clip_grad_norm(model.vars(), &mut grads, clip)?;
                }
                opt.set_lr(lr);
                opt.step(&grads)?;
                Ok((loss.to_scalar::<f32>()? as f64, batch.n_loss, batch.chars))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays() {
        let cfg = TrainConfig {
            lr: 1.0,
            warmup_frac: 0.1,
            min_lr_ratio: 0.1,
            ..TrainConfig::default()
        };
        assert!((cfg.lr_at(0, 100) - 0.1).abs() < 1e-12);
        assert!((cfg.lr_at(9, 100) - 1.0).abs() < 1e-12);
        assert!((cfg.lr_at(10, 100) - 1.0).abs() < 1e-12);
        assert!(cfg.lr_at(50, 100) < 1.0 && cfg.lr_at(50, 100) > 0.1);
        assert!((cfg.lr_at(100, 100) - 0.1).abs() < 1e-9);
    }

    #[test]
    fn examples_mask_prompt_and_truncate_left() {
        let pairs = vec![(vec![5, 6, 7], vec![8, 2]), (vec![3], vec![])];
        let (ex, tr) = build_examples(&pairs, 16, 10).unwrap();
        assert_eq!(ex.len(), 1);
        assert_eq!(tr, 0);
        assert_eq!(ex[0].inputs, vec![5, 6, 7, 8]);
        assert_eq!(ex[0].targets, vec![6, 7, 8, 2]);
        // targets 8 and 2 (positions 2 and 3) carry loss
        assert_eq!(ex[0].loss_from, 2);
        let (ex, tr) = build_examples(&pairs, 3, 10).unwrap();
        assert_eq!(tr, 1);
        assert_eq!(ex[0].inputs, vec![6, 7, 8]);
        assert_eq!(ex[0].loss_from, 1);
        assert!(build_examples(&[(vec![1], vec![12])], 8, 10).is_err());
    }

    #[test]
    fn batches_cover_every_example_once_per_epoch() {
        let ex: Vec<Example> = (0..70)
            .map(|i| Example {
                inputs: vec![2; 1 + i % 7],
                targets: vec![2; 1 + i % 7],
                loss_from: 0,
            })
            .collect();
        let cfg = TrainConfig {
            batch_size: 8,
            ..TrainConfig::default()
        };
        let b = epoch_batches(&ex, &cfg, 3);
        assert_eq!(b.len(), steps_per_epoch(70, &cfg));
        let mut all: Vec<usize> = b.concat();
        all.sort();
        assert_eq!(all, (0..70).collect::<Vec<_>>());
        assert_eq!(b, epoch_batches(&ex, &cfg, 3));
        assert_ne!(b, epoch_batches(&ex, &cfg, 4));
    }
}
