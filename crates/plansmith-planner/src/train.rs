//! Training a planner from traces: split, prompt-masked SFT, floor calibration, test report.

use std::collections::BTreeSet;

use plansmith_core::{Catalog, Trace};
use plansmith_lm::{
    fit_token_pairs, AnyCodec, CharCodec, Codec, DropoutEncoder, PieceCodec, Progress, TinyGpt,
    TinyGptConfig, TrainConfig, TrainReport,
};
use serde::{Deserialize, Serialize};

use crate::calibrate::gate_metrics;
use crate::error::PlannerError;
use crate::eval::{items, judge_trace};
use crate::guarantee::FloorRule;
use crate::journal::{trace_digest, Journal, Verdict};
use crate::planner::Planner;
use crate::prompt;
use crate::settings::{ConfidenceMode, PlannerMeta, PlannerSettings};

const PRINTABLE_ASCII: &str =
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~";

/// Train / calibration / test traces. No request text appears in two splits.
#[derive(Debug, Clone, Default)]
pub struct Splits {
    pub train: Vec<Trace>,
    pub calibration: Vec<Trace>,
    pub test: Vec<Trace>,
}

/// Which split a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Train,
    Calibration,
    Test,
}

/// Split by a hash of the request text, so identical requests always land together and the
/// split is stable across runs and orderings.
pub fn split(traces: Vec<Trace>, calibration_frac: f64, test_frac: f64, seed: u64) -> Splits {
    let mut s = Splits::default();
    for t in traces {
        match part_of(&t.request, calibration_frac, test_frac, seed) {
            Part::Test => s.test.push(t),
            Part::Calibration => s.calibration.push(t),
            Part::Train => s.train.push(t),
        }
    }
    s
}

/// The split [`split`] puts `request` in.
pub fn part_of(request: &str, calibration_frac: f64, test_frac: f64, seed: u64) -> Part {
    let h = fnv(seed, request.as_bytes());
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    if u < test_frac {
        Part::Test
    } else if u < test_frac + calibration_frac {
        Part::Calibration
    } else {
        Part::Train
    }
}

fn fnv(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf29ce484222325u64 ^ seed.wrapping_mul(0x9E3779B97F4A7C15);
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    // Final avalanche so nearby seeds give unrelated splits.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51afd7ed558ccd);
    h ^ (h >> 33)
}

/// (prompt, completion) pairs for SFT. A trace's own `tools` replace the default catalog.
pub fn pairs(
    traces: &[Trace],
    catalog: &Catalog,
    settings: &PlannerSettings,
) -> Result<Vec<(String, String)>, PlannerError> {
    traces
        .iter()
        .enumerate()
        .map(|(i, t)| pair(t, i, catalog, settings))
        .collect()
}

/// The (prompt, completion) pair of trace `index` (0-based, for error messages).
pub fn pair(
    trace: &Trace,
    index: usize,
    catalog: &Catalog,
    settings: &PlannerSettings,
) -> Result<(String, String), PlannerError> {
    let cat = trace_catalog(trace, index, catalog)?;
    let text = prompt::CatalogText::of(settings);
    // A pointer planner sees each example's catalog in its own order, so a pointer is a
    // place in this prompt's list, never a tool.
    let cat = if text == prompt::CatalogText::Pointers {
        std::borrow::Cow::Owned(crate::pointers::shuffled(
            &cat,
            fnv(index as u64, trace.request.as_bytes()),
        ))
    } else {
        cat
    };
    let cat = cat.as_ref();
    let mut plan = plansmith_core::validate::schema_order(&trace.plan(), cat);
    if text == prompt::CatalogText::Pointers {
        plan = crate::pointers::to_pointers(&plan, cat);
    }
    let mut completion = settings.syntax.render(&plan);
    if !completion.ends_with('\n') {
        completion.push('\n');
    }
    Ok((prompt::render(cat, text, &trace.request), completion))
}

