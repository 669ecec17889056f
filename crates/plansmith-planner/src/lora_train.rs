//! LoRA tuning of a pretrained planner from traces: each trace becomes the model's own chat
//! prompt (exactly as the planner prompts at run time: tools in plansmith's system message for
//! the JSON array reply, or in the template's own tools prompt for the `<tool_call>` reply)
//! followed by the calls and the end-of-turn token; only the reply carries loss. Batches run
//! through [`plansmith_llama::LoraEngine`] (examples with one catalog share its prompt prefix),
//! with checkpoints every few steps and on request to stop, so a run can be resumed bit for bit.
//! The adapter is saved in PEFT layout inside the planner directory, which then plans like any
//! other.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use plansmith_core::{Catalog, Syntax, Trace};
use plansmith_llama::{BasePrecision, EngineConfig, Example, GgufBundle, LoraEngine, LoraTarget};
use serde::{Deserialize, Serialize};

use crate::backend::ModelBackend;
use crate::error::PlannerError;
use crate::journal::{self, Journal};
use crate::planner::Planner;
use crate::prompt;
use crate::settings::PlannerSettings;
use crate::train::{calibrate_and_test_journaled, trace_catalog, Splits};

/// What to tune and how long.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoraSpec {
    /// The base model (GGUF file or Hugging Face directory).
    pub base: PathBuf,
    pub rank: usize,
    pub alpha: f64,
    pub dropout: f32,
    pub targets: Vec<LoraTarget>,
    /// Examples per optimizer step.
    pub batch_size: usize,
    /// Optimizer steps (`None`: one pass over the training examples).
    pub steps: Option<usize>,
    pub lr: f64,
    pub seed: u64,
    /// Examples longer than this (prompt + reply, in tokens) are skipped and counted.
    pub max_tokens: usize,
    /// Activation memory a step may keep to skip the backward's recompute.
    #[serde(default = "default_activation_memory")]
    pub activation_memory_bytes: usize,
    /// The frozen base's precision in the step's products (f32 for specs written before it).
    #[serde(default)]
    pub base_precision: BasePrecision,
    /// How the confidence floor is chosen on the calibration split.
    pub floor: crate::guarantee::FloorRule,
    /// The confidence scores the floor may be fitted on; the calibration split chooses among
    /// several ([`calibrate_and_test_choosing`]). Empty: the chat planners' default, `chosen`.
    #[serde(default)]
    pub confidence: Vec<crate::settings::ConfidenceMode>,
    /// Store the adapter's weights in f16 (half the file; a committed planner's adapter must
    /// stay small). The floor is fitted on the stored, rounded weights. Off: f32, as PEFT
    /// writes an adapter trained in f32.
    #[serde(default)]
    pub adapter_f16: bool,
    /// How the prompt lists the tools; the planner keeps it for planning.
    #[serde(default)]
    pub tool_list: plansmith_llama::ToolList,
    /// The reply format taught: the JSON array (plansmith's system message lists the tools)
    /// or the `<tool_call>` tags (the chat template renders the tools itself; Qwen2.5 / Qwen3).
    #[serde(default = "json_array")]
    pub reply_format: Syntax,
    /// Write a checkpoint every this many steps (0: only when stopped).
    pub checkpoint_every: usize,
    /// Where checkpoints go (`checkpoint.safetensors` inside).
    pub checkpoint_dir: PathBuf,
    /// Continue from the checkpoint in `checkpoint_dir`.
    pub resume: bool,
    /// Start from this trained adapter (a planner directory or its `adapter/`) instead of
    /// PEFT's initialization, with a fresh optimizer: a short run teaches a trained planner
    /// something more. Same rank, alpha and targets. Ignored when resuming (the checkpoint
    /// holds the weights). Not recorded: a planner directory names no machine path.
    #[serde(skip)]
    pub init_adapter: Option<PathBuf>,
}

