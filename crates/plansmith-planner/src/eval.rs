//! Evaluating a planner on traces: agreement, coverage, silent-wrong, and the same without
//! the grammar for comparison.

use plansmith_core::{Catalog, Plan, Trace};
use plansmith_lm::Sampler;
use serde::{Deserialize, Serialize};

use crate::calibrate::{coverage_curve, gate_metrics, GateMetrics, Scored};
use crate::error::PlannerError;
use crate::planner::{Decoded, PlanRequest, Planner};
use crate::settings::ConfidenceMode;

/// A trace turned into an evaluation item: the request, the reference plan, and the catalog
/// it is planned against (the trace's own `tools`, else the planner's).
pub struct Item {
    pub request: String,
    pub gold: Plan,
    pub catalog: Option<std::sync::Arc<Catalog>>,
}

pub fn items(traces: &[Trace]) -> Result<Vec<Item>, PlannerError> {
    traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let catalog = match &t.tools {
                None => None,
                Some(v) => Some(std::sync::Arc::new(Catalog::from_value(v).map_err(
                    |e| PlannerError::EvalData(format!("trace {}: tools: {e}", i + 1)),
                )?)),
            };
            Ok(Item {
                request: t.request.clone(),
                gold: t.plan(),
                catalog,
            })
        })
        .collect()
}

/// Plans are compared on calls (names and typed arguments, in order); spoken text is free.
pub fn same_calls(catalog: &Catalog, a: &Plan, gold: &Plan) -> bool {
    let gold = plansmith_core::validate::type_values(gold, catalog);
    a.calls == gold.calls
}

/// One item's constrained decode and verdict.
pub struct Judged {
    pub decoded: Decoded,
    pub correct: bool,
}

pub fn judge(planner: &Planner, item: &Item) -> Result<Judged, PlannerError> {
    let mut req = PlanRequest::new(item.request.clone());
    req.catalog = item.catalog.clone();
    let decoded = planner.decode(&req)?;
    let catalog = item.catalog.as_deref().unwrap_or(&planner.catalog);
    let correct = decoded.is_valid()
        && decoded
            .plan
            .as_ref()
            .is_some_and(|p| same_calls(catalog, p, &item.gold));
    Ok(Judged { decoded, correct })
}

/// [`judge`] the `index`th item of a trace file: a catalog of the trace's own that is too long
/// for the planner names the trace.
pub fn judge_trace(planner: &Planner, item: &Item, index: usize) -> Result<Judged, PlannerError> {
    judge(planner, item).map_err(|e| match e {
        PlannerError::CatalogTooLong { .. } if item.catalog.is_some() => {
            PlannerError::EvalData(format!("trace {}: {e}", index + 1))
        }
        e => e,
    })
}

pub fn scored(judged: &[Judged], mode: ConfidenceMode) -> Vec<Scored> {
    judged
        .iter()
        .map(|j| Scored {
            confidence: j.decoded.confidence(mode),
            correct: j.correct,
            valid: j.decoded.is_valid(),
        })
        .collect()
}

/// What the grammar buys: the same model decoding freely.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FreeMetrics {
    pub agreement: f64,
    /// Share of free outputs that parse and validate.
    pub valid: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalSummary {
    pub n: usize,
    pub agreement: f64,
    pub coverage: f64,
    pub silent_wrong: usize,
    pub escalation_rate: f64,
    pub invalid_emitted: usize,
    pub precision: f64,
    pub conf_floor: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free: Option<FreeMetrics>,
    /// Gate metrics at the floor refitted on this data per confidence mode (diagnostic: how
    /// well each mode separates right from wrong here).
    pub by_mode: Vec<(ConfidenceMode, GateMetrics)>,
    pub p50_latency_ms: f64,
}

pub fn evaluate(
    planner: &Planner,
    items: &[Item],
    with_free: bool,
    mut progress: impl FnMut(usize, usize),
) -> Result<(EvalSummary, Vec<Judged>), PlannerError> {
    let mut judged = Vec::with_capacity(items.len());
    let mut latencies = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let t = std::time::Instant::now();
        judged.push(judge_trace(planner, item, i)?);
        latencies.push(t.elapsed().as_secs_f64() * 1e3);
        progress(i + 1, items.len());
    }
    let mode = planner.settings.confidence;
    let floor = planner.settings.conf_floor;
    let m = gate_metrics(&scored(&judged, mode), floor);
    let by_mode = [
        ConfidenceMode::AllTokens,
        ConfidenceMode::ChosenTokens,
        ConfidenceMode::WeakestToken,
    ]
    .into_iter()
    .map(|mode| {
        let s = scored(&judged, mode);
        (mode, gate_metrics(&s, crate::calibrate::fit_floor(&s, 1.0)))
    })
    .collect();
    let free = if with_free {
        let mut sampler = Sampler::greedy();
        let (mut ok, mut valid) = (0usize, 0usize);
        for item in items {
            let d = planner.decode_free(&item.request, item.catalog.as_deref(), &mut sampler)?;
            let catalog = item.catalog.as_deref().unwrap_or(&planner.catalog);
            if d.is_valid() {
                valid += 1;
                if d.plan
                    .as_ref()
                    .is_some_and(|p| same_calls(catalog, p, &item.gold))
                {
                    ok += 1;
                }
            }
        }
        let n = items.len().max(1) as f64;
        Some(FreeMetrics {
            agreement: ok as f64 / n,
            valid: valid as f64 / n,
        })
    } else {
        None
    };
    latencies.sort_by(f64::total_cmp);
    let p50 = latencies.get(latencies.len() / 2).copied().unwrap_or(0.0);
    Ok((
        EvalSummary {
            n: m.n,
            agreement: m.agreement,
            coverage: m.coverage,
            silent_wrong: m.silent_wrong,
            escalation_rate: m.escalation_rate,
            invalid_emitted: m.invalid_emitted,
            precision: m.precision,
            conf_floor: floor,
            free,
            by_mode,
            p50_latency_ms: p50,
        },
        judged,
    ))
}

