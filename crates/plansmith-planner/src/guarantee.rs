//! A confidence floor that carries a stated guarantee: with probability at least `1 - delta`
//! over the draw of the calibration split, the rate of wrong plans among the plans the floor
//! accepts is at most `alpha`.
//!
//! The method is Learn then Test (Angelopoulos, Bates, Candès, Jordan & Lei, "Learn then Test:
//! Calibrating Predictive Algorithms to Achieve Risk Control", 2021) over a fixed family of
//! candidate floors chosen before any confidence is seen ([`CANDIDATE_FLOORS`]). For each
//! candidate, the plans it accepts on calibration and the wrong ones among them give an exact
//! one-sided Clopper–Pearson upper bound (Clopper & Pearson, Biometrika 1934) on its
//! wrong-among-accepted rate at level `delta / G`, `G` the number of candidates: given how many
//! plans a fixed floor accepts, its wrong ones are binomial with exactly that rate. By the union
//! bound every candidate's bound holds at once with probability `1 - delta`, so the floor chosen
//! among the certified ones — the one that accepts the most — keeps its bound, however the
//! choice was made. A search over the observed confidences (selection with guaranteed risk,
//! Geifman & El-Yaniv 2017) splits delta less but was measured to miss certifiable floors when
//! a wrong plan sits among the most confident (`tests/guarantee.rs`), and picks floors from
//! the data the bound is computed on.
//!
//! The guarantee assumes what every calibration method assumes: future requests are drawn like
//! the calibration ones. Requests phrased unlike the calibration split (hand-written ones
//! against a generated split) are outside it, and the results pages measure them separately.

use serde::{Deserialize, Serialize};

use crate::calibrate::Scored;

/// How a planner's floor is chosen from its calibration split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum FloorRule {
    /// The lowest floor whose accepted calibration plans reach `precision` (1.0 is mixle's
    /// rule: no wrong plan accepted on calibration). No statement about fresh requests.
    Empirical { precision: f64 },
    /// Wrong plans among accepted ones at most `alpha`, with probability at least `1 - delta`.
    Guaranteed { alpha: f64, delta: f64 },
}

impl FloorRule {
    /// The default guarantee: at most 1% wrong among accepted plans, with 95% confidence.
    pub const DEFAULT_GUARANTEE: FloorRule = FloorRule::Guaranteed {
        alpha: 0.01,
        delta: 0.05,
    };

    /// The guarantee stated as people say it: at most `max_wrong` wrong among accepted plans,
    /// `certainty` sure. Delta is rounded so 0.95 is stored as 0.05, not 0.050000000000000044.
    pub fn guaranteed(max_wrong: f64, certainty: f64) -> FloorRule {
        FloorRule::Guaranteed {
            alpha: max_wrong,
            delta: ((1.0 - certainty) * 1e12).round() / 1e12,
        }
    }

    /// Mixle's rule: no wrong plan accepted on the calibration split.
    pub const ZERO_WRONG: FloorRule = FloorRule::Empirical { precision: 1.0 };

    /// Reject settings no floor can honour, naming the setting.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            FloorRule::Empirical { precision } if !(precision > 0.0 && precision <= 1.0) => Err(
                format!("target precision must be in (0, 1], got {precision}"),
            ),
            FloorRule::Guaranteed { alpha, .. } if !(alpha > 0.0 && alpha < 1.0) => Err(format!(
                "the wrong-plan rate alpha must be in (0, 1), got {alpha}"
            )),
            FloorRule::Guaranteed { delta, .. } if !(delta > 0.0 && delta < 1.0) => Err(format!(
                "delta (one minus the certainty) must be in (0, 1), got {delta}"
            )),
            _ => Ok(()),
        }
    }
}

