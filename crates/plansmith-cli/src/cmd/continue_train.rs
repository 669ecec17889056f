//! `plansmith train --continue PLANNER --harvest FILE`: retrain a tiny planner on what its
//! teacher answered (plus a replay sample of its old data), recalibrate it, compare it with the
//! planner it would replace on the check sets, and replace it — atomically — only if it is not
//! worse there.

use std::path::{Path, PathBuf};

use plansmith_core::trace::{read_traces, write_atomic};
use plansmith_core::Trace;
use plansmith_lm::{Progress, TrainConfig};
use plansmith_planner::eval::{evaluate, items};
use plansmith_planner::train::{CodecChoice, TrainSpec};
use plansmith_planner::train_files::{train_from_files, TraceFiles};
use plansmith_planner::{FloorRule, Planner};

use crate::Outcome;

/// What `train --continue` needs from the command line.
pub struct Continue<'a> {
    pub planner: &'a Path,
    pub harvest: &'a Path,
    /// The old training data to replay from (may be empty).
    pub data: &'a [PathBuf],
    pub replay: usize,
    pub harvest_copies: usize,
    pub calibration: &'a Path,
    /// Sets the old and new planners are compared on (traces with reference plans).
    pub check: &'a [PathBuf],
    pub floor: FloorRule,
    pub epochs: usize,
    pub lr: Option<f64>,
    pub batch_size: usize,
    pub seed: u64,
    pub out: Option<&'a Path>,
    pub json: bool,
    pub quiet: bool,
}

/// One check set, before and after.
#[derive(serde::Serialize)]
struct Check {
    set: String,
    n: usize,
    agreement_before: f64,
    agreement_after: f64,
    silent_wrong_before: usize,
    silent_wrong_after: usize,
    coverage_before: f64,
    coverage_after: f64,
}

pub fn run(c: Continue) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        !c.check.is_empty(),
        "--continue needs at least one --check FILE (traces the old and new planner are compared on; e.g. hand-written requests imported with `plansmith data import --format bfcl`)"
    );
    anyhow::ensure!(c.harvest_copies >= 1, "--harvest-copies must be at least 1");
    let old = Planner::load(c.planner)?;
    let Some((model, _)) = old.tiny() else {
        anyhow::bail!(
            "{}: --continue retrains tiny planners; tune a pretrained one with --base",
            c.planner.display()
        );
    };
    let harvest = read_traces(c.harvest)?;
    anyhow::ensure!(
        !harvest.is_empty(),
        "{} has no traces to learn from",
        c.harvest.display()
    );
    // The old data, sampled without replacement (seeded), so the planner keeps what it knew.
    let mut old_data: Vec<Trace> = Vec::new();
    for path in c.data {
        old_data.extend(read_traces(path)?);
    }
    let replay = sample(old_data, c.replay, c.seed);
    let mut mix: Vec<&Trace> = Vec::new();
    for _ in 0..c.harvest_copies {
        mix.extend(&harvest);
    }
    mix.extend(&replay);
    let data_file = std::env::temp_dir().join(format!(
        "plansmith-continue-{}-{}.jsonl",
        std::process::id(),
        c.seed
    ));
    let text: String = mix
        .iter()
        .map(|t| serde_json::to_string(t).map(|l| l + "\n"))
        .collect::<Result<_, _>>()?;
    write_atomic(&data_file, text.as_bytes())?;
    let spec = TrainSpec {
        model: model.config().clone(),
        // The codec comes from the planner being continued.
        codec: CodecChoice::Char,
        train: TrainConfig {
            epochs: c.epochs,
            batch_size: c.batch_size,
            lr: c.lr.unwrap_or(1e-3),
            seed: c.seed,
            ..TrainConfig::default()
        },
        settings: old.settings.clone(),
        floor: c.floor,
        piece_dropout: 0.0,
        other_confidence: Vec::new(),
    };
    let files = TraceFiles {
        data: vec![data_file.clone()],
        calibration: Some(c.calibration.to_path_buf()),
        // The check sets judge the new planner; no test split is taken from the harvest.
        test: Some(c.check[0].clone()),
        seed: c.seed,
        // The check sets are evaluation sets themselves; harvested answers are kept whole.
        exclude: None,
    };
    let progress = if c.quiet || c.json {
        Progress::Hidden
    } else {
        Progress::Bar
    };
    let trained = train_from_files(
        &files,
        old.catalog.as_ref().clone(),
        &spec,
        Some(c.planner),
        progress,
        |_, _| {},
        |_, _, _| {},
    );
    let _ = std::fs::remove_file(&data_file);
    let new = trained?.planner;

    let mut checks = Vec::new();
    for path in c.check {
        let set = items(&read_traces(path)?)?;
        let (before, _) = evaluate(&old, &set, false, |_, _| {})?;
        let (after, _) = evaluate(&new, &set, false, |_, _| {})?;
        checks.push(Check {
            set: path.display().to_string(),
            n: set.len(),
            agreement_before: before.agreement,
            agreement_after: after.agreement,
            silent_wrong_before: before.silent_wrong,
            silent_wrong_after: after.silent_wrong,
            coverage_before: before.coverage,
            coverage_after: after.coverage,
        });
    }
    let not_worse = checks.iter().all(|k| {
        k.agreement_after >= k.agreement_before && k.silent_wrong_after <= k.silent_wrong_before
    });
    let target = c.out.unwrap_or(c.planner);
    let written = if not_worse {
        target.to_path_buf()
    } else {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "planner".into());
        target.with_file_name(format!("{name}.rejected"))
    };
    new.save(&written)?;
    if c.json {
        println!(
            "{}",
            serde_json::json!({"replaced": not_worse, "out": written, "harvest": harvest.len(),
                "replay": replay.len(), "floor_fit": new.meta.floor_fit, "checks": checks})
        );
    } else {
        println!(
            "retrained on {} harvested traces (x{}) and {} replayed ones",
            harvest.len(),
            c.harvest_copies,
            replay.len()
        );
        super::calibrate::print_floor_fit(&new);
        println!(
            "{:<40} {:>6} {:>10} {:>10} {:>8} {:>8}",
            "check set", "n", "agree old", "agree new", "wrong old", "wrong new"
        );
        for k in &checks {
            println!(
                "{:<40} {:>6} {:>10.4} {:>10.4} {:>8} {:>8}",
                k.set,
                k.n,
                k.agreement_before,
                k.agreement_after,
                k.silent_wrong_before,
                k.silent_wrong_after
            );
        }
        if not_worse {
            println!(
                "not worse on every check set: saved to {}",
                written.display()
            );
        } else {
            eprintln!(
                "worse on a check set: {} is unchanged; the candidate is in {}",
                target.display(),
                written.display()
            );
        }
    }
    Ok(if not_worse {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

/// Up to `n` of `items`, chosen uniformly without replacement by a seeded shuffle.
fn sample(mut items: Vec<Trace>, n: usize, seed: u64) -> Vec<Trace> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let take = n.min(items.len());
    for i in 0..take {
        let j = i + (next() % (items.len() - i) as u64) as usize;
        items.swap(i, j);
    }
    items.truncate(take);
    items
}
