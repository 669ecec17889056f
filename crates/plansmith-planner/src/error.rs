//! The planner crate's one error type: every failure a planner can report, typed, with the
//! errors of the crates below it carried as sources.

use crate::teacher::TeacherError;

#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    #[error(transparent)]
    Lm(#[from] plansmith_lm::LmError),
    #[error(transparent)]
    Llama(#[from] plansmith_llama::LlamaError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// Scoring or sampling asked of a planner whose model runs on a remote engine.
    #[error("this needs the model's logits, which a remote backend does not give ({0}); use a local planner")]
    RemoteOnly(String),
    // These two print their inner error in their own message and so carry it as a plain field,
    // not as a `source`: an error-chain printer (`{:#}`) would otherwise say it twice.
    #[error("grammar: {0}")]
    Grammar(plansmith_grammar::GrammarError),
    #[error("token vocabulary: {0}")]
    TokEnv(plansmith_grammar::TokEnvError),
    #[error(transparent)]
    Catalog(#[from] plansmith_core::CatalogError),
    #[error(transparent)]
    Trace(#[from] plansmith_core::TraceError),
    #[error(transparent)]
    Teacher(#[from] TeacherError),
    #[error("planner directory {path}: {message}")]
    Dir { path: String, message: String },
    #[error("adapter directory {path}: {message}")]
    Adapter { path: String, message: String },
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
    /// A plan to score that this planner's grammar does not write (invalid against the
    /// catalog, or in a form its grammar never takes), with where it leaves it.
    #[error("{0}")]
    NotWritable(String),
    /// A request (or a request and the plan to score) longer than the model's context.
    #[error("{0}")]
    TooLong(String),
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

impl From<plansmith_grammar::GrammarError> for PlannerError {
    fn from(e: plansmith_grammar::GrammarError) -> Self {
        Self::Grammar(e)
    }
}

impl From<plansmith_grammar::TokEnvError> for PlannerError {
    fn from(e: plansmith_grammar::TokEnvError) -> Self {
        Self::TokEnv(e)
    }
}

/// Why the engine gave no reply to gate. Every message names the engine's address.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("backend spec `{spec}`: {message}")]
    Spec { spec: String, message: String },
    #[error("backend {url} is unreachable: {message}")]
    Unreachable { url: String, message: String },
    #[error("backend {url} did not answer within {ms} ms")]
    Timeout { url: String, ms: u128 },
    #[error("backend {url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("backend {url} sent a reply plansmith cannot read: {message}")]
    Reply { url: String, message: String },
}