/// The floor a rule chose on a calibration split, and what it can say about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorFit {
    #[serde(flatten)]
    pub rule: FloorRule,
    pub floor: f32,
    /// Calibration requests the floor was fitted on.
    pub calibration: usize,
    /// Calibration plans the floor accepts, and the wrong ones among them.
    pub accepted: usize,
    pub wrong: usize,
    /// Guaranteed rule: the upper confidence bound on wrong-among-accepted at the chosen floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_bound: Option<f64>,
    /// Guaranteed rule: false when no floor could be certified; the planner then accepts no
    /// plan of its own and escalates every request.
    pub certified: bool,
    /// Guaranteed rule: the fewest accepted calibration plans, none wrong, that could certify
    /// `alpha` at this split's size (what a split too small to certify lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<usize>,
    /// Guaranteed rule, not certified: the smallest of 2%, 5%, 10%, 20% that this split does
    /// certify, with the share of calibration requests that floor accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would_certify: Option<(f64, f64)>,
    /// How many confidence modes the floor was chosen among on this split (1: the planner's
    /// own). With more, a guaranteed rule shares delta among them, so the promise holds for
    /// whichever was chosen.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub modes_tried: usize,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl FloorFit {
    /// One line for people: what the floor promises and what it costs.
    pub fn summary(&self) -> String {
        let coverage = if self.calibration == 0 {
            0.0
        } else {
            self.accepted as f64 / self.calibration as f64
        };
        match self.rule {
            FloorRule::Empirical { precision } => format!(
                "floor {:.5}: precision >= {precision} on calibration ({} of {} accepted, {} wrong); no guarantee on fresh requests",
                self.floor, self.accepted, self.calibration, self.wrong
            ),
            FloorRule::Guaranteed { alpha, delta } if self.certified => format!(
                "floor {:.5}: wrong among accepted <= {:.4} with {:.0}% confidence (bound {:.4}, Clopper-Pearson, Learn then Test{}); coverage {:.3} on calibration ({} of {}, {} wrong)",
                self.floor,
                alpha,
                (1.0 - delta) * 100.0,
                self.risk_bound.unwrap_or(1.0),
                if self.modes_tried > 1 {
                    format!(" over {} confidence scores", self.modes_tried)
                } else {
                    String::new()
                },
                coverage,
                self.accepted,
                self.calibration,
                self.wrong
            ),
            FloorRule::Guaranteed { alpha, delta } => {
                let needed = self.needed.unwrap_or(usize::MAX);
                let why = if self.calibration < needed {
                    format!("that needs at least {needed} accepted plans with none wrong")
                } else {
                    "no floor keeps the wrong plans that rare among those it accepts: the planner is not yet right often enough where it is most confident".to_string()
                };
                let instead = match self.would_certify {
                    Some((rate, coverage)) => format!(
                        "; --max-wrong {rate} would answer {:.1}% of them",
                        coverage * 100.0
                    ),
                    None => String::new(),
                };
                format!(
                    "cannot certify wrong among accepted <= {alpha} with {:.0}% confidence on {} calibration requests: {why}; the planner will escalate every request (add calibration traces, train a better planner, or allow a larger rate){instead}",
                    (1.0 - delta) * 100.0,
                    self.calibration,
                )
            }
        }
    }
}

/// Fit the floor under `rule` on scored calibration requests.
pub fn fit(calibration: &[Scored], rule: FloorRule) -> FloorFit {
    let thresholds = Thresholds::new(calibration);
    match rule {
        FloorRule::Empirical { precision } => {
            let floor = crate::calibrate::fit_floor(calibration, precision);
            let (accepted, wrong) = thresholds.at_floor(floor);
            FloorFit {
                rule,
                floor,
                calibration: calibration.len(),
                accepted,
                wrong,
                risk_bound: None,
                certified: true,
                needed: None,
                would_certify: None,
                modes_tried: 1,
            }
        }
        FloorRule::Guaranteed { alpha, delta } => {
            learn_then_test(&thresholds, calibration.len(), rule, alpha, delta)
        }
    }
}

/// Fit a floor under `rule` for each of several confidence scores of the same calibration
/// plans (one `Vec<Scored>` per score, in the same order) and keep the score whose floor
/// accepts the most plans; ties go to the earlier score. A guaranteed rule tests every score's
/// candidate floors at `delta / scores`, so by the union bound the chosen floor keeps the
/// stated guarantee although it was chosen on the data. Returns the chosen index and its fit
/// (with no scores: index 0 and the fit of an empty split, which accepts nothing).
pub fn fit_best(scores: &[Vec<Scored>], rule: FloorRule) -> (usize, FloorFit) {
    let k = scores.len();
    let per_score = match rule {
        FloorRule::Guaranteed { alpha, delta } if k > 1 => FloorRule::Guaranteed {
            alpha,
            delta: delta / k as f64,
        },
        other => other,
    };
    let mut best: Option<(usize, FloorFit)> = None;
    for (i, scored) in scores.iter().enumerate() {
        let mut f = fit(scored, per_score);
        f.rule = rule;
        f.modes_tried = k;
        let better = match &best {
            None => true,
            Some((_, b)) => (f.certified, f.accepted) > (b.certified, b.accepted),
        };
        if better {
            best = Some((i, f));
        }
    }
    best.unwrap_or_else(|| (0, fit(&[], rule)))
}

/// Distinct confidences of the valid calibration plans, highest first, with the accepted and
/// wrong counts of a floor at each.
struct Thresholds {
    levels: Vec<(f32, usize, usize)>,
}

