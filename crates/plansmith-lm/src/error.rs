//! Typed errors of the crate.

use std::path::PathBuf;

/// Everything that can go wrong in `plansmith-lm`.
#[derive(Debug, thiserror::Error)]
pub enum LmError {
    /// A tensor operation failed inside candle.
    #[error("tensor op failed: {0}")]
    Candle(#[from] candle_core::Error),

    /// A filesystem operation failed; `path` names the file or directory.
    #[error("i/o error at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A JSON document could not be read or written; `path` names the file (or `<memory>`).
    #[error("invalid JSON in {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// The requested context does not fit the model's block size.
    #[error("context overflow: {needed} tokens needed but the model block size is {block}")]
    ContextOverflow { needed: usize, block: usize },

    /// A token id is outside the vocabulary.
    #[error("{place}: token id {id} is outside the vocabulary [0, {vocab})")]
    TokenOutOfRange {
        place: &'static str,
        id: u32,
        vocab: usize,
    },

    /// A configuration value is invalid (which field and why).
    #[error("invalid config: {0}")]
    Config(String),

    /// A weights file or checkpoint does not match the model (which tensor and why).
    #[error("weights mismatch in {path}: {reason}")]
    Weights { path: PathBuf, reason: String },

    /// The training set cannot be used (empty, no completion tokens, ...).
    #[error("invalid training data: {0}")]
    Data(String),

    /// A codec description is invalid.
    #[error("invalid codec: {0}")]
    Codec(String),
}

/// Crate result type.
pub type Result<T> = std::result::Result<T, LmError>;

impl LmError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LmError::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn json(path: impl Into<PathBuf>, source: serde_json::Error) -> Self {
        LmError::Json {
            path: path.into(),
            source,
        }
    }
}
