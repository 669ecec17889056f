//! Scores, the JSON report, per-item records, a Markdown table and an SVG bar chart.
//!
//! Accuracies are fractions in `[0, 1]` in JSON; tables and charts show percentages, as the
//! BFCL leaderboard does (anchors are given in percent).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checker::{check_item, CheckOptions, Verdict};
use crate::data::{BfclCall, BfclItem, Message, NON_LIVE_AST_CATEGORIES};
use crate::error::EvalError;

/// A published score to place results beside.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Anchor {
    pub name: &'static str,
    /// Non-live AST accuracy in percent.
    pub non_live_ast_percent: f64,
}

/// Qwen3-0.6B (FC), non-live AST. Source: BFCL v4 leaderboard
/// (<https://gorilla.cs.berkeley.edu/leaderboard.html>).
pub const ANCHOR_QWEN3_0_6B: Anchor = Anchor {
    name: "Qwen3-0.6B",
    non_live_ast_percent: 71.79,
};

/// Hammer2.1-0.5b (FC), non-live AST. Source: BFCL v4 leaderboard
/// (<https://gorilla.cs.berkeley.edu/leaderboard.html>).
pub const ANCHOR_HAMMER2_1_0_5B: Anchor = Anchor {
    name: "Hammer2.1-0.5b",
    non_live_ast_percent: 65.98,
};

/// Llama-3.2-1B-Instruct (FC), non-live AST. Source: BFCL v4 leaderboard
/// (<https://gorilla.cs.berkeley.edu/leaderboard.html>).
pub const ANCHOR_LLAMA_3_2_1B: Anchor = Anchor {
    name: "Llama-3.2-1B",
    non_live_ast_percent: 38.38,
};

/// The published anchors, best first.
pub const PUBLISHED_ANCHORS: [Anchor; 3] = [
    ANCHOR_QWEN3_0_6B,
    ANCHOR_HAMMER2_1_0_5B,
    ANCHOR_LLAMA_3_2_1B,
];

/// Score of one category.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CategoryScore {
    pub n: usize,
    pub correct: usize,
    /// `correct / n` (0 when `n == 0`).
    pub accuracy: f64,
    /// For a gated subject: answers the gate let through, and those of them that are wrong
    /// (the silent wrong answers a deployment pays for). Absent for subjects without a gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateScore>,
}

/// What a confidence gate let through in one category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateScore {
    pub accepted: usize,
    pub accepted_wrong: usize,
}

impl CategoryScore {
    pub fn new(n: usize, correct: usize) -> Self {
        CategoryScore {
            n,
            correct,
            accuracy: if n == 0 {
                0.0
            } else {
                correct as f64 / n as f64
            },
            gate: None,
        }
    }
}

/// Scores decoded outputs (`None` = not decodable) against their items with BFCL's rules.
pub fn score_category(
    items: &[BfclItem],
    outputs: &[Option<Vec<BfclCall>>],
) -> Result<CategoryScore, EvalError> {
    score_category_with(items, outputs, &CheckOptions::default())
}

/// [`score_category`] with checker options.
pub fn score_category_with(
    items: &[BfclItem],
    outputs: &[Option<Vec<BfclCall>>],
    opts: &CheckOptions,
) -> Result<CategoryScore, EvalError> {
    if items.len() != outputs.len() {
        return Err(EvalError::Mismatch(format!(
            "{} items but {} outputs",
            items.len(),
            outputs.len()
        )));
    }
    let correct = items
        .iter()
        .zip(outputs)
        .filter(|(item, out)| check_item(item, out.as_deref(), opts).valid)
        .count();
    Ok(CategoryScore::new(items.len(), correct))
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p90: f64,
}