impl Thresholds {
    fn new(items: &[Scored]) -> Self {
        let mut valid: Vec<&Scored> = items.iter().filter(|s| s.valid).collect();
        valid.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
        let mut levels: Vec<(f32, usize, usize)> = Vec::new();
        let (mut accepted, mut wrong) = (0, 0);
        for s in valid {
            accepted += 1;
            wrong += !s.correct as usize;
            match levels.last_mut() {
                Some(last) if last.0 == s.confidence => *last = (s.confidence, accepted, wrong),
                _ => levels.push((s.confidence, accepted, wrong)),
            }
        }
        Thresholds { levels }
    }

    fn at_floor(&self, floor: f32) -> (usize, usize) {
        match self.levels.partition_point(|l| l.0 >= floor) {
            0 => (0, 0),
            i => (self.levels[i - 1].1, self.levels[i - 1].2),
        }
    }
}

/// The floors the guaranteed rule may choose from, highest first: 0 and -10^(e/8) for e from
/// -48 to 10 (eight per decade from -0.000001 to about -17.8). Confidences are mean or least
/// log-probabilities, so this spans a plan forced token by token to one the model doubted
/// throughout; a planner needs no finer step than a factor of 1.33 in its doubt.
pub fn candidate_floors() -> Vec<f32> {
    std::iter::once(0.0)
        .chain((-48..=10).map(|e| -(10f64.powf(e as f64 / 8.0)) as f32))
        .collect()
}

/// Number of candidate floors (what delta is shared among).
pub const CANDIDATE_FLOORS: usize = 60;

fn learn_then_test(t: &Thresholds, n: usize, rule: FloorRule, alpha: f64, delta: f64) -> FloorFit {
    let level = delta / CANDIDATE_FLOORS as f64;
    let needed = zero_error_count(alpha, level);
    let mut best: Option<(f32, usize, usize, f64)> = None;
    for floor in candidate_floors() {
        let (accepted, wrong) = t.at_floor(floor);
        let bound = clopper_pearson_upper(wrong as u64, accepted as u64, level);
        if accepted > 0 && bound <= alpha && best.is_none_or(|b| accepted > b.1) {
            best = Some((floor, accepted, wrong, bound));
        }
    }
    match best {
        Some((floor, accepted, wrong, bound)) => FloorFit {
            rule,
            floor,
            calibration: n,
            accepted,
            wrong,
            risk_bound: Some(bound),
            certified: true,
            needed: Some(needed),
            would_certify: None,
            modes_tried: 1,
        },
        None => FloorFit {
            rule,
            floor: crate::calibrate::ACCEPTS_NOTHING,
            calibration: n,
            accepted: 0,
            wrong: 0,
            risk_bound: None,
            certified: false,
            needed: Some(needed),
            would_certify: [0.02, 0.05, 0.1, 0.2]
                .into_iter()
                .filter(|&rate| rate > alpha)
                .find_map(|rate| {
                    let fit = learn_then_test(t, n, rule, rate, delta);
                    let coverage = fit.accepted as f64 / n.max(1) as f64;
                    fit.certified.then_some((rate, coverage))
                }),
            modes_tried: 1,
        },
    }
}

/// The fewest trials, none failed, whose Clopper–Pearson bound at `level` reaches `alpha`:
/// the smallest n with (1 - alpha)^n <= level.
pub fn zero_error_count(alpha: f64, level: f64) -> usize {
    (level.ln() / (1.0 - alpha).ln()).ceil().max(1.0) as usize
}

/// The exact one-sided upper confidence bound for a binomial rate: the largest p with
/// P(Binomial(n, p) <= k) >= level. With n = 0 nothing is known and the bound is 1.
pub fn clopper_pearson_upper(k: u64, n: u64, level: f64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    if k == 0 {
        // Closed form: (1 - p)^n = level.
        return 1.0 - level.powf(1.0 / n as f64);
    }
    // P(Bin(n, p) <= k) falls as p grows: bisect on it (60 halvings of [0, 1] reach f64's
    // resolution).
    let (mut lo, mut hi) = (k as f64 / n as f64, 1.0f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if binomial_cdf(k, n, mid) >= level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// P(Binomial(n, p) <= k), summed in log space so large n does not underflow.
pub fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if k >= n { 1.0 } else { 0.0 };
    }
    let (lp, lq) = (p.ln(), (-p).ln_1p());
    let mut log_choose = 0.0f64;
    let mut terms = Vec::with_capacity(k.min(n) as usize + 1);
    for i in 0..=k.min(n) {
        if i > 0 {
            log_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        terms.push(log_choose + i as f64 * lp + (n - i) as f64 * lq);
    }
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum();
    (max + sum.ln()).exp().min(1.0)
}
