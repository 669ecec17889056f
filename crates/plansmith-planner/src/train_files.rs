//! Reading a training run's trace files: the training data streamed one trace at a time and
//! rendered to (prompt, completion) pairs at once, and the calibration and test splits either
//! given as files or split off the data by request hash.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plansmith_core::overlap::Decontaminator;
use plansmith_core::trace::{read_traces, stream_traces};
use plansmith_core::{Catalog, Trace};
use plansmith_lm::Progress;

use crate::error::PlannerError;
use crate::planner::Planner;
use crate::settings::PlannerSettings;
use crate::train::{
    pair, part_of, split, train_planner_on_pairs, Part, Splits, TrainSpec, Trained,
};

/// Share of the data split off for calibration, and for test, when its file is not given.
pub const OWN_SPLIT: f64 = 0.1;

/// Where a training run's traces come from.
#[derive(Debug, Clone, Default)]
pub struct TraceFiles {
    /// Training traces (JSONL), read in order.
    pub data: Vec<PathBuf>,
    /// Calibration traces; `None` splits them off `data` (as `test` does for test traces).
    pub calibration: Option<PathBuf>,
    pub test: Option<PathBuf>,
    /// Seeds the request-hash split when the splits come from `data`.
    pub seed: u64,
    /// Drops every trace (training, calibration and test alike) whose request overlaps an
    /// evaluation request, and counts them: evaluation sets stay out of the run.
    pub exclude: Option<Arc<Decontaminator>>,
}

impl TraceFiles {
    /// The shares of the data split off for calibration and for test: 10% for each split
    /// whose file is not given (by request hash, so a request and its copies land together).
    /// A floor is never left unfitted because only a test file was given.
    pub fn own_shares(&self) -> (f64, f64) {
        let share = |file: &Option<PathBuf>| if file.is_none() { OWN_SPLIT } else { 0.0 };
        (share(&self.calibration), share(&self.test))
    }

    /// Whether a trace stays in the run (see [`TraceFiles::exclude`]).
    fn keep(&self, trace: &Trace) -> bool {
        self.exclude.as_ref().is_none_or(|d| d.keep(&trace.request))
    }

    /// The calibration and test files (`train` left empty).
    pub fn held_out(&self) -> Result<Splits, PlannerError> {
        let read = |p: &Option<PathBuf>| -> Result<Vec<Trace>, PlannerError> {
            let mut traces = p.as_ref().map(read_traces).transpose()?.unwrap_or_default();
            traces.retain(|t| self.keep(t));
            Ok(traces)
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
            traces.extend(read_traces(path)?.into_iter().filter(|t| self.keep(t)));
        }
        let (calibration, test) = self.own_shares();
        let mut own = split(traces, calibration, test, self.seed);
        let files = self.held_out()?;
        own.calibration.extend(files.calibration);
        own.test.extend(files.test);
        Ok(own)
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
        let (calibration, test) = self.own_shares();
        let mut pairs = Vec::new();
        for path in &self.data {
            for (i, trace) in stream_traces(path)?.enumerate() {
                let trace = trace?;
                if !self.keep(&trace) {
                    continue;
                }
                let part = part_of(&trace.request, calibration, test, self.seed);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, n: usize) -> PathBuf {
        let path = dir.join(name);
        let lines: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"request":"{name} request {i}","calls":[]}}"#))
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    #[test]
    fn each_missing_held_out_file_is_split_off_the_data() {
        let dir = std::env::temp_dir().join(format!("plansmith-splits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = write(&dir, "data", 2000);
        let test = write(&dir, "test", 30);
        let cal = write(&dir, "cal", 40);
        let files = |calibration: Option<&PathBuf>, test: Option<&PathBuf>| TraceFiles {
            data: vec![data.clone()],
            calibration: calibration.cloned(),
            test: test.cloned(),
            seed: 0,
            exclude: None,
        };
        let settings = PlannerSettings::dsl();
        let catalog = Catalog::from_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/pace/tools.json"
        ))
        .unwrap();
        for (f, own_cal, own_test) in [
            (files(None, None), true, true),
            (files(None, Some(&test)), true, false),
            (files(Some(&cal), None), false, true),
            (files(Some(&cal), Some(&test)), false, false),
        ] {
            let s = f.read_splits().unwrap();
            let (_, held_out) = f.read_pairs(&catalog, &settings).unwrap();
            for splits in [&s, &held_out] {
                let (c, t) = (splits.calibration.len(), splits.test.len());
                assert_eq!(own_cal, c > 100 && c < 300, "calibration {c}");
                assert_eq!(own_test, t > 100 && t < 300, "test {t}");
                assert!(own_cal || c == 40, "calibration {c}");
                assert!(own_test || t == 30, "test {t}");
            }
            let given = if own_cal { 0 } else { 40 } + if own_test { 0 } else { 30 };
            assert_eq!(
                s.train.len() + s.calibration.len() + s.test.len(),
                2000 + given
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
