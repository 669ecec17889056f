//! plansmith-fuzz: every parser and entry point fed millions of mutated inputs, on stable Rust.
//!
//! Why a hand-written driver rather than cargo-fuzz or bolero: libFuzzer's coverage guidance
//! needs a nightly toolchain and sanitizer builds, which this project's one stable toolchain
//! cannot provide; what finds our bugs is *structure* — catalogs with a deleted `type`, a
//! `$ref` to nowhere, 400 levels of nesting, a GGUF whose tensor count says 2^62 — so each
//! target starts from real inputs (the Pace catalog in five formats, plans in four syntaxes,
//! a GGUF written for the purpose, planner.json of the embedded planner, request bodies for
//! every route) and mutates them as JSON trees, text or bytes ([`mutate`]). Runs are
//! reproducible from `(target, seed, case)`.
//!
//! A *finding* is a panic (caught per case), a broken invariant the target checks (a 5xx from
//! client input, a grammar output that does not parse, a case slower than its budget), and is
//! saved with its input for a regression test.

pub mod mutate;
pub mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use mutate::Rng;

/// What a target made of one input.
pub enum Verdict {
    /// Parsed / compiled / answered: the input reached the deep end.
    Accepted,
    /// Refused with a typed error (the right outcome for bad input).
    Refused,
}

/// One fuzz target: real seeds, a mutation, and a check.
pub trait Target {
    fn name(&self) -> &'static str;
    /// Generate the next input (a mutated seed).
    fn input(&mut self, rng: &mut Rng) -> Vec<u8>;
    /// Feed one input. `Err` is a finding: a broken invariant without a panic.
    fn check(&mut self, input: &[u8]) -> Result<Verdict, String>;
    /// Longest a single case may take before it counts as a finding.
    fn budget(&self) -> Duration {
        Duration::from_secs(2)
    }
}

/// One finding, with the input that caused it.
#[derive(Debug, Clone)]
pub struct Finding {
    pub case: u64,
    pub what: String,
    pub input: Vec<u8>,
}

/// A run's counts.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub target: String,
    pub seed: u64,
    pub cases: u64,
    pub accepted: u64,
    pub refused: u64,
    pub findings: Vec<Finding>,
    pub seconds: f64,
    pub slowest_ms: f64,
}

impl Report {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "target": self.target, "seed": self.seed, "cases": self.cases,
            "accepted": self.accepted, "refused": self.refused,
            "findings": self.findings.len(), "seconds": self.seconds,
            "cases_per_second": self.cases as f64 / self.seconds.max(1e-9),
            "slowest_case_ms": self.slowest_ms,
            "first_findings": self.findings.iter().take(5).map(|f| serde_json::json!({
                "case": f.case, "what": f.what})).collect::<Vec<_>>(),
        })
    }
}

/// Run `cases` inputs through `target`. Panics are caught per case (their default message is
/// silenced while the run lasts) and recorded as findings; so are slow cases.
pub fn run(
    target: &mut dyn Target,
    seed: u64,
    cases: u64,
    mut progress: impl FnMut(u64, &Report),
) -> Report {
    let mut report = Report {
        target: target.name().to_string(),
        seed,
        ..Report::default()
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    let budget = target.budget();
    for case in 0..cases {
        // Each case has its own generator, so any case replays alone from (seed, case).
        let mut rng = Rng::new(seed.wrapping_mul(0x1000_0000_01b3) ^ case);
        let input = target.input(&mut rng);
        let t = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| target.check(&input)));
        let took = t.elapsed();
        report.slowest_ms = report.slowest_ms.max(took.as_secs_f64() * 1e3);
        let mut finding = |what: String| {
            report.findings.push(Finding {
                case,
                what,
                input: input.clone(),
            })
        };
        match outcome {
            Ok(Ok(Verdict::Accepted)) => report.accepted += 1,
            Ok(Ok(Verdict::Refused)) => report.refused += 1,
            Ok(Err(what)) => finding(what),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                finding(format!("panic: {msg}"));
            }
        }
        if took > budget {
            report.findings.push(Finding {
                case,
                what: format!(
                    "took {:.0} ms (budget {} ms)",
                    took.as_secs_f64() * 1e3,
                    budget.as_millis()
                ),
                input: input.clone(),
            });
        }
        report.cases = case + 1;
        if case % 1000 == 999 {
            report.seconds = start.elapsed().as_secs_f64();
            progress(case + 1, &report);
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    std::panic::set_hook(hook);
    report
}

/// Write each finding's input under `dir/<target>/case-<n>.bin` (with a `.txt` saying what).
pub fn save_findings(report: &Report, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let d = dir.join(&report.target);
    for f in &report.findings {
        std::fs::create_dir_all(&d)?;
        let p = d.join(format!("case-{}.bin", f.case));
        std::fs::write(&p, &f.input)?;
        std::fs::write(d.join(format!("case-{}.txt", f.case)), &f.what)?;
        out.push(p);
    }
    Ok(out)
}
