//! The planner crate's one error type: every failure a planner can report, typed, with the
//! errors of the crates below it carried as sources.

use crate::teacher::TeacherError;

#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    #[error(transparent)]
    Lm(#[from] plansmith_lm::LmError),
    #[error(transparent)]
    Llama(#[from] plansmith_llama::LlamaError),
    #[error("grammar: {0}")]
    Grammar(#[from] plansmith_grammar::GrammarError),
    #[error("token vocabulary: {0}")]
    TokEnv(#[from] plansmith_grammar::TokEnvError),
    #[error(transparent)]
    Catalog(#[from] plansmith_core::CatalogError),
    #[error(transparent)]
    Trace(#[from] plansmith_core::TraceError),
    #[error(transparent)]
    Teacher(#[from] TeacherError),
    #[error("planner directory {path}: {message}")]
    Dir { path: String, message: String },
    #[error("cascade file {path}: {message}")]
    Cascade { path: String, message: String },
    #[error("model {path}: {message}")]
    Model { path: String, message: String },
    #[error("training data: {0}")]
    Data(String),
    /// A training run stopped on request after writing a checkpoint.
    #[error("training stopped at step {step} of {steps}; checkpoint in {} (continue with --resume {})", checkpoint.display(), checkpoint.display())]
    Interrupted {
        step: usize,
        steps: usize,
        checkpoint: std::path::PathBuf,
    },
    #[error("evaluation data: {0}")]
    EvalData(String),
    #[error("internal lock poisoned (a planner thread panicked)")]
    Poisoned,
    /// The catalog's tools line alone fills the model's context: no request can follow it.
    #[error(
        "the tool catalog ({tools} tools) takes {tokens} tokens of prompt, but this planner's \
         context holds {block}; send fewer tools (about {fit} of this size leave room for a \
         request) or use a planner trained with a larger --block"
    )]
    CatalogTooLong {
        tools: usize,
        tokens: usize,
        block: usize,
        fit: usize,
    },
}