/// The catalog trace `index` (0-based) plans against: its own `tools`, else `default`.
pub fn trace_catalog<'a>(
    trace: &Trace,
    index: usize,
    default: &'a Catalog,
) -> Result<std::borrow::Cow<'a, Catalog>, PlannerError> {
    match &trace.tools {
        Some(v) => Catalog::from_value(v)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| PlannerError::Data(format!("trace {}: tools: {e}", index + 1))),
        None => Ok(std::borrow::Cow::Borrowed(default)),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainSpec {
    pub model: TinyGptConfig,
    pub codec: CodecChoice,
    pub train: TrainConfig,
    pub settings: PlannerSettings,
    /// How the confidence floor is chosen on the calibration split.
    pub floor: FloorRule,
    /// Piece codec only: each training example is encoded with this merge-dropout rate
    /// ([`plansmith_lm::piece::DropoutEncoder`]); 0 encodes canonically.
    #[serde(default)]
    pub piece_dropout: f64,
    /// More confidence scores the calibration split may choose among, besides
    /// `settings.confidence` ([`calibrate_and_test_choosing`]); empty: that one only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_confidence: Vec<ConfidenceMode>,
}

/// Examples a default training run shows the model, counting repeats: the embedded planner's
/// first pass saw ~435,000 (one epoch) and reached 0.98 on Pace test requests.
pub const AUTO_EXAMPLES_SEEN: usize = 300_000;

/// Epochs when none are given (`epochs: 0`): enough passes to show the model about
/// [`AUTO_EXAMPLES_SEEN`] examples, at least 1 and at most 30 (mixle's default; on its own
/// 180-request fixture 30 passes are right on 200 of 200 fresh requests, 12 on 179).
pub fn auto_epochs(n_examples: usize) -> usize {
    let n = n_examples.max(1);
    ((AUTO_EXAMPLES_SEEN + n / 2) / n).clamp(1, 30)
}

/// Context length when none is given (`block: 0`): the longest training example plus a
/// quarter for longer requests at run time, in multiples of 64, at least 192.
pub fn fitted_block(longest: usize) -> usize {
    (longest + longest / 4).next_multiple_of(64).max(192)
}

/// The vocabulary a new tiny planner learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CodecChoice {
    /// One id per character (mixle's codec).
    Char,
    /// Sub-word pieces learned from the training pairs, up to `vocab` ids. A piece occurs at
    /// least 8 times in the corpus, so rare names are spelt from smaller pieces.
    Piece { vocab: usize },
}

impl Default for CodecChoice {
    fn default() -> Self {
        CodecChoice::Piece { vocab: 1024 }
    }
}

impl CodecChoice {
    fn learn(self, train_pairs: &[(String, String)]) -> AnyCodec {
        // Printable ASCII is always in the vocabulary: requests and grammars may need
        // characters (like the DSL's `|`) that the training data happens not to contain.
        let texts = train_pairs
            .iter()
            .flat_map(|(p, c)| [p.as_str(), c.as_str()])
            .chain([PRINTABLE_ASCII]);
        match self {
            CodecChoice::Char => AnyCodec::Char(CharCodec::from_corpus(texts)),
            CodecChoice::Piece { vocab } => AnyCodec::Piece(PieceCodec::learn(texts, vocab, 8)),
        }
    }
}

pub struct Trained {
    pub planner: Planner,
    pub report: TrainReport,
}

