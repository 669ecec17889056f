//! Typed errors of the crate.

use std::path::PathBuf;

/// Everything that can go wrong in `plansmith-llama`.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
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

    /// The GGUF header / metadata / tensor table could not be parsed.
    #[error("invalid GGUF file {path}: {reason}")]
    GgufHeader { path: PathBuf, reason: String },

    /// A tensor's data could not be read (truncated file, bad offset, wrong size).
    #[error("GGUF file {path}: tensor `{tensor}` ({dtype}, {bytes} bytes at file offset {offset}): {reason}")]
    TensorData {
        path: PathBuf,
        tensor: String,
        dtype: String,
        bytes: u64,
        offset: u64,
        reason: String,
    },

    /// A safetensors file whose header cannot be read.
    #[error("invalid safetensors file {path}: {reason}")]
    Safetensors { path: PathBuf, reason: String },

    /// A tensor in a safetensors file whose data cannot be read (truncated file).
    #[error("safetensors file {path}: tensor `{tensor}`: {reason}")]
    SafetensorsTensor {
        path: PathBuf,
        tensor: String,
        reason: String,
    },

    /// A tensor the architecture needs is absent.
    #[error("{path}: missing tensor `{tensor}`")]
    MissingTensor { path: PathBuf, tensor: String },

    /// A tensor has a shape that does not match the configuration.
    #[error("{path}: tensor `{tensor}` has shape {found:?}, expected {expected:?}")]
    TensorShape {
        path: PathBuf,
        tensor: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },

    /// A metadata key is absent or has the wrong type / value.
    #[error("{path}: metadata `{key}`: {reason}")]
    Metadata {
        path: PathBuf,
        key: String,
        reason: String,
    },

    /// The file uses an architecture / tokenizer / feature this runtime does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A JSON document could not be read or written; `path` names the file (or `<memory>`).
    #[error("invalid JSON in {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// Tokenizer construction or use failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary (size {vocab})")]
    TokenOutOfRange { id: u32, vocab: usize },

    /// The chat template failed to compile or render.
    #[error("chat template: {0}")]
    Template(String),

    /// The context would exceed the model's maximum length.
    #[error("context overflow: {needed} tokens needed but the context length is {max}")]
    ContextOverflow { needed: usize, max: usize },

    /// A training checkpoint that cannot be resumed.
    #[error("training checkpoint {path}: {reason}")]
    Checkpoint { path: PathBuf, reason: String },

    /// A snapshot does not belong to this model, or a call was made in the wrong state.
    #[error("invalid state: {0}")]
    State(String),
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, LlamaError>;
