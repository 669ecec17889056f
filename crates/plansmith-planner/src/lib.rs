//! plansmith-planner: the verified planner.
//!
//! It owns constrained greedy decoding over a tiny LM ([`planner`]), the confidence floor and
//! its calibration ([`calibrate`]), teachers and escalation ([`teacher`]), harvesting of
//! escalations as traces, training a planner from traces ([`train`]), evaluating one on traces
//! ([`eval`]) and the planner directory format ([`dir`]). It must not know about HTTP: the
//! server calls [`Planner::plan_request`] from worker threads.
//!
//! The invariant it exists for: **only verified plans leave**. A plan is emitted by the model
//! only if it parsed, validated against the catalog and policy, and its confidence reached the
//! floor; everything else escalates to the teacher (whose answer is validated too) or leaves
//! as an explicit "escalated, no plan".

pub mod backend;
pub mod calibrate;
pub mod dir;
pub mod eval;
pub mod llama;
pub mod lora_train;
pub mod planner;
pub mod pointers;
mod prior;
pub mod prompt;
pub mod teacher;
pub mod train;

pub use backend::{Lm, TinyLm};
pub use calibrate::{fit_floor, gate_metrics, GateMetrics, Scored};
pub use dir::{default_planner, PlannerMeta};
pub use llama::{LlamaLm, LlamaSource};
pub use planner::{
    ConfidenceMode, Decoded, Outcome, PlanRequest, Planner, PlannerSettings, Report, Source,
};
pub use teacher::{Teacher, TeacherError};

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
    #[error("model {path}: {message}")]
    Model { path: String, message: String },
    #[error("training data: {0}")]
    Data(String),
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
