//! plansmith-planner: the verified planner.
//!
//! It owns constrained greedy decoding ([`planner`]) over any [`ModelBackend`] (a tiny GPT,
//! [`tiny`], or a pretrained model, [`llama`]), the confidence floor and
//! its calibration ([`calibrate`]), teachers and escalation ([`teacher`]), harvesting of
//! escalations as traces, training a planner from traces ([`train`]), evaluating one on traces
//! ([`eval`]) and the planner directory format ([`dir`]). Its modules form no cycle
//! (`tests/module_graph.rs`). It must not know about HTTP: the
//! server calls [`Planner::plan_request`] from worker threads.
//!
//! The invariant it exists for: **only verified plans leave**. A plan is emitted by the model
//! only if it parsed, validated against the catalog and policy, and its confidence reached the
//! floor; everything else escalates to the teacher (whose answer is validated too) or leaves
//! as an explicit "escalated, no plan".

pub mod backend;
pub mod calibrate;
pub mod cascade;
mod chart;
pub mod dir;
mod error;
pub mod eval;
pub mod guarantee;
pub mod journal;
pub mod llama;
pub mod lora_train;
pub mod planner;
pub mod pointers;
mod prior;
pub mod prompt;
pub mod remote;
pub mod settings;
pub mod teacher;
pub mod tiny;
pub mod train;
pub mod train_files;

pub use backend::ModelBackend;
pub use calibrate::{fit_floor, gate_metrics, GateMetrics, Scored};
pub use dir::default_planner;
pub use error::{BackendError, PlannerError};
pub use guarantee::{FloorFit, FloorRule};
pub use llama::{LlamaLm, LlamaSource};
pub use planner::{
    Decoded, GivenPlan, HopReport, Outcome, PlanRequest, Planner, Report, Sample, Source,
};
/// The grammar errors a [`PlannerError::Grammar`] carries, so callers can match on them
/// without depending on the grammar crate.
pub use plansmith_grammar::{GrammarError, MAX_CALLS};
pub use settings::{ConfidenceMode, PlannerMeta, PlannerSettings};
pub use teacher::{Teacher, TeacherError};
pub use tiny::TinyLm;
