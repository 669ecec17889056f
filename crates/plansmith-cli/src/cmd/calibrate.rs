//! `plansmith calibrate`: refit a trained planner's confidence floor (and confidence mode) on
//! calibration traces and re-measure it on test traces, without retraining.

use std::path::PathBuf;

use clap::Args;
use plansmith_core::trace::read_traces;
use plansmith_planner::journal::{self, Journal};
use plansmith_planner::train::{calibrate_and_test_journaled, prepare_for_calibration, Splits};
use plansmith_planner::{FloorRule, Planner};

use crate::Outcome;

/// How the confidence floor is chosen (shared by `train` and `calibrate`).
#[derive(Args)]
pub struct FloorArgs {
    /// The floor's promise: at most this share of the plans it accepts are wrong, with
    /// --certainty confidence (exact Clopper-Pearson bounds over a fixed set of candidate
    /// floors, Learn then Test). A calibration split too small to certify it gets a floor that
    /// accepts nothing, and says how many calibration plans it would need.
    #[arg(long, value_name = "RATE", default_value_t = 0.01)]
    max_wrong: f64,
    /// How sure the --max-wrong promise is (over the draw of the calibration split).
    #[arg(long, value_name = "P", default_value_t = 0.95)]
    certainty: f64,
    /// Instead of a guarantee, the lowest floor whose accepted calibration plans reach this
    /// precision (1.0 is mixle's rule: no wrong plan accepted on calibration). It promises
    /// nothing about fresh requests.
    #[arg(long, value_name = "P", conflicts_with_all = ["max_wrong", "certainty"])]
    target_precision: Option<f64>,
}

impl FloorArgs {
    pub fn rule(&self) -> anyhow::Result<FloorRule> {
        let rule = match self.target_precision {
            Some(precision) => FloorRule::Empirical { precision },
            None => FloorRule::guaranteed(self.max_wrong, self.certainty),
        };
        rule.check()
            .map_err(|e| anyhow::anyhow!("--max-wrong/--certainty/--target-precision: {e}"))?;
        Ok(rule)
    }
}

/// Print what the fitted floor promises; a floor that certifies nothing goes to stderr.
pub fn print_floor_fit(planner: &Planner) {
    if let Some(fit) = &planner.meta.floor_fit {
        // A floor that accepts no calibration plan (an empirical rule the planner never met)
        // answers nothing either: as loud as an uncertified one.
        if fit.certified && fit.accepted > 0 {
            println!("{}", fit.summary());
        } else {
            eprintln!("warning: {}", fit.summary());
        }
    }
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// The planner directory to recalibrate.
    #[arg(long)]
    planner: PathBuf,
    /// Calibration traces: the floor is fitted here.
    #[arg(long)]
    calibration: PathBuf,
    /// Test traces: the gate is measured here with the new floor.
    #[arg(long)]
    test: Option<PathBuf>,
    /// Confidence over the tokens the model chose (`chosen`) or every reply token, forced
    /// ones included (`all`, mixle's choice), or the lowest reply token's log-prob
    /// (`weakest`), or `auto`: a floor for each, keeping the one that answers the most (the
    /// guarantee's delta shared among the three; one decode serves all). Default: keep the
    /// planner's.
    #[arg(long)]
    confidence: Option<String>,
    /// Which argument values the planner must copy from the request from now on: `none` or
    /// `free-strings` (every string without enum / pattern / format, and every number without
    /// enum, is a span of the request's words), as `plan --copy`. The floor is refitted under
    /// it and planner.json records it. Default: keep the planner's.
    #[arg(long, value_enum, value_name = "WHICH")]
    copy: Option<super::plan::CopyValues>,
    #[command(flatten)]
    floor: FloorArgs,
    /// Write the recalibrated planner here (default: replace --planner, atomically).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Judge every request anew. By default each judged request is journaled in
    /// PLANNER/calibration-journal.jsonl as it is judged, and a run that stopped (Ctrl-C, a
    /// crash, a stopped `train --base`) goes on from the requests it had judged, as long as
    /// the planner and its settings are the same; the journal goes once the planner is saved.
    #[arg(long)]
    restart: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(args: CalibrateArgs) -> anyhow::Result<Outcome> {
    let rule = args.floor.rule()?;
    let mut planner = Planner::load(&args.planner)?;
    if let Some(copy) = args.copy {
        planner.settings.policy = copy.policy();
    }
    let modes = match &args.confidence {
        Some(name) => super::train::confidence_modes(name)?,
        None => vec![planner.settings.confidence],
    };
    let splits = Splits {
        train: Vec::new(),
        calibration: read_traces(&args.calibration)?,
        test: args
            .test
            .as_ref()
            .map(read_traces)
            .transpose()?
            .unwrap_or_default(),
    };
    anyhow::ensure!(
        !splits.calibration.is_empty(),
        "{} has no traces to calibrate on",
        args.calibration.display()
    );
    planner.meta.test = None;
    prepare_for_calibration(&mut planner);
    let journal_path = args.planner.join(journal::FILE);
    if args.restart {
        let _ = std::fs::remove_file(&journal_path);
    }
    let mut journal = match Journal::open(&journal_path, &journal::fingerprint(&planner)?) {
        Ok(j) => Some(j),
        Err(e) => {
            eprintln!("warning: no journal ({e}): a run stopped now starts over");
            None
        }
    };
    if let Some(journal) = journal.as_ref().filter(|j| !j.is_empty()) {
        eprintln!(
            "resuming: {} requests already judged in {} (--restart judges them again)",
            journal.len(),
            journal_path.display()
        );
    }
    // Progress goes to stderr with --json too (the report is stdout's).
    let bar = Some(crate::progress::bar(0, "calibrating"));
    calibrate_and_test_journaled(
        &mut planner,
        &splits,
        rule,
        &modes,
        journal.as_mut(),
        crate::progress::stages(&bar),
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // Requests read back from the journal instead of decoded.
    let resumed = journal.as_ref().map_or(0, Journal::reused);
    drop(journal);
    let out = args.out.as_ref().unwrap_or(&args.planner);
    planner.save(out)?;
    // Saved over --planner, the directory was replaced and the journal went with it; saved
    // elsewhere, the source's journal has done its work.
    let _ = std::fs::remove_file(&journal_path);
    let meta = &planner.meta;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"out": out, "conf_floor": planner.settings.conf_floor,
                "confidence": planner.settings.confidence,
                "floor_fit": meta.floor_fit, "resumed": resumed,
                "calibration": meta.calibration, "test": meta.test})
        );
    } else {
        println!(
            "saved {} (confidence {:?}, floor {:.5})",
            out.display(),
            planner.settings.confidence,
            planner.settings.conf_floor
        );
        print_floor_fit(&planner);
        crate::cmd::eval::print_gate_table(&[
            ("calibration", meta.calibration.as_ref()),
            ("test", meta.test.as_ref()),
        ]);
    }
    Ok(Outcome::Ok)
}