/// The coverage/precision curve of a judged run as SVG.
pub fn curve_svg(planner: &Planner, judged: &[Judged], title: &str) -> String {
    let s = scored(judged, planner.settings.confidence);
    crate::calibrate::curve_svg(&coverage_curve(&s), planner.settings.conf_floor, title)
}

/// One row of a cascade evaluation: a hop (or the teacher, or nobody) and the requests it
/// answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HopEval {
    pub hop: String,
    /// Requests that reached this hop (decoded by it; the teacher's: asked).
    pub reached: usize,
    pub answered: usize,
    /// Answered, and equal to the reference.
    pub correct: usize,
    /// Answered, and not equal to the reference: the wrong plans this hop let out.
    pub silent_wrong: usize,
    /// Share of all requests this hop answered.
    pub coverage: f64,
    /// Correct among answered (1 when it answered none).
    pub accuracy: f64,
    /// Latency of the requests it answered (end to end, every hop before it included).
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// A cascade on traces: per hop, and overall.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CascadeEval {
    pub n: usize,
    /// The model hops in order, then `teacher` when one answered anything.
    pub hops: Vec<HopEval>,
    /// Requests no hop and no teacher answered.
    pub unanswered: usize,
    /// Share answered by a model hop: the teacher calls saved against a teacher-only setup.
    pub model_coverage: f64,
    /// Wrong plans let out, by any hop or the teacher, over all requests.
    pub silent_wrong_rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Plan every item through the whole cascade (teacher and harvest included) and judge the plan
/// that came out against the reference.
pub fn evaluate_cascade(
    planner: &Planner,
    items: &[Item],
    mut progress: impl FnMut(usize, usize),
) -> Result<CascadeEval, PlannerError> {
    let names: Vec<String> = planner
        .hops()
        .iter()
        .enumerate()
        .map(|(i, h)| h.hop_name().map_or(format!("hop{}", i + 1), str::to_string))
        .collect();
    let mut rows: Vec<(HopEval, Vec<f64>)> = names
        .iter()
        .chain(std::iter::once(&"teacher".to_string()))
        .map(|h| {
            let row = HopEval {
                hop: h.clone(),
                ..Default::default()
            };
            (row, Vec::new())
        })
        .collect();
    let has_teacher = planner.hops().last().is_some_and(|h| h.has_teacher());
    let (mut all, mut unanswered, mut wrong) = (Vec::new(), 0, 0);
    for (i, item) in items.iter().enumerate() {
        let mut req = PlanRequest::new(item.request.clone());
        req.catalog = item.catalog.clone();
        let o = planner.plan_request(&req)?;
        let ms = o.latency.as_secs_f64() * 1e3;
        all.push(ms);
        let reached = o.hops.len().max(1);
        for row in rows.iter_mut().take(reached) {
            row.0.reached += 1;
        }
        // A plain planner (no hop names) answers as the first and only hop.
        let answered_by = match (&o.source, o.hop.as_deref()) {
            (crate::planner::Source::Model, Some(h)) => names.iter().position(|n| n == h),
            (crate::planner::Source::Model, None) => Some(0),
            (crate::planner::Source::Teacher, _) => Some(names.len()),
            (crate::planner::Source::None, _) => None,
        };
        let passed_every_hop = match o.hops.is_empty() {
            true => o.escalated,
            false => o.hops.len() == names.len() && o.hops.iter().all(|h| !h.accepted),
        };
        if passed_every_hop && has_teacher {
            rows[names.len()].0.reached += 1;
        }
        match answered_by {
            None => unanswered += 1,
            Some(h) => {
                let catalog = item.catalog.as_deref().unwrap_or(&planner.catalog);
                let plan = Plan {
                    calls: o.calls.clone(),
                    spoken_text: None,
                };
                let ok = same_calls(catalog, &plan, &item.gold);
                let row = &mut rows[h];
                row.0.answered += 1;
                row.0.correct += ok as usize;
                row.0.silent_wrong += !ok as usize;
                wrong += !ok as usize;
                row.1.push(ms);
            }
        }
        progress(i + 1, items.len());
    }
    let n = items.len();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let mut hops = Vec::new();
    for (mut row, mut lat) in rows {
        if row.hop == "teacher" && row.reached == 0 {
            continue;
        }
        lat.sort_by(f64::total_cmp);
        row.coverage = ratio(row.answered, n);
        row.accuracy = if row.answered == 0 {
            1.0
        } else {
            ratio(row.correct, row.answered)
        };
        row.p50_ms = percentile(&lat, 0.5);
        row.p99_ms = percentile(&lat, 0.99);
        hops.push(row);
    }
    all.sort_by(f64::total_cmp);
    let model_answered: usize = hops
        .iter()
        .filter(|h| h.hop != "teacher")
        .map(|h| h.answered)
        .sum();
    Ok(CascadeEval {
        n,
        hops,
        unanswered,
        model_coverage: ratio(model_answered, n),
        silent_wrong_rate: ratio(wrong, n),
        p50_ms: percentile(&all, 0.5),
        p99_ms: percentile(&all, 0.99),
    })
}
