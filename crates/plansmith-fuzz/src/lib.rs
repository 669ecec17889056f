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
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The first case number of the run (`--from`).
    pub from: u64,
    pub cases: u64,
    pub accepted: u64,
    pub refused: u64,
    pub findings: Vec<Finding>,
    pub seconds: f64,
    /// The slowest case, in wall-clock and in CPU milliseconds.
    pub slowest_ms: f64,
    pub slowest_cpu_ms: f64,
    /// The run was asked to stop (SIGINT / SIGTERM) before its last case; the counts are
    /// those of the cases that ran.
    pub stopped: bool,
}

impl Report {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "target": self.target, "seed": self.seed, "from": self.from, "cases": self.cases,
            "accepted": self.accepted, "refused": self.refused,
            "findings": self.findings.len(), "seconds": self.seconds,
            "cases_per_second": self.cases as f64 / self.seconds.max(1e-9),
            "slowest_case_ms": self.slowest_ms, "slowest_case_cpu_ms": self.slowest_cpu_ms,
            "stopped": self.stopped,
            "first_findings": self.findings.iter().take(5).map(|f| serde_json::json!({
                "case": f.case, "what": f.what})).collect::<Vec<_>>(),
        })
    }
}

/// Which cases a run feeds: `cases` of them from case number `from`, under `seed`.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub seed: u64,
    pub from: u64,
    pub cases: u64,
}

/// What a run tells its caller while it runs.
pub enum Event<'a> {
    /// A finding, as soon as it is found (so a run that is killed has saved it already).
    Finding(&'a Finding),
    /// Every 1,000 cases: the counts so far.
    Progress(&'a Report),
}

/// CPU time of the whole process (all threads). A case's budget is charged in CPU time, not
/// wall time: a fuzz run shares its cores with builds and other runs, and a starved case is
/// not a slow one (the 1,000,000-input planner run had six wall-clock "findings" that took
/// 30–80 ms when replayed alone).
fn cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A case that spends more than this many times its CPU budget in wall-clock time is a
/// finding too: it is blocked (sleeping, waiting on a lock), which CPU time cannot see.
const WALL_BUDGET_FACTOR: u32 = 10;

/// Run `cases` inputs from case 0 through `target`; see [`run_span`].
pub fn run(
    target: &mut dyn Target,
    seed: u64,
    cases: u64,
    mut progress: impl FnMut(u64, &Report),
) -> Report {
    let never = AtomicBool::new(false);
    let span = Span {
        seed,
        from: 0,
        cases,
    };
    run_span(target, span, &never, |e| {
        if let Event::Progress(r) = e {
            progress(r.cases, r)
        }
    })
}

/// Run the cases of `span` through `target`, until done or until `stop` is set. Panics are
/// caught per case (their default message is silenced while the run lasts) and recorded as
/// findings; so are cases over their budget.
pub fn run_span(
    target: &mut dyn Target,
    span: Span,
    stop: &AtomicBool,
    mut on: impl FnMut(Event<'_>),
) -> Report {
    let mut report = Report {
        target: target.name().to_string(),
        seed: span.seed,
        from: span.from,
        ..Report::default()
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    let budget = target.budget();
    for i in 0..span.cases {
        if stop.load(Ordering::Relaxed) {
            report.stopped = true;
            break;
        }
        let case = span.from.saturating_add(i);
        // Each case has its own generator, so any case replays alone from (seed, case).
        let mut rng = Rng::new(span.seed.wrapping_mul(0x1000_0000_01b3) ^ case);
        let input = target.input(&mut rng);
        let (t, cpu) = (Instant::now(), cpu_time());
        let outcome = catch_unwind(AssertUnwindSafe(|| target.check(&input)));
        let (took, took_cpu) = (t.elapsed(), cpu_time().saturating_sub(cpu));
        report.slowest_ms = report.slowest_ms.max(took.as_secs_f64() * 1e3);
        report.slowest_cpu_ms = report.slowest_cpu_ms.max(took_cpu.as_secs_f64() * 1e3);
        let mut found = Vec::new();
        match outcome {
            Ok(Ok(Verdict::Accepted)) => report.accepted += 1,
            Ok(Ok(Verdict::Refused)) => report.refused += 1,
            Ok(Err(what)) => found.push(what),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into());
                found.push(format!("panic: {msg}"));
            }
        }
        if took_cpu > budget {
            found.push(format!(
                "took {:.0} ms of CPU (budget {} ms)",
                took_cpu.as_secs_f64() * 1e3,
                budget.as_millis()
            ));
        } else if took > budget * WALL_BUDGET_FACTOR {
            found.push(format!(
                "took {:.0} ms of wall-clock time but {:.0} ms of CPU: blocked (wall budget {} ms)",
                took.as_secs_f64() * 1e3,
                took_cpu.as_secs_f64() * 1e3,
                (budget * WALL_BUDGET_FACTOR).as_millis()
            ));
        }
        for what in found {
            report.findings.push(Finding {
                case,
                what,
                input: input.clone(),
            });
            on(Event::Finding(report.findings.last().expect("just pushed")));
        }
        report.cases = i + 1;
        if i % 1000 == 999 {
            report.seconds = start.elapsed().as_secs_f64();
            on(Event::Progress(&report));
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    std::panic::set_hook(hook);
    report
}

/// Write one finding's input as `dir/<target>/case-<n>.bin`, with a `.txt` saying what broke.
pub fn save_finding(target: &str, finding: &Finding, dir: &Path) -> std::io::Result<PathBuf> {
    let d = dir.join(target);
    std::fs::create_dir_all(&d)?;
    let p = d.join(format!("case-{}.bin", finding.case));
    std::fs::write(&p, &finding.input)?;
    // Two findings of one case (a panic that was also slow) share the input; keep both whats.
    let txt = d.join(format!("case-{}.txt", finding.case));
    let mut what = std::fs::read_to_string(&txt).unwrap_or_default();
    if !what.contains(&finding.what) {
        if !what.is_empty() {
            what.push('\n');
        }
        what.push_str(&finding.what);
    }
    std::fs::write(txt, what)?;
    Ok(p)
}

/// Write each finding's input under `dir/<target>/case-<n>.bin` (with a `.txt` saying what).
pub fn save_findings(report: &Report, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    report
        .findings
        .iter()
        .map(|f| save_finding(&report.target, f, dir))
        .collect()
}