fn json_array() -> Syntax {
    Syntax::JsonArray
}

fn default_activation_memory() -> usize {
    EngineConfig::default().keep_activations_bytes
}

/// How an adapter was prompted in training, kept beside its PEFT files
/// (`plansmith.json`; PEFT ignores it) so that `plan --gguf BASE --lora DIR` prompts it the same
/// way without being told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterPrompt {
    pub reply_format: Syntax,
    pub tool_list: plansmith_llama::ToolList,
}

impl AdapterPrompt {
    pub const FILE: &'static str = "plansmith.json";

    fn save(&self, adapter: &Path) -> Result<(), PlannerError> {
        let path = adapter.join(Self::FILE);
        let text =
            serde_json::to_string_pretty(self).map_err(|e| PlannerError::Data(e.to_string()))?;
        plansmith_core::trace::write_atomic(&path, text.as_bytes()).map_err(|e| {
            PlannerError::Adapter {
                path: path.display().to_string(),
                message: e.to_string(),
            }
        })
    }

    /// The record in adapter directory `adapter`, if it has one (an adapter from elsewhere,
    /// PEFT's own, has none).
    pub fn load(adapter: &Path) -> Result<Option<Self>, PlannerError> {
        let path = adapter.join(Self::FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| PlannerError::Adapter {
                    path: path.display().to_string(),
                    message: format!("not an adapter prompt record: {e}"),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PlannerError::Adapter {
                path: path.display().to_string(),
                message: e.to_string(),
            }),
        }
    }
}

/// How the run went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoraReport {
    pub steps: usize,
    pub batch_size: usize,
    pub examples: usize,
    pub skipped_too_long: usize,
    /// Step the run started from (0 unless resumed).
    pub resumed_at: usize,
    /// Mean loss of the first and last tenth of the steps.
    pub first_loss: f64,
    pub final_loss: f64,
    /// Loss of every step.
    pub losses: Vec<f64>,
    pub seconds: f64,
    /// Example tokens per second, and rows actually run per second (after prefix sharing).
    pub tokens_per_sec: f64,
    pub rows_per_sec: f64,
    /// Peak resident memory of the process (Linux), in bytes.
    pub peak_rss: Option<u64>,
}

/// Progress of a run, after each step.
#[derive(Debug, Clone, Serialize)]
pub struct LoraProgress {
    pub step: usize,
    pub steps: usize,
    pub loss: f64,
    /// Exponential moving average of the loss (0.9).
    pub smoothed_loss: f64,
    pub tokens_per_sec: f64,
    pub peak_rss: Option<u64>,
}

/// Peak resident set size of this process (`VmHWM`), on Linux.
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A run's training examples.
#[derive(Debug, Clone, Default)]
pub struct Examples {
    pub examples: Vec<Example>,
    /// Per example, a hash of its prompt's system message (where the catalog is): examples
    /// with one key share their prompt prefix, which a batch runs once.
    pub prefix_keys: Vec<u64>,
    /// Traces left out for being longer than `max_tokens`.
    pub skipped: usize,
}

/// How a training example is written: the prompt the planner will give, the reply it must
/// learn.
#[derive(Debug, Clone, Copy)]
pub struct ExampleFormat {
    /// [`Syntax::JsonArray`] or [`Syntax::ToolCall`].
    pub reply: Syntax,
    /// How plansmith's system message lists the tools (the JSON array reply only).
    pub tool_list: plansmith_llama::ToolList,
}

