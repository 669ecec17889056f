//! `plansmith calibrate`: refit a trained planner's confidence floor (and confidence mode) on
//! calibration traces and re-measure it on test traces, without retraining.

use std::path::PathBuf;

use clap::Args;
use plansmith_core::trace::read_traces;
use plansmith_planner::train::{calibrate_and_test, Splits};
use plansmith_planner::Planner;

use crate::Outcome;

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
    /// (`weakest`). Default: keep the planner's.
    #[arg(long)]
    confidence: Option<String>,
    /// Precision the floor must reach on calibration (1.0 = no wrong plan accepted).
    #[arg(long, default_value_t = 1.0)]
    target_precision: f64,
    /// Write the recalibrated planner here (default: replace --planner, atomically).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(args: CalibrateArgs) -> anyhow::Result<Outcome> {
    let mut planner = Planner::load(&args.planner)?;
    if let Some(name) = &args.confidence {
        planner.settings.confidence = super::train::confidence_mode(name)?;
    }
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
    let bar = (!args.json).then(|| crate::progress::bar(0, "calibrating"));
    calibrate_and_test(
        &mut planner,
        &splits,
        args.target_precision,
        crate::progress::stages(&bar),
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let out = args.out.as_ref().unwrap_or(&args.planner);
    planner.save(out)?;
    let meta = &planner.meta;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"out": out, "conf_floor": planner.settings.conf_floor,
                "confidence": planner.settings.confidence,
                "calibration": meta.calibration, "test": meta.test})
        );
    } else {
        println!(
            "saved {} (confidence {:?}, floor {:.5})",
            out.display(),
            planner.settings.confidence,
            planner.settings.conf_floor
        );
        crate::cmd::eval::print_gate_table(&[
            ("calibration", meta.calibration.as_ref()),
            ("test", meta.test.as_ref()),
        ]);
    }
    Ok(Outcome::Ok)
}