impl LatencySummary {
    /// Nearest-rank percentiles (0 for no samples).
    pub fn from_durations(latencies: &[Duration]) -> Self {
        let mut ms: Vec<f64> = latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        LatencySummary {
            p50: percentile(&ms, 0.5),
            p90: percentile(&ms, 0.9),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The evaluation report:
/// `{"categories": {name: {n, correct, accuracy}}, "non_live_ast": mean|null, "latency_ms": {p50, p90}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub categories: BTreeMap<String, CategoryScore>,
    /// Mean accuracy of those of simple_python, multiple, parallel, parallel_multiple present.
    pub non_live_ast: Option<f64>,
    pub latency_ms: LatencySummary,
}

impl EvalReport {
    pub fn new(categories: BTreeMap<String, CategoryScore>, latencies: &[Duration]) -> Self {
        let present: Vec<f64> = NON_LIVE_AST_CATEGORIES
            .iter()
            .filter_map(|c| categories.get(*c))
            .map(|s| s.accuracy)
            .collect();
        let non_live_ast = if present.is_empty() {
            None
        } else {
            Some(present.iter().sum::<f64>() / present.len() as f64)
        };
        EvalReport {
            categories,
            non_live_ast,
            latency_ms: LatencySummary::from_durations(latencies),
        }
    }

    /// Builds the report from per-item records.
    pub fn from_records(records: &[ItemRecord]) -> Self {
        let mut counts: BTreeMap<String, CategoryScore> = BTreeMap::new();
        for r in records {
            let score = counts
                .entry(r.category.clone())
                .or_insert(CategoryScore::new(0, 0));
            score.n += 1;
            score.correct += usize::from(r.valid);
            if let Some(accepted) = r.accepted {
                let gate = score.gate.get_or_insert(GateScore {
                    accepted: 0,
                    accepted_wrong: 0,
                });
                gate.accepted += usize::from(accepted);
                gate.accepted_wrong += usize::from(accepted && !r.valid);
            }
        }
        let categories = counts
            .into_iter()
            .map(|(c, s)| {
                let mut score = CategoryScore::new(s.n, s.correct);
                score.gate = s.gate;
                (c, score)
            })
            .collect();
        let lat: Vec<Duration> = records
            .iter()
            .map(|r| Duration::from_secs_f64(r.latency_ms.max(0.0) / 1e3))
            .collect();
        EvalReport::new(categories, &lat)
    }

    pub fn to_json(&self) -> Result<String, EvalError> {
        serde_json::to_string_pretty(self).map_err(|source| EvalError::Serialize {
            what: "report".into(),
            source,
        })
    }

    /// A Markdown table: one row per category, the non-live AST summary, latency, and the
    /// anchors for comparison.
    pub fn to_markdown(&self, subject: &str, anchors: &[Anchor]) -> String {
        let mut s = String::new();
        let gated = self.categories.values().any(|c| c.gate.is_some());
        if gated {
            let _ = writeln!(
                s,
                "| category | n | correct | accuracy | accepted by the gate | accepted and wrong |"
            );
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
        } else {
            let _ = writeln!(s, "| category | n | correct | accuracy |");
            let _ = writeln!(s, "|---|---:|---:|---:|");
        }
        for (c, sc) in &self.categories {
            let gate = match (gated, sc.gate) {
                (true, Some(g)) => format!(" {} | {} |", g.accepted, g.accepted_wrong),
                (true, None) => " | |".to_string(),
                (false, _) => String::new(),
            };
            let _ = writeln!(
                s,
                "| {c} | {} | {} | {:.2}% |{gate}",
                sc.n,
                sc.correct,
                sc.accuracy * 100.0
            );
        }
        s.push('\n');
        let _ = writeln!(s, "| model | non-live AST |");
        let _ = writeln!(s, "|---|---:|");
        let ours = self
            .non_live_ast
            .map_or_else(|| "n/a".to_string(), |a| format!("{:.2}%", a * 100.0));
        let _ = writeln!(s, "| **{}** (this run) | **{ours}** |", escape_md(subject));
        for a in anchors {
            let _ = writeln!(
                s,
                "| {} (BFCL v4 leaderboard) | {:.2}% |",
                a.name, a.non_live_ast_percent
            );
        }
        let _ = writeln!(
            s,
            "\nLatency: p50 {:.1} ms, p90 {:.1} ms.",
            self.latency_ms.p50, self.latency_ms.p90
        );
        s
    }

    /// A horizontal bar chart (SVG) of non-live AST accuracy, this run beside the anchors.
    /// Without a non-live AST score, the per-category accuracies are charted instead.
    pub fn to_svg(&self, subject: &str, anchors: &[Anchor]) -> String {
        let mut bars: Vec<(String, f64, bool)> = Vec::new();
        let title;
        if let Some(a) = self.non_live_ast {
            title = "BFCL v4 non-live AST accuracy (%)";
            bars.push((format!("{subject} (this run)"), a * 100.0, true));
            for an in anchors {
                bars.push((an.name.to_string(), an.non_live_ast_percent, false));
            }
        } else {
            title = "BFCL accuracy by category (%)";
            for (c, sc) in &self.categories {
                bars.push((c.clone(), sc.accuracy * 100.0, true));
            }
        }
        svg_bar_chart(title, &bars)
    }
}

fn escape_md(s: &str) -> String {
    s.replace('|', "\\|")
}

fn escape_xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A hand-written horizontal bar chart; values in percent (0–100), `highlight` bars are drawn
/// in the accent colour.
pub fn svg_bar_chart(title: &str, bars: &[(String, f64, bool)]) -> String {
    let label_w = 220.0;
    let plot_w = 400.0;
    let bar_h = 22.0;
    let gap = 10.0;
    let top = 40.0;
    let width = label_w + plot_w + 70.0;
    let height = top + bars.len() as f64 * (bar_h + gap) + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape_xml(title)
    );
    for tick in [0, 25, 50, 75, 100] {
        let x = label_w + plot_w * f64::from(tick) / 100.0;
        let y2 = height - 25.0;
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{top}" x2="{x}" y2="{y2}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle" fill="#666">{tick}</text>"##,
            y2 + 15.0
        );
    }
    for (i, (label, value, highlight)) in bars.iter().enumerate() {
        let y = top + i as f64 * (bar_h + gap);
        let v = if value.is_finite() {
            value.clamp(0.0, 100.0)
        } else {
            0.0
        };
        let w = plot_w * v / 100.0;
        let fill = if *highlight { "#d9480f" } else { "#868e96" };
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y + bar_h * 0.7,
            escape_xml(label)
        );
        let _ = writeln!(
            s,
            r#"<rect x="{label_w}" y="{y}" width="{w:.1}" height="{bar_h}" fill="{fill}"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}">{value:.2}</text>"#,
            label_w + w + 5.0,
            y + bar_h * 0.7
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One evaluated item, written as one JSONL line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    pub id: String,
    pub category: String,
    /// The question (turns of messages) as given to the subject.
    pub input: Vec<Vec<Message>>,
    /// The subject's raw output text.
    pub output: String,
    /// The calls parsed from the output (`null` when the output could not be decoded).
    pub calls: Option<Vec<BfclCall>>,
    pub valid: bool,
    pub error_type: Option<String>,
    /// Why the verdict is what it is (`ok`, or the checker's error).
    pub reason: String,
    pub latency_ms: f64,
    /// Whether a gated subject's gate let the answer through (absent without a gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// A gated subject's confidence in its answer (absent without a gate, or with no answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
}

impl ItemRecord {
    pub fn new(
        item: &BfclItem,
        output: String,
        calls: Option<Vec<BfclCall>>,
        verdict: &Verdict,
        latency: Duration,
    ) -> Self {
        ItemRecord {
            id: item.id.clone(),
            category: item.category.clone(),
            input: item.question.clone(),
            output,
            calls,
            valid: verdict.valid,
            error_type: verdict.error_type.clone(),
            reason: verdict.reason(),
            latency_ms: latency.as_secs_f64() * 1e3,
            accepted: None,
            confidence: None,
        }
    }