/// Token ids of each trace (chat prompt + reply + end token); traces longer than `max_tokens`
/// are skipped and counted, a trace longer than the model's context is an error naming it.
/// The `<tool_call>` reply is written with Python's spacing, as Qwen writes its own calls; the
/// JSON array compactly, as plansmith's system message shows it.
pub fn examples(
    bundle: &GgufBundle,
    traces: &[Trace],
    catalog: &Catalog,
    eos: u32,
    max_tokens: usize,
    format: ExampleFormat,
) -> Result<Examples, PlannerError> {
    use std::hash::{Hash, Hasher};
    let context = bundle.model.config().max_position;
    let mut out = Examples::default();
    for (i, t) in traces.iter().enumerate() {
        let cat = trace_catalog(t, i, catalog)?;
        let cat = cat.as_ref();
        let request = prompt::clean_request(&t.request);
        let (p, reply) = match format.reply {
            Syntax::ToolCall => (
                bundle
                    .template
                    .native_tools_prompt(&cat.to_openai(), &request)?,
                Syntax::ToolCall,
            ),
            _ => (
                bundle.template.tools_prompt_as(
                    None,
                    &cat.to_openai(),
                    &request,
                    format.tool_list,
                )?,
                Syntax::JsonArray,
            ),
        };
        let mut tokens = bundle.tokenizer.encode(&p.full, true, true);
        let prompt_len = tokens.len();
        let plan = plansmith_core::validate::schema_order(&t.plan(), cat);
        let text = match reply {
            Syntax::ToolCall => reply.render_spaced(&plan),
            _ => reply.render(&plan),
        };
        tokens.extend(bundle.tokenizer.encode(&text, false, false));
        tokens.push(eos);
        if tokens.len() > context {
            return Err(PlannerError::Data(format!(
                "training trace {i}: prompt with its catalog ({} tools) and reply take {} tokens, \
                 more than the model's context of {context}",
                cat.tools.len(),
                tokens.len()
            )));
        }
        if tokens.len() > max_tokens {
            out.skipped += 1;
            continue;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        p.prefix.hash(&mut h);
        out.prefix_keys.push(h.finish());
        out.examples.push(Example { tokens, prompt_len });
    }
    Ok(out)
}

/// One epoch's batches of example indices. Examples are grouped by prompt prefix so that a
/// batch's examples share their catalog prompt, which the engine runs once (on the Pace
/// catalog a shared batch runs ~10x fewer rows than an unshared one): each group is shuffled
/// and cut into full batches; the groups' remainders are pooled whole, in a seeded order of
/// groups, and cut the same way, so a batch that must mix catalogs holds as few as it can (a
/// batch of 32 remainders from 32 catalogs runs 32 catalog prompts: measured on the generalist
/// mix, such a step took ~9 minutes where a one-catalog step took 16 s); then the batches are
/// shuffled. A data set with one catalog is simply shuffled and cut.
/// There are `ceil(n / batch)` batches, as with a plain shuffle. Seeded, so a resumed run
/// sees the same batches.
fn epoch_batches(keys: &[u64], batch: usize, seed: u64) -> Vec<Vec<usize>> {
    let batch = batch.max(1);
    let mut groups: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, &k) in keys.iter().enumerate() {
        groups.entry(k).or_default().push(i);
    }
    let mut batches = Vec::with_capacity(keys.len().div_ceil(batch));
    let mut remainders: Vec<Vec<usize>> = Vec::new();
    for (key, members) in groups {
        let order = shuffled(members.len(), seed ^ key);
        let members: Vec<usize> = order.into_iter().map(|j| members[j]).collect();
        let full = members.len() / batch * batch;
        batches.extend(members[..full].chunks(batch).map(<[usize]>::to_vec));
        if full < members.len() {
            remainders.push(members[full..].to_vec());
        }
    }
    let order = shuffled(remainders.len(), seed ^ 0x5EED_0F90);
    let pool: Vec<usize> = order
        .into_iter()
        .flat_map(|j| remainders[j].iter().copied())
        .collect();
    batches.extend(pool.chunks(batch).map(<[usize]>::to_vec));
    let order = shuffled(batches.len(), seed ^ 0x0BA7_C4E5);
    let mut slots: Vec<Option<Vec<usize>>> = batches.into_iter().map(Some).collect();
    order.into_iter().filter_map(|j| slots[j].take()).collect()
}