/// Train a planner end to end. `progress` shows the SFT bar; evaluation reports via `eval_progress`.
pub fn train_planner(
    splits: &Splits,
    catalog: Catalog,
    spec: &TrainSpec,
    progress: Progress,
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<Trained, PlannerError> {
    train_planner_from(splits, catalog, spec, None, progress, eval_progress)
}

/// Like [`train_planner`], continuing from `init`'s weights and codec (its model shape wins).
pub fn train_planner_from(
    splits: &Splits,
    catalog: Catalog,
    spec: &TrainSpec,
    init: Option<Planner>,
    progress: Progress,
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<Trained, PlannerError> {
    let train_pairs = pairs(&splits.train, &catalog, &spec.settings)?;
    train_planner_on_pairs(
        train_pairs,
        splits,
        catalog,
        spec,
        init,
        progress,
        eval_progress,
    )
}

/// Like [`train_planner_from`], from training pairs already rendered with [`pair`] (a large
/// training set need not be held as traces). `held_out.train` is ignored.
pub fn train_planner_on_pairs(
    train_pairs: Vec<(String, String)>,
    held_out: &Splits,
    catalog: Catalog,
    spec: &TrainSpec,
    init: Option<Planner>,
    progress: Progress,
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<Trained, PlannerError> {
    if train_pairs.is_empty() {
        return Err(PlannerError::Data("no training traces".into()));
    }
    let n_train = train_pairs.len();
    let continued = init.is_some();
    let (codec, init_model) = match init.map(|p| p.lm.into_tiny()) {
        Some(Some((model, codec))) => (codec, Some(model)),
        Some(None) => {
            return Err(PlannerError::Data(
                "--init takes a tiny planner; pretrained models are tuned with LoRA".into(),
            ))
        }
        None => (spec.codec.learn(&train_pairs), None),
    };
    let mut cfg = match &init_model {
        Some(m) => m.config().clone(),
        None => spec.model.clone(),
    };
    cfg.vocab = codec.vocab_size();
    // Encoded once: the block check and training share the ids.
    let ids: Vec<(Vec<u32>, Vec<u32>)> = match &codec {
        _ if spec.piece_dropout == 0.0 => train_pairs
            .iter()
            .map(|(p, c)| (codec.encode(p), codec.encode(c)))
            .collect(),
        AnyCodec::Piece(pieces) => {
            let mut enc =
                DropoutEncoder::new(pieces, spec.piece_dropout, spec.train.seed ^ 0xD509)?;
            train_pairs
                .iter()
                .map(|(p, c)| (enc.encode(p), enc.encode(c)))
                .collect()
        }
        _ => {
            return Err(PlannerError::Data(
                "piece dropout needs a piece codec (--codec piece)".into(),
            ))
        }
    };
    drop(train_pairs);
    let longest = ids
        .iter()
        .map(|(p, c)| p.len() + c.len())
        .max()
        .unwrap_or(0);
    if init_model.is_none() && cfg.block == 0 {
        cfg.block = fitted_block(longest);
    }
    if longest > cfg.block {
        return Err(PlannerError::Data(format!(
            "the longest example has {longest} tokens but the model block is {}: raise --block",
            cfg.block
        )));
    }
    let device = candle_core::Device::Cpu;
    let mut model = match init_model {
        Some(m) => m,
        None => TinyGpt::new(cfg, spec.train.seed, &device)?,
    };
    let mut train_cfg = spec.train.clone();
    if train_cfg.epochs == 0 {
        train_cfg.epochs = auto_epochs(ids.len());
    }
    let report = fit_token_pairs(&mut model, &ids, &train_cfg, progress)?;
    // With --init the model's shape and codec are the initial planner's, not the spec's.
    let model_cfg = model.config().clone();
    let mut planner = Planner::new(
        model,
        codec,
        catalog,
        spec.settings.clone(),
        PlannerMeta::default(),
    )?;
    let meta = PlannerMeta {
        training: serde_json::json!({
            "train_traces": n_train,
            "calibration_traces": held_out.calibration.len(),
            "test_traces": held_out.test.len(),
            "model": model_cfg,
            "codec": if continued { serde_json::json!("from --init") } else { serde_json::json!(spec.codec) },
            "continued_from_init": continued,
            "train": train_cfg,
            "floor_rule": spec.floor,
            "piece_dropout": spec.piece_dropout,
            "final_loss": report.final_loss,
            "seconds": report.seconds,
            "tokens_per_sec": report.tokens_per_sec,
        }),
        ..Default::default()
    };
    planner.meta = meta;
    let mut modes = vec![spec.settings.confidence];
    for &m in &spec.other_confidence {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    calibrate_and_test_choosing(&mut planner, held_out, spec.floor, &modes, eval_progress)?;
    Ok(Trained { planner, report })
}

/// Fit the floor on the calibration split under `rule` and measure the gate on the test split;
/// the fit and both measurements land in the planner's metadata. A guaranteed rule that cannot
/// certify its rate on this split sets a floor no plan reaches: the planner escalates everything.
pub fn calibrate_and_test(
    planner: &mut Planner,
    splits: &Splits,
    rule: FloorRule,
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<(), PlannerError> {
    let mode = planner.settings.confidence;
    calibrate_and_test_choosing(planner, splits, rule, &[mode], eval_progress)
}

/// [`calibrate_and_test`], choosing the confidence score among `modes` on the calibration
/// split: each gets its own floor and the one whose floor accepts the most plans is kept
/// (delta shared among them, [`crate::guarantee::fit_best`]). One decode serves every mode.
/// Without calibration traces (and an empirical rule) the planner keeps its mode and floor.
pub fn calibrate_and_test_choosing(
    planner: &mut Planner,
    splits: &Splits,
    rule: FloorRule,
    modes: &[ConfidenceMode],
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<(), PlannerError> {
    calibrate_and_test_journaled(planner, splits, rule, modes, None, eval_progress)
}

/// [`calibrate_and_test_choosing`], with every judged request appended to `journal` as it is
/// judged and every request the journal already holds taken from it instead of decoded: a
/// stopped calibration resumes ([`crate::journal`]). The journal must have been opened with
/// this planner's fingerprint *after* any setting changed here (`end_scored`), which
/// [`prepare_for_calibration`] does first.
pub fn calibrate_and_test_journaled(
    planner: &mut Planner,
    splits: &Splits,
    rule: FloorRule,
    modes: &[ConfidenceMode],
    mut journal: Option<&mut Journal>,
    mut eval_progress: impl FnMut(&str, usize, usize),
) -> Result<(), PlannerError> {
    // A guarantee with no calibration data certifies nothing, and says so; the empirical rule
    // with none leaves the planner's floor as it was.
    let guaranteed = matches!(rule, FloorRule::Guaranteed { .. });
    if !splits.calibration.is_empty() || guaranteed {
        prepare_for_calibration(planner);
        let judged = verdicts(
            planner,
            &splits.calibration,
            "calibration",
            journal.as_deref_mut(),
            &mut eval_progress,
        )?;
        let modes = if modes.is_empty() {
            vec![planner.settings.confidence]
        } else {
            modes.to_vec()
        };
        let per_mode: Vec<Vec<_>> = modes
            .iter()
            .map(|&m| judged.iter().map(|v| v.scored(m)).collect())
            .collect();
        let (chosen, fit) = crate::guarantee::fit_best(&per_mode, rule);
        planner.settings.confidence = modes[chosen];
        planner.set_floor(fit.floor);
        planner.meta.calibration = Some(gate_metrics(&per_mode[chosen], fit.floor));
        planner.meta.floor_fit = Some(fit);
    }
    let mode = planner.settings.confidence;
    if !splits.test.is_empty() {
        let judged = verdicts(planner, &splits.test, "test", journal, &mut eval_progress)?;
        let scored: Vec<_> = judged.iter().map(|v| v.scored(mode)).collect();
        planner.meta.test = Some(gate_metrics(&scored, planner.settings.conf_floor));
    }
    Ok(())
}

/// What calibration changes in a planner before it decodes anything: a floor refitted here is
/// fitted on today's scoring, the reply's chosen end included, whatever the planner was
/// calibrated with before.
pub fn prepare_for_calibration(planner: &mut Planner) {
    planner.settings.end_scored = true;
}

/// Each trace judged by `planner` (or taken from the journal, which gains what is judged here).
fn verdicts(
    planner: &Planner,
    traces: &[Trace],
    stage: &str,
    mut journal: Option<&mut Journal>,
    progress: &mut impl FnMut(&str, usize, usize),
) -> Result<Vec<Verdict>, PlannerError> {
    let items = items(traces)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, (trace, item)) in traces.iter().zip(&items).enumerate() {
        let key = journal.as_ref().map(|_| trace_digest(trace));
        let known = match (&journal, &key) {
            (Some(j), Some(k)) => j.get(stage, i, k),
            _ => None,
        };
        let verdict = match known {
            Some(v) => v,
            None => {
                let v = Verdict::of(&judge_trace(planner, item, i)?);
                if let (Some(j), Some(k)) = (journal.as_deref_mut(), &key) {
                    j.record(stage, i, k, v)?;
                }
                v
            }
        };
        out.push(verdict);
        progress(stage, i + 1, items.len());
    }
    Ok(out)
}

/// Requests shared between two splits (should be empty).
pub fn overlap(a: &[Trace], b: &[Trace]) -> usize {
    let set: BTreeSet<&str> = a.iter().map(|t| t.request.as_str()).collect();
    b.iter()
        .filter(|t| set.contains(t.request.as_str()))
        .count()
}

#[cfg(test)]
mod default_tests {
    use super::*;

    #[test]
    fn default_epochs_show_about_300k_examples_within_1_to_30_passes() {
        assert_eq!(auto_epochs(0), 30);
        assert_eq!(auto_epochs(180), 30);
        assert_eq!(auto_epochs(10_000), 30);
        assert_eq!(auto_epochs(60_000), 5);
        assert_eq!(auto_epochs(200_000), 2);
        assert_eq!(auto_epochs(435_000), 1);
        assert_eq!(auto_epochs(5_000_000), 1);
    }

    #[test]
    fn a_fitted_block_leaves_a_quarter_of_room_in_multiples_of_64() {
        assert_eq!(fitted_block(10), 192);
        assert_eq!(fitted_block(200), 256);
        assert_eq!(fitted_block(512), 640);
    }
}
