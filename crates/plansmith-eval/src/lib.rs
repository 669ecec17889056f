//! plansmith-eval: evaluation on BFCL with BFCL's own rules.
//!
//! * [`data`]: BFCL v4 items and possible answers from any directory in BFCL's layout.
//! * [`checker`]: BFCL's AST checker reimplemented rule for rule (Python path), verified
//!   against the real `ast_checker.py` by `tests/bfcl_agreement.rs`.
//! * [`report`]: category scores, the JSON report, per-item JSONL records, Markdown and SVG
//!   beside published anchors.
//! * [`harness`]: the [`Subject`] trait and the [`run_eval`] driver.
//! * [`journal`]: a long run's scored items, appended as they are scored, to resume it.
//! * [`bfcl_schema`]: BFCL parameter schemas -> JSON Schema.
//!
//! Assets (BFCL data, the reference checker) come from `scripts/assets.sh`; see
//! [`data::bfcl_dir`].

pub mod bfcl_schema;
pub mod checker;
pub mod data;
pub mod error;
pub mod harness;
pub mod journal;
pub mod report;

pub use checker::{check_item, standardize_string, CheckOptions, Verdict};
pub use data::{
    available_categories, bfcl_dir, load_categories, load_category, BfclCall, BfclItem, CheckMode,
    Expected, GoldCall, Message, NON_LIVE_AST_CATEGORIES,
};
pub use error::EvalError;
pub use harness::{
    run_eval, run_eval_resuming, run_eval_with, EvalRun, Progress, Subject, SubjectCause,
    SubjectError, SubjectOutput,
};
pub use journal::Journal;
pub use report::{
    score_category, score_category_with, Anchor, CategoryScore, EvalReport, GateScore, ItemRecord,
    LatencySummary, PUBLISHED_ANCHORS,
};