/// A fingerprint of the examples in order (a resumed run must see the same data).
fn data_fingerprint(data: &[Example]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in data {
        e.tokens.hash(&mut h);
        e.prompt_len.hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// State a checkpoint carries besides the engine's.
#[derive(Debug, Serialize, Deserialize)]
struct RunState {
    data: String,
    losses: Vec<f64>,
    rows: usize,
    tokens: usize,
    seconds: f64,
}

/// Tune a LoRA adapter on `splits.train`, save the planner (base reference + adapter) to
/// `out`, fit its floor on calibration and report test metrics. When `stop` turns true the run
/// writes a checkpoint and returns [`PlannerError::Interrupted`].
pub fn train_lora(
    splits: &Splits,
    catalog: Catalog,
    spec: &LoraSpec,
    out: &Path,
    stop: &AtomicBool,
    mut progress: impl FnMut(&LoraProgress),
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<(Planner, LoraReport), PlannerError> {
    if spec.rank == 0 || spec.batch_size == 0 || spec.steps == Some(0) {
        return Err(PlannerError::Data(
            "--lora-rank, --batch-size and --steps must be >= 1".into(),
        ));
    }
    if !matches!(spec.reply_format, Syntax::JsonArray | Syntax::ToolCall) {
        return Err(PlannerError::Data(format!(
            "a LoRA planner replies in json or tool_call, not {}",
            spec.reply_format
        )));
    }
    let base = std::path::absolute(&spec.base).unwrap_or_else(|_| spec.base.clone());
    // The backend decides the reply's end token, as it does when planning.
    let lm = crate::llama::LlamaLm::load(crate::llama::LlamaSource {
        base: base.clone(),
        adapter: None,
    })?;
    let (bundle, eos) = (lm.bundle.clone(), lm.grammar_eos());
    if spec.reply_format == Syntax::ToolCall && !bundle.template.has_tool_call_tags() {
        return Err(PlannerError::Data(format!(
            "{}: the tool_call reply format needs a chat template that renders tools with \
             <tool_call> tags (Qwen2.5, Qwen3); this model's does not — train the json format",
            base.display()
        )));
    }
    drop(lm);
    let Examples {
        examples: data,
        prefix_keys,
        skipped,
    } = examples(
        &bundle,
        &splits.train,
        &catalog,
        eos,
        spec.max_tokens,
        ExampleFormat {
            reply: spec.reply_format,
            tool_list: spec.tool_list,
        },
    )?;
    if data.is_empty() {
        return Err(PlannerError::Data(format!(
            "no training example fits in {} tokens ({skipped} skipped)",
            spec.max_tokens
        )));
    }
    let per_epoch = data.len().div_ceil(spec.batch_size);
    let steps = spec.steps.unwrap_or(per_epoch);
    let config = EngineConfig {
        rank: spec.rank,
        alpha: spec.alpha,
        dropout: spec.dropout,
        targets: spec.targets.clone(),
        seed: spec.seed,
        lr: spec.lr,
        warmup_steps: (steps / 20).max(1).min(steps),
        total_steps: steps,
        keep_activations_bytes: spec.activation_memory_bytes,
        base_precision: spec.base_precision,
        ..EngineConfig::default()
    };
    let mut engine = LoraEngine::new(&bundle.model, config)?;
    if let (Some(dir), false) = (&spec.init_adapter, spec.resume) {
        start_from_adapter(&mut engine, dir, spec, bundle.model.config())?;
    }
    let ckpt = spec.checkpoint_dir.join("checkpoint.safetensors");
    let fingerprint = data_fingerprint(&data);
    let mut state = RunState {
        data: fingerprint.clone(),
        losses: Vec::new(),
        rows: 0,
        tokens: 0,
        seconds: 0.0,
    };
    if spec.resume {
        let extra = engine.resume(&ckpt)?;
        state = serde_json::from_value(extra)
            .map_err(|e| PlannerError::Data(format!("{}: run state: {e}", ckpt.display())))?;
        if state.data != fingerprint {
            return Err(PlannerError::Data(format!(
                "{}: the checkpoint was trained on other examples; resume with the same \
                 --data, --tools, --seed and --max-tokens",
                ckpt.display()
            )));
        }
    }
    let resumed_at = engine.steps_done() as usize;
    let save = |engine: &LoraEngine, state: &RunState| -> Result<(), PlannerError> {
        let extra = serde_json::to_value(state).map_err(|e| PlannerError::Data(e.to_string()))?;
        Ok(engine.save_checkpoint(&ckpt, &extra)?)
    };
    let start = Instant::now();
    let seconds_before = state.seconds;
    let mut smoothed = state.losses.last().copied().unwrap_or(f64::NAN);
    let mut batches: Option<(usize, Vec<Vec<usize>>)> = None;
    for step in resumed_at..steps {
        // Epoch e's batches are seeded by (seed, e).
        let epoch = step / per_epoch;
        if batches.as_ref().is_none_or(|(e, _)| *e != epoch) {
            let seed = spec.seed ^ (epoch as u64).wrapping_mul(0x9E37);
            batches = Some((epoch, epoch_batches(&prefix_keys, spec.batch_size, seed)));
        }
        let (_, epoch_order) = batches.as_ref().expect("set above");
        let batch: Vec<Example> = epoch_order[step % per_epoch]
            .iter()
            .map(|&i| data[i].clone())
            .collect();
        let stats = engine.step(&batch)?;
        state.losses.push(stats.loss);
        state.rows += stats.rows;
        state.tokens += batch.iter().map(|e| e.tokens.len()).sum::<usize>();
        state.seconds = seconds_before + start.elapsed().as_secs_f64();
        smoothed = if smoothed.is_nan() {
            stats.loss
        } else {
            0.9 * smoothed + 0.1 * stats.loss
        };
        progress(&LoraProgress {
            step: step + 1,
            steps,
            loss: stats.loss,
            smoothed_loss: smoothed,
            tokens_per_sec: state.tokens as f64 / state.seconds.max(1e-9),
            peak_rss: peak_rss(),
        });
        let done = step + 1;
        if stop.load(Ordering::SeqCst) {
            save(&engine, &state)?;
            return Err(PlannerError::Interrupted {
                step: done,
                steps,
                checkpoint: spec.checkpoint_dir.clone(),
            });
        }
        if spec.checkpoint_every > 0 && done % spec.checkpoint_every == 0 && done < steps {
            save(&engine, &state)?;
        }
    }
    let losses = state.losses.clone();
    let tenth = (losses.len() / 10).max(1);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let report = LoraReport {
        steps,
        batch_size: spec.batch_size,
        examples: data.len(),
        skipped_too_long: skipped,
        resumed_at,
        first_loss: mean(&losses[..tenth.min(losses.len())]),
        final_loss: mean(&losses[losses.len().saturating_sub(tenth)..]),
        losses,
        seconds: state.seconds,
        tokens_per_sec: state.tokens as f64 / state.seconds.max(1e-9),
        rows_per_sec: state.rows as f64 / state.seconds.max(1e-9),
        peak_rss: peak_rss(),
    };
    let staging = out.with_extension(format!("adapter-tmp-{}", std::process::id()));
    let base_name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dtype = if spec.adapter_f16 {
        candle_core::DType::F16
    } else {
        candle_core::DType::F32
    };
    engine.save_peft_as(&staging, &base_name, dtype)?;
    drop(engine);
    AdapterPrompt {
        reply_format: spec.reply_format,
        tool_list: spec.tool_list,
    }
    .save(&staging)?;
    let settings = PlannerSettings {
        tool_list: spec.tool_list,
        syntax: spec.reply_format,
        ..PlannerSettings::chat()
    };
    let mut planner = Planner::pretrained(&base, Some(&staging), catalog, settings)?;
    let mut summary = report.clone();
    summary.losses = Vec::new();
    planner.meta.training = serde_json::json!({"lora": spec, "report": summary,
        "train_traces": splits.train.len()});
    // The trained adapter is kept before calibration starts (tens of minutes on a big split):
    // a run stopped there leaves a planner that `calibrate` can finish, not only the staging
    // copy. Until its floor is fitted it accepts nothing, so it never answers uncertified.
    let floor_after = planner.settings.conf_floor;
    planner.set_floor(crate::calibrate::ACCEPTS_NOTHING);
    planner.save(out)?;
    drop(planner);
    // From here the saved copy is the planner's adapter; the staging copy goes.
    let _ = std::fs::remove_dir_all(&staging);
    let mut planner = Planner::load(out)?;
    planner.set_floor(floor_after);
    // Each judged request is journaled in `out`: a run stopped during calibration leaves
    // them for `plansmith calibrate` to go on from (the save below replaces the directory,
    // journal and all, once calibration is done).
    crate::train::prepare_for_calibration(&mut planner);
    let mut journal = Journal::open(&out.join(journal::FILE), &journal::fingerprint(&planner)?)?;
    calibrate_and_test_journaled(
        &mut planner,
        splits,
        spec.floor,
        &spec.confidence,
        Some(&mut journal),
        eval_progress,
    )?;
    drop(journal);
    // Saving over `out` copies its adapter into a fresh directory that replaces it atomically.
    planner.save(out)?;
    let chart = crate::chart::loss_svg(
        &report.losses,
        &format!("LoRA r={} on {base_name}", spec.rank),
    );
    plansmith_core::trace::write_atomic(out.join("loss.svg"), chart.as_bytes()).map_err(|e| {
        PlannerError::Dir {
            path: out.display().to_string(),
            message: format!("cannot write loss.svg: {e}"),
        }
    })?;
    let planner = Planner::load(out)?;
    Ok((planner, report))
}

/// A seeded permutation (splitmix64-driven Fisher-Yates).
/// Load a trained adapter into a fresh engine; its rank, alpha and targets must be the run's
/// (a different scale or a missing projection would silently train another model).
fn start_from_adapter(
    engine: &mut LoraEngine,
    dir: &Path,
    spec: &LoraSpec,
    cfg: &plansmith_llama::LlamaConfig,
) -> Result<(), PlannerError> {
    let adapter_dir = if dir.join("adapter").join("adapter_config.json").is_file() {
        dir.join("adapter")
    } else {
        dir.to_path_buf()
    };
    let named = |e: plansmith_llama::LlamaError| {
        PlannerError::Data(format!("--init-adapter {}: {e}", adapter_dir.display()))
    };
    let adapter = plansmith_llama::lora::PeftAdapter::load(&adapter_dir, cfg).map_err(named)?;
    let mut wanted = spec.targets.clone();
    wanted.sort();
    let mut found = adapter.config.targets.clone();
    found.sort();
    if adapter.config.r != spec.rank
        || (adapter.config.alpha - spec.alpha).abs() > 1e-9
        || found != wanted
    {
        let names = |t: &[LoraTarget]| {
            t.iter()
                .map(|t| t.peft_name().trim_end_matches("_proj"))
                .collect::<Vec<_>>()
                .join(",")
        };
        return Err(PlannerError::Data(format!(
            "--init-adapter {}: the adapter has r={}, alpha {}, targets {}; this run asks for \
             r={}, alpha {}, targets {}: pass --lora-rank {} --lora-alpha {} --lora-targets {}",
            adapter_dir.display(),
            adapter.config.r,
            adapter.config.alpha,
            names(&found),
            spec.rank,
            spec.alpha,
            names(&wanted),
            adapter.config.r,
            adapter.config.alpha,
            names(&found),
        )));
    }
    engine.load_adapter(&adapter).map_err(named)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_prompt_record_round_trips_and_a_bad_one_is_named() {
        let dir =
            std::env::temp_dir().join(format!("plansmith-adapter-prompt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(
            AdapterPrompt::load(&dir).unwrap(),
            None,
            "no record: an adapter from elsewhere"
        );
        let record = AdapterPrompt {
            reply_format: Syntax::ToolCall,
            tool_list: plansmith_llama::ToolList::Json,
        };
        record.save(&dir).unwrap();
        assert_eq!(AdapterPrompt::load(&dir).unwrap(), Some(record));
        std::fs::write(dir.join(AdapterPrompt::FILE), "{\"reply_format\": 3}").unwrap();
        let err = AdapterPrompt::load(&dir).unwrap_err().to_string();
        assert!(err.contains(AdapterPrompt::FILE), "{err}");
        assert!(err.starts_with("adapter directory "), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn batches_keep_a_catalog_together_and_cover_every_example_once() {
        // Three catalogs of 70, 33 and 5 examples, batches of 32.
        let keys: Vec<u64> = (0..108)
            .map(|i| match i % 108 {
                i if i < 70 => 7,
                i if i < 103 => 3,
                _ => 11,
            })
            .collect();
        let batches = epoch_batches(&keys, 32, 1);
        assert_eq!(batches.len(), 108usize.div_ceil(32));
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..108).collect::<Vec<_>>());
        // Every full batch of a group holds one catalog: 2 of the 70, 1 of the 33.
        let single = batches
            .iter()
            .filter(|b| b.len() == 32 && b.iter().all(|&i| keys[i] == keys[b[0]]))
            .count();
        assert!(single >= 3, "{batches:?}");
        // Seeded: the same seed gives the same batches, another epoch's seed others.
        assert_eq!(batches, epoch_batches(&keys, 32, 1));
        assert_ne!(batches, epoch_batches(&keys, 32, 2));
        // One catalog: a plain shuffle cut into batches (the last one short).
        let one = epoch_batches(&[5; 70], 32, 9);
        let mut sizes: Vec<usize> = one.iter().map(Vec::len).collect();
        sizes.sort();
        assert_eq!(sizes, vec![6, 32, 32]);
        assert!(epoch_batches(&[], 32, 0).is_empty());
    }

    #[test]
    fn remainders_stay_together_so_a_mixed_batch_holds_few_catalogs() {
        // Forty catalogs of 37 examples: 40 full batches and 40 remainders of 5, pooled into
        // 7 batches (the last short). Shuffled one by one they would put ~20 catalogs in each
        // mixed batch; whole, a remainder lands in at most two batches and a batch holds at
        // most 8 catalogs (ceil(32 / 5) + 1).
        let keys: Vec<u64> = (0..40 * 37).map(|i| (i % 40) as u64 * 1_000_003).collect();
        let batches = epoch_batches(&keys, 32, 4);
        assert_eq!(batches.len(), keys.len().div_ceil(32));
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..keys.len()).collect::<Vec<_>>());
        let catalogs = |b: &Vec<usize>| {
            b.iter()
                .map(|&i| keys[i])
                .collect::<std::collections::BTreeSet<_>>()
        };
        let mixed: Vec<&Vec<usize>> = batches.iter().filter(|b| catalogs(b).len() > 1).collect();
        assert_eq!(mixed.len(), 7, "{mixed:?}");
        assert!(mixed.iter().all(|b| catalogs(b).len() <= 8), "{mixed:?}");
        for key in (0..40u64).map(|k| k * 1_000_003) {
            let holding = mixed.iter().filter(|b| catalogs(b).contains(&key)).count();
            assert!(
                (1..=2).contains(&holding),
                "catalog {key} in {holding} batches"
            );
        }
    }
}
