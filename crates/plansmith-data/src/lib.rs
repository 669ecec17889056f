//! plansmith-data: training data for plansmith planners.
//!
//! - [`pace`]: the Pace domain generator (ten verbs, held-out splits, stats).
//! - [`casing`]: ALL-CAPS variants of copy-faithful traces (training augmentation).
//! - [`legacy`]: v6 executor tags (`[CLICK:Save]`) for old clients.
//! - [`augment`]: tools-in-prompt augmentation (renaming, shuffling, distractors, removed
//!   tools), [`families`] of synthetic tools beyond Pace, and [`novel`] tools invented per
//!   request (what teaches a planner to call a tool it never saw), and Pace requests whose verb
//!   was [`swapped`] for a new tool's name.
//! - [`import`]: xLAM, OpenAI chat fine-tuning and BFCL importers; OpenAI and TRL exporters.
//!
//! Everything is deterministic per seed ([`rng::Rng`], no global state).

pub mod apis;
pub mod augment;
pub mod casing;
pub mod families;
pub mod import;
pub mod legacy;
pub mod novel;
pub mod pace;
pub mod rng;
pub mod swapped;

use std::path::Path;

pub use apis::api_traces;
pub use augment::{augment_traces, prompt_catalog_line, AugmentConfig, AugmentStats};
pub use casing::shouted;
pub use families::{families, synthetic_traces, Family};
pub use import::{
    export_openai_chat, export_traces, export_trl, export_trl_planner, export_xlam, import_bfcl,
    import_openai_chat, import_traces, import_xlam, read_bfcl, read_openai_chat, read_xlam,
    EvalItem, ExportFormat, ImportFormat, Imported, LineError, RecordError, UnknownFormat,
};
pub use legacy::{legacy_tag, legacy_tags, LegacyTagError};
pub use novel::{novel_traces, novel_traces_with, NovelOptions};
pub use pace::{
    generate_pace, pace_catalog, run_pace, write_pace, PaceConfig, PaceData, PaceStats,
};
pub use swapped::swapped_verb_traces;

/// Errors of this crate; each names what and where.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot access {path}: {message}")]
    Io { path: String, message: String },
    /// A malformed input line (`strict` mode): file and 1-based line number.
    #[error("{0}")]
    Line(#[from] LineError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Catalog(#[from] plansmith_core::CatalogError),
}

/// Bounds a draw-until-distinct loop: after 100 draws per wanted item (at least 10,000), the
/// next draw is an error saying how far generation got.
pub(crate) struct DrawBudget {
    left: usize,
    wanted: usize,
    what: &'static str,
}

impl DrawBudget {
    pub(crate) fn new(wanted: usize, what: &'static str) -> Self {
        DrawBudget {
            left: wanted.max(100) * 100,
            wanted,
            what,
        }
    }

    pub(crate) fn draw(&mut self, made: usize) -> Result<(), DataError> {
        if self.left == 0 {
            return Err(DataError::Invalid(format!(
                "could only generate {made} distinct {} of {}",
                self.what, self.wanted
            )));
        }
        self.left -= 1;
        Ok(())
    }
}

impl DataError {
    pub(crate) fn io(path: &Path, e: std::io::Error) -> DataError {
        DataError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}
