//! LoRA tuning of a pretrained planner from traces: each trace becomes the model's own chat
//! prompt (tools in the system message, exactly as the planner prompts at run time) followed by
//! the JSON array of calls and the end-of-turn token; only the reply carries loss. The adapter
//! is saved in PEFT layout inside the planner directory, which then plans like any other.

use std::path::{Path, PathBuf};
use std::time::Instant;

use plansmith_core::{Catalog, Syntax, Trace};
use plansmith_llama::{GgufBundle, LoraConfig, LoraTarget, LoraTrainer};
use serde::{Deserialize, Serialize};

use crate::backend::ModelBackend;
use crate::error::PlannerError;
use crate::planner::Planner;
use crate::prompt;
use crate::settings::PlannerSettings;
use crate::train::{calibrate_and_test, trace_catalog, Splits};

/// What to tune and how long.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoraSpec {
    /// The base model (GGUF file or Hugging Face directory).
    pub base: PathBuf,
    pub rank: usize,
    pub alpha: f64,
    pub targets: Vec<LoraTarget>,
    /// Optimizer steps (one example each).
    pub steps: usize,
    pub lr: f64,
    pub seed: u64,
    /// Examples longer than this (prompt + reply, in tokens) are skipped.
    pub max_tokens: usize,
    /// Precision the floor must reach on the calibration split.
    pub target_precision: f64,
}

/// How the run went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoraReport {
    pub steps: usize,
    pub examples: usize,
    pub skipped_too_long: usize,
    /// Mean loss of the first and last tenth of the steps.
    pub first_loss: f32,
    pub final_loss: f32,
    pub seconds: f64,
    pub tokens_per_sec: f64,
}

/// Token ids of one example and where its reply starts.
struct Example {
    ids: Vec<u32>,
    prompt_len: usize,
}

fn examples(
    bundle: &GgufBundle,
    traces: &[Trace],
    catalog: &Catalog,
    eos: u32,
    max_tokens: usize,
) -> Result<(Vec<Example>, usize), PlannerError> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, t) in traces.iter().enumerate() {
        let cat = trace_catalog(t, i, catalog)?;
        let cat = cat.as_ref();
        let request = prompt::clean_request(&t.request);
        let p = bundle
            .template
            .tools_prompt(None, &cat.to_openai(), &request)?;
        let mut ids = bundle.tokenizer.encode(&p.full, true, true);
        let prompt_len = ids.len();
        let plan = plansmith_core::validate::schema_order(&t.plan(), cat);
        ids.extend(
            bundle
                .tokenizer
                .encode(&Syntax::JsonArray.render(&plan), false, false),
        );
        ids.push(eos);
        if ids.len() > max_tokens {
            skipped += 1;
            continue;
        }
        out.push(Example { ids, prompt_len });
    }
    Ok((out, skipped))
}

/// Tune a LoRA adapter on `splits.train`, save the planner (base reference + adapter) to
/// `out`, fit its floor on calibration and report test metrics. `progress(step, steps, loss)`.
pub fn train_lora(
    splits: &Splits,
    catalog: Catalog,
    spec: &LoraSpec,
    out: &Path,
    mut progress: impl FnMut(usize, usize, f32),
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<(Planner, LoraReport), PlannerError> {
    if spec.steps == 0 || spec.rank == 0 {
        return Err(PlannerError::Data(
            "--steps and --lora-rank must be >= 1".into(),
        ));
    }
    let base = std::path::absolute(&spec.base).unwrap_or_else(|_| spec.base.clone());
    // The backend decides the reply's end token, as it does when planning; no grammar or
    // planner is needed to read it.
    let lm = crate::llama::LlamaLm::load(crate::llama::LlamaSource {
        base: base.clone(),
        adapter: None,
    })?;
    let (bundle, eos) = (lm.bundle.clone(), lm.grammar_eos());
    drop(lm);
    let (data, skipped) = examples(&bundle, &splits.train, &catalog, eos, spec.max_tokens)?;
    if data.is_empty() {
        return Err(PlannerError::Data(format!(
            "no training example fits in {} tokens ({skipped} skipped)",
            spec.max_tokens
        )));
    }
    let lora = LoraConfig {
        r: spec.rank,
        alpha: spec.alpha,
        targets: spec.targets.clone(),
    };
    let mut trainer = LoraTrainer::new(&bundle.model, lora, spec.lr, spec.seed)?;
    let order = shuffled(data.len(), spec.seed);
    let start = Instant::now();
    let mut losses = Vec::with_capacity(spec.steps);
    let mut tokens = 0usize;
    for step in 0..spec.steps {
        let ex = &data[order[step % order.len()]];
        let loss = trainer.train_step(&ex.ids, ex.prompt_len)?;
        tokens += ex.ids.len();
        losses.push(loss);
        progress(step + 1, spec.steps, loss);
    }
    let seconds = start.elapsed().as_secs_f64();
    let tenth = (spec.steps / 10).max(1);
    let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len().max(1) as f32;
    let report = LoraReport {
        steps: spec.steps,
        examples: data.len(),
        skipped_too_long: skipped,
        first_loss: mean(&losses[..tenth]),
        final_loss: mean(&losses[losses.len() - tenth..]),
        seconds,
        tokens_per_sec: tokens as f64 / seconds.max(1e-9),
    };
    let staging = out.with_extension(format!("adapter-tmp-{}", std::process::id()));
    let base_name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    trainer.save_peft(&staging, &base_name)?;
    let mut planner = Planner::pretrained(&base, Some(&staging), catalog, PlannerSettings::chat())?;
    planner.meta.training = serde_json::json!({"lora": spec, "report": report,
        "train_traces": splits.train.len()});
    calibrate_and_test(&mut planner, splits, spec.target_precision, eval_progress)?;
    // Saving copies the adapter into `out/adapter` atomically; the staging copy goes.
    planner.save(out)?;
    let _ = std::fs::remove_dir_all(&staging);
    let planner = Planner::load(out)?;
    Ok((planner, report))
}

/// A seeded permutation (splitmix64-driven Fisher-Yates).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}
