//! The evaluation driver: a [`Subject`] answers items, the checker scores them.

use std::time::Duration;

use crate::checker::{check_item, CheckOptions};
use crate::data::{BfclCall, BfclItem};
use crate::error::EvalError;
use crate::journal::Done;
use crate::report::{EvalReport, ItemRecord};

/// What a subject answered for one item.
#[derive(Debug, Clone, PartialEq)]
pub struct SubjectOutput {
    /// The raw output text (kept in the per-item record).
    pub text: String,
    /// The calls decoded from the text; `None` when the text is not a call list at all
    /// (BFCL's decoder failure), `Some(vec![])` for an explicit "no call".
    pub calls: Option<Vec<BfclCall>>,
    /// Wall time the subject spent on the item.
    pub latency: Duration,
    /// For a subject with a confidence gate: whether the gate let this answer through (an
    /// escalated answer means no action was taken). `None` for subjects without a gate.
    pub accepted: Option<bool>,
    /// For a subject with a confidence gate: the confidence it weighed against its floor, so
    /// a report can be re-read at another floor without decoding again.
    pub confidence: Option<f64>,
}

/// The underlying error of a failed subject. The harness cannot know the concrete types (a
/// planner's, an HTTP client's: eval depends on neither), so it carries them as sources.
pub type SubjectCause = Box<dyn std::error::Error + Send + Sync>;

/// Why a subject could not answer an item at all (a wrong answer is not an error: it is
/// scored). Any of these aborts the run with the item named.
#[derive(Debug, thiserror::Error)]
pub enum SubjectError {
    /// A local model failed while decoding (not a bad answer: no answer).
    #[error("the model failed: {0}")]
    Model(#[source] SubjectCause),
    /// A remote endpoint was unreachable, timed out, or answered with an error.
    #[error("the endpoint failed: {0}")]
    Endpoint(#[source] SubjectCause),
    /// A replayed or precomputed answer is missing or unreadable.
    #[error("no answer available: {0}")]
    Replay(#[source] SubjectCause),
}

impl SubjectError {
    pub fn model(e: impl Into<SubjectCause>) -> Self {
        SubjectError::Model(e.into())
    }
    pub fn endpoint(e: impl Into<SubjectCause>) -> Self {
        SubjectError::Endpoint(e.into())
    }
    pub fn replay(e: impl Into<SubjectCause>) -> Self {
        SubjectError::Replay(e.into())
    }
}

/// Anything that answers BFCL items: a planner, an OpenAI-compatible endpoint, a replay file.
pub trait Subject {
    /// The name shown in reports.
    fn name(&self) -> String {
        "subject".into()
    }

    /// Answers one item.
    fn call(&mut self, item: &BfclItem) -> Result<SubjectOutput, SubjectError>;
}

/// Progress after each item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress<'a> {
    /// Items done so far (1-based after the first item).
    pub done: usize,
    pub total: usize,
    /// Correct so far.
    pub correct: usize,
    /// The item just scored.
    pub id: &'a str,
    pub category: &'a str,
    pub valid: bool,
}

/// The result of a run: one record per item and the report over them.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRun {
    pub records: Vec<ItemRecord>,
    pub report: EvalReport,
}

/// Runs `subject` over `items` (any mix of categories) with BFCL's default checker settings.
pub fn run_eval<S: Subject + ?Sized>(
    subject: &mut S,
    items: &[BfclItem],
    progress: impl FnMut(&Progress<'_>),
) -> Result<EvalRun, EvalError> {
    run_eval_with(subject, items, &CheckOptions::default(), progress)
}

/// [`run_eval`] with checker options.
pub fn run_eval_with<S: Subject + ?Sized>(
    subject: &mut S,
    items: &[BfclItem],
    opts: &CheckOptions,
    progress: impl FnMut(&Progress<'_>),
) -> Result<EvalRun, EvalError> {
    run_eval_resuming(subject, items, opts, &Done::new(), |_| Ok(()), progress)
}

/// [`run_eval_with`] for a run that was stopped: items in `done` (an earlier run's records, by
/// id, from its [`crate::journal::Journal`]) are not asked again, only re-scored from the calls
/// they recorded (so a checker fixed since scores them too); each new record goes to `scored`
/// the moment it is scored (to append it to the journal).
pub fn run_eval_resuming<S: Subject + ?Sized>(
    subject: &mut S,
    items: &[BfclItem],
    opts: &CheckOptions,
    done: &Done,
    mut scored: impl FnMut(&ItemRecord) -> Result<(), EvalError>,
    mut progress: impl FnMut(&Progress<'_>),
) -> Result<EvalRun, EvalError> {
    let mut records = Vec::with_capacity(items.len());
    let mut correct = 0;
    for (i, item) in items.iter().enumerate() {
        let earlier = done.get(&item.id).filter(|r| r.category == item.category);
        let record = match earlier {
            Some(r) => {
                let verdict = check_item(item, r.calls.as_deref(), opts);
                let latency = Duration::from_secs_f64(r.latency_ms.max(0.0) / 1e3);
                let mut record =
                    ItemRecord::new(item, r.output.clone(), r.calls.clone(), &verdict, latency);
                record.accepted = r.accepted;
                record.confidence = r.confidence;
                record
            }
            None => {
                let out = subject.call(item).map_err(|e| EvalError::Subject {
                    subject: subject.name(),
                    id: item.id.clone(),
                    message: e.to_string(),
                })?;
                let verdict = check_item(item, out.calls.as_deref(), opts);
                let mut record = ItemRecord::new(item, out.text, out.calls, &verdict, out.latency);
                record.accepted = out.accepted;
                record.confidence = out.confidence.filter(|c| c.is_finite());
                scored(&record)?;
                record
            }
        };
        correct += usize::from(record.valid);
        progress(&Progress {
            done: i + 1,
            total: items.len(),
            correct,
            id: &item.id,
            category: &item.category,
            valid: record.valid,
        });
        records.push(record);
    }
    let report = EvalReport::from_records(&records);
    Ok(EvalRun { records, report })
}
