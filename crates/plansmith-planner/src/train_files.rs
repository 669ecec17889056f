//! Reading a training run's trace files: the training data streamed one trace at a time and
//! rendered to (prompt, completion) pairs at once, and the calibration and test splits either
//! given as files or split off the data by request hash.

use std::path::{Path, PathBuf};

use plansmith_core::trace::{read_traces, stream_traces};
use plansmith_core::{Catalog, Trace};
use plansmith_lm::Progress;

use crate::error::PlannerError;
use crate::planner::Planner;
use crate::settings::PlannerSettings;
use crate::train::{
    pair, part_of, split, train_planner_on_pairs, Part, Splits, TrainSpec, Trained,
};

/// Share of the data split off for calibration, and for test, when no files are given.
pub const OWN_SPLIT: f64 = 0.1;

/// Where a training run's traces come from.
#[derive(Debug, Clone, Default)]
pub struct TraceFiles {
    /// Training traces (JSONL), read in order.
    pub data: Vec<PathBuf>,
    /// Calibration traces; with `test`, both `None` means both are split off `data`.
    pub calibration: Option<PathBuf>,
    pub test: Option<PathBuf>,
    /// Seeds the request-hash split when the splits come from `data`.
    pub seed: u64,
}

impl TraceFiles {
    /// Without calibration and test files, both are split off the data (10% each, by request
    /// hash, so a request and its copies land together).
    pub fn splits_own(&self) -> bool {
        self.calibration.is_none() && self.test.is_none()
    }

    /// The calibration and test files (`train` left empty).
    pub fn held_out(&self) -> Result<Splits, PlannerError> {
        let read = |p: &Option<PathBuf>| -> Result<Vec<Trace>, PlannerError> {
            Ok(p.as_ref().map(read_traces).transpose()?.unwrap_or_default())
        };
        Ok(Splits {
            train: Vec::new(),
            calibration: read(&self.calibration)?,
            test: read(&self.test)?,
        })
    }

    /// Every split as traces (LoRA training keeps its few thousand examples as traces).
    pub fn read_splits(&self) -> Result<Splits, PlannerError> {
        let mut traces = Vec::new();
        for path in &self.data {
            traces.extend(read_traces(path)?);
        }
        Ok(match self.splits_own() {
            true => split(traces, OWN_SPLIT, OWN_SPLIT, self.seed),
            false => Splits {
                train: traces,
                ..self.held_out()?
            },
        })
    }

    /// The training traces rendered to (prompt, completion) pairs as they are read, and the
    /// held-out splits as traces. A trace with its own catalog is tens of KB parsed and its
    /// prompt ~1 KB, so the default recipe's 464k-trace mix takes under 1 GB instead of 13.
    pub fn read_pairs(
        &self,
        catalog: &Catalog,
        settings: &PlannerSettings,
    ) -> Result<(Vec<(String, String)>, Splits), PlannerError> {
        let mut held_out = self.held_out()?;
        let own = self.splits_own();
        let mut pairs = Vec::new();
        for path in &self.data {
            for (i, trace) in stream_traces(path)?.enumerate() {
                let trace = trace?;
                let part = match own {
                    true => part_of(&trace.request, OWN_SPLIT, OWN_SPLIT, self.seed),
                    false => Part::Train,
                };
                match part {
                    Part::Train => pairs.push(
                        pair(&trace, i, catalog, settings)
                            .map_err(|e| PlannerError::Data(format!("{}: {e}", path.display())))?,
                    ),
                    Part::Calibration => held_out.calibration.push(trace),
                    Part::Test => held_out.test.push(trace),
                }
            }
        }
        Ok((pairs, held_out))
    }
}

/// A whole tiny-planner training run from files: read and render the data, continue from the
/// planner in `init` if given, train, fit the floor, report on test. `read` is told the
/// number of training pairs and the held-out splits once the data is read.
pub fn train_from_files(
    files: &TraceFiles,
    catalog: Catalog,
    spec: &TrainSpec,
    init: Option<&Path>,
    progress: Progress,
    read: impl FnOnce(usize, &Splits),
    eval_progress: impl FnMut(&str, usize, usize),
) -> Result<Trained, PlannerError> {
    let (pairs, held_out) = files.read_pairs(&catalog, &spec.settings)?;
    read(pairs.len(), &held_out);
    let init = init.map(Planner::load).transpose()?;
    train_planner_on_pairs(
        pairs,
        &held_out,
        catalog,
        spec,
        init,
        progress,
        eval_progress,
    )
}