    pub fn to_jsonl_line(&self) -> Result<String, EvalError> {
        serde_json::to_string(self).map_err(|source| EvalError::Serialize {
            what: format!("record {}", self.id),
            source,
        })
    }
}

/// Records as JSONL text (one line each, trailing newline).
pub fn records_to_jsonl(records: &[ItemRecord]) -> Result<String, EvalError> {
    let mut s = String::new();
    for r in records {
        s.push_str(&r.to_jsonl_line()?);
        s.push('\n');
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_shape_and_mean() {
        let mut cats = BTreeMap::new();
        cats.insert("simple_python".to_string(), CategoryScore::new(4, 3));
        cats.insert("parallel".to_string(), CategoryScore::new(2, 1));
        cats.insert("irrelevance".to_string(), CategoryScore::new(10, 10));
        let lat: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let r = EvalReport::new(cats, &lat);
        assert!((r.non_live_ast.unwrap() - 0.625).abs() < 1e-12);
        assert_eq!(r.latency_ms.p50, 5.0);
        assert_eq!(r.latency_ms.p90, 9.0);
        let v: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert_eq!(v["categories"]["parallel"]["correct"], 1);
        assert_eq!(v["categories"]["simple_python"]["accuracy"], 0.75);
        assert!(v["latency_ms"]["p50"].is_number());
        let md = r.to_markdown("tiny|planner", &PUBLISHED_ANCHORS);
        assert!(md.contains("| simple_python | 4 | 3 | 75.00% |"), "{md}");
        assert!(md.contains("62.50%") && md.contains("71.79%") && md.contains("tiny\\|planner"));
        let svg = r.to_svg("a<b", &PUBLISHED_ANCHORS);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b") && svg.contains("Hammer2.1-0.5b") && svg.contains("38.38"));
        assert_eq!(svg.matches("<rect").count(), 1 + 4);
    }

    #[test]
    fn no_non_live_categories_gives_null() {
        let mut cats = BTreeMap::new();
        cats.insert("irrelevance".to_string(), CategoryScore::new(0, 0));
        let r = EvalReport::new(cats, &[]);
        assert_eq!(r.non_live_ast, None);
        assert_eq!(r.latency_ms, LatencySummary::default());
        let v: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert!(v["non_live_ast"].is_null());
        assert_eq!(v["categories"]["irrelevance"]["accuracy"], 0.0);
        assert!(r.to_svg("x", &[]).contains("irrelevance"));
    }
}
