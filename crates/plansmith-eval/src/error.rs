//! Typed errors of the evaluation library.

use std::path::PathBuf;

/// Everything that can go wrong while loading BFCL data, running a subject or writing reports.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file could not be read or written.
    #[error("cannot read or write {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A line of a BFCL JSONL file is not what BFCL's format says it is.
    #[error("{path}:{line}: {message}")]
    Malformed {
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        message: String,
    },

    /// A test item has no entry in the possible-answer file (or the reverse).
    #[error("{path}: {message}")]
    AnswerMismatch { path: PathBuf, message: String },

    /// The category exists but is not scored by this harness (multi-turn, memory, web search,
    /// format sensitivity, Java/JavaScript type conversion).
    #[error("BFCL category {category:?} is not supported: {reason}")]
    UnsupportedCategory { category: String, reason: String },

    /// A BFCL parameter schema uses something the JSON Schema conversion does not know.
    #[error("{path}: {message}")]
    Schema { path: String, message: String },

    /// The third-party assets have not been fetched.
    #[error("{what} not found at {path}: run scripts/assets.sh first")]
    AssetsMissing { what: String, path: PathBuf },

    /// The subject under evaluation failed on an item.
    #[error("subject {subject:?} failed on item {id}: {message}")]
    Subject {
        subject: String,
        id: String,
        message: String,
    },

    /// The per-item output list does not line up with the items.
    #[error("{0}")]
    Mismatch(String),

    /// Serialising a report failed.
    #[error("serialising {what}: {source}")]
    Serialize {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl EvalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EvalError::Io {
            path: path.into(),
            source,
        }
    }
}
