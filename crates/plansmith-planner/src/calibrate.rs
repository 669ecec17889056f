//! The confidence floor: fitted on a calibration split, judged on a separate test split.

use serde::{Deserialize, Serialize};

/// One planned request, as the gate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub confidence: f32,
    /// The model's plan equals the reference plan.
    pub correct: bool,
    /// The model's plan parsed and validated (a constrained decode should make this always true).
    pub valid: bool,
}

/// The floor of a planner that accepts no plan of its own: confidences are log-probabilities
/// (<= 0), so none reaches it. An uncertified guarantee, a planner saved before its calibration
/// and an empty calibration split hold it; the gate names it instead of printing the number.
pub const ACCEPTS_NOTHING: f32 = f32::MAX;

/// Fit the lowest floor whose accepted plans (valid, confidence >= floor) reach
/// `target_precision` on `calibration`. With 1.0 that is mixle's rule: no wrong plan accepted.
pub fn fit_floor(calibration: &[Scored], target_precision: f64) -> f32 {
    let mut valid: Vec<&Scored> = calibration.iter().filter(|s| s.valid).collect();
    if valid.is_empty() {
        return ACCEPTS_NOTHING;
    }
    valid.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let (mut accepted, mut correct) = (0usize, 0usize);
    let mut best = None;
    let mut i = 0;
    while i < valid.len() {
        // Accept every item tied at this confidence together.
        let c = valid[i].confidence;
        while i < valid.len() && valid[i].confidence == c {
            accepted += 1;
            correct += valid[i].correct as usize;
            i += 1;
        }
        if correct as f64 >= target_precision * accepted as f64 {
            best = Some(c);
        } else if target_precision >= 1.0 {
            break;
        }
    }
    match best {
        Some(c) => c,
        // Even the most confident plan is wrong: accept nothing seen so far.
        None => next_up(valid[0].confidence),
    }
}

fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return f32::MAX;
    }
    let bits = x.to_bits();
    let next = if x >= 0.0 { bits + 1 } else { bits - 1 };
    if x == 0.0 {
        f32::from_bits(1)
    } else {
        f32::from_bits(next)
    }
}

/// What the gate does on a test split at a given floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateMetrics {
    pub n: usize,
    /// Model plan equals the reference (before the gate).
    pub agreement: f64,
    /// Share of requests the gate lets through without escalating.
    pub coverage: f64,
    /// Accepted plans that are wrong (count): the number that must be zero.
    pub silent_wrong: usize,
    /// Correct among accepted.
    pub precision: f64,
    pub escalation_rate: f64,
    /// Accepted plans that failed validation (the constraint makes this zero).
    pub invalid_emitted: usize,
}

pub fn gate_metrics(items: &[Scored], floor: f32) -> GateMetrics {
    let n = items.len();
    let accepted: Vec<&Scored> = items
        .iter()
        .filter(|s| s.valid && s.confidence >= floor)
        .collect();
    let correct_accepted = accepted.iter().filter(|s| s.correct).count();
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    GateMetrics {
        n,
        agreement: ratio(items.iter().filter(|s| s.correct).count(), n),
        coverage: ratio(accepted.len(), n),
        silent_wrong: accepted.len() - correct_accepted,
        precision: if accepted.is_empty() {
            1.0
        } else {
            ratio(correct_accepted, accepted.len())
        },
        escalation_rate: ratio(n - accepted.len(), n),
        invalid_emitted: accepted.iter().filter(|s| !s.valid).count(),
    }
}

/// Coverage and precision at every distinct floor, for the coverage/precision curve.
pub fn coverage_curve(items: &[Scored]) -> Vec<(f32, f64, f64)> {
    let mut floors: Vec<f32> = items
        .iter()
        .filter(|s| s.valid)
        .map(|s| s.confidence)
        .collect();
    floors.sort_by(|a, b| b.total_cmp(a));
    floors.dedup();
    floors
        .into_iter()
        .map(|f| {
            let m = gate_metrics(items, f);
            (f, m.coverage, m.precision)
        })
        .collect()
}

/// An SVG chart of precision against coverage as the floor moves, with the fitted floor marked.
pub fn curve_svg(curve: &[(f32, f64, f64)], floor: f32, title: &str) -> String {
    use crate::chart::{polyline, svg, x_at, y_at, Frame, W};
    let y_min = curve.iter().map(|p| p.2).fold(1.0f64, f64::min).min(0.9);
    let at = |c: f64, p: f64| (x_at(c, 0.0, 1.0), y_at(p, y_min, 1.0));
    let mut body = polyline(curve.iter().map(|(_, c, p)| at(*c, *p)));
    if let Some((_, c, p)) = curve.iter().rev().find(|(f, _, _)| *f >= floor) {
        let (x, y) = at(*c, *p);
        body.push_str(&format!(
            r##"
<circle cx="{x:.1}" cy="{y:.1}" r="5" fill="#d62728"/><text x="{:.1}" y="{:.1}" font-size="12">floor {floor:.3}: coverage {c:.3}, precision {p:.3}</text>"##,
            x.min(W - 260.0),
            y - 10.0,
        ));
    }
    let frame = Frame {
        title,
        x_label: "coverage (share of requests answered without escalation)",
        y_label: "precision of accepted plans",
        x_ends: ("0".into(), "1".into()),
        y_ends: (format!("{y_min:.2}"), "1.0".into()),
    };
    svg(&frame, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(confidence: f32, correct: bool) -> Scored {
        Scored {
            confidence,
            correct,
            valid: true,
        }
    }

    #[test]
    fn floor_sits_above_every_wrong_plan() {
        let cal = [
            s(-0.01, true),
            s(-0.02, true),
            s(-0.3, false),
            s(-0.2, true),
            s(-0.5, true),
        ];
        let floor = fit_floor(&cal, 1.0);
        assert_eq!(floor, -0.2);
        let m = gate_metrics(&cal, floor);
        assert_eq!(m.silent_wrong, 0);
        assert_eq!(m.coverage, 0.6);
    }

    #[test]
    fn all_right_accepts_all_and_all_wrong_accepts_none() {
        assert_eq!(fit_floor(&[s(-0.1, true), s(-0.4, true)], 1.0), -0.4);
        let f = fit_floor(&[s(-0.1, false), s(-0.4, true)], 1.0);
        assert!(f > -0.1);
        assert_eq!(gate_metrics(&[s(-0.1, false)], f).coverage, 0.0);
    }

    #[test]
    fn lower_precision_targets_accept_more() {
        let cal: Vec<Scored> = (0..100)
            .map(|i| s(-(i as f32) / 100.0, i % 10 != 5))
            .collect();
        let strict = fit_floor(&cal, 1.0);
        let loose = fit_floor(&cal, 0.9);
        assert!(loose < strict);
        assert!(gate_metrics(&cal, loose).precision >= 0.9);
    }
}
