//! The short fuzz budget CI runs: every target, a fixed seed, no finding allowed. The long
//! runs (>= 1,000,000 inputs per target) are documented in docs/results/reliability.md.

use plansmith_fuzz::targets::{make, TARGETS};

/// Inputs per target: enough to pass every mutation kind many times, small enough for a debug
/// build in CI (the HTTP and planner targets plan with the real embedded planner).
fn cases(target: &str) -> u64 {
    match target {
        "http" => 3_000,
        "planner" => 1_000,
        "gguf" => 3_000,
        "grammar" => 5_000,
        _ => 10_000,
    }
}

#[test]
fn every_target_survives_its_short_budget() {
    let mut failures = Vec::new();
    for (name, _) in TARGETS {
        let mut target = make(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = plansmith_fuzz::run(target.as_mut(), 2026, cases(name), |_, _| {});
        println!(
            "{name}: {} cases, {} accepted, {} refused, {} findings, {:.1} s",
            report.cases,
            report.accepted,
            report.refused,
            report.findings.len(),
            report.seconds
        );
        assert_eq!(report.cases, cases(name));
        // A target whose inputs never get past the first check tests nothing.
        assert!(report.accepted > 0, "{name}: no input was accepted");
        assert!(report.refused > 0, "{name}: no input was refused");
        for f in report.findings.iter().take(3) {
            failures.push(format!("{name} case {}: {}", f.case, f.what));
        }
    }
    assert!(failures.is_empty(), "findings:\n{}", failures.join("\n"));
}

#[test]
fn a_run_replays_from_its_seed() {
    let mut a = make("catalog").unwrap();
    let mut b = make("catalog").unwrap();
    let ra = plansmith_fuzz::run(a.as_mut(), 9, 300, |_, _| {});
    let rb = plansmith_fuzz::run(b.as_mut(), 9, 300, |_, _| {});
    assert_eq!((ra.accepted, ra.refused), (rb.accepted, rb.refused));
    let mut rng = plansmith_fuzz::Rng::new(1);
    let x = a.input(&mut rng);
    let mut rng = plansmith_fuzz::Rng::new(1);
    assert_eq!(x, b.input(&mut rng));
}

/// The harness itself: a panicking target is a finding, not a crash of the run.
#[test]
fn panics_and_broken_invariants_are_findings() {
    struct Bad;
    impl plansmith_fuzz::Target for Bad {
        fn name(&self) -> &'static str {
            "bad"
        }
        fn input(&mut self, rng: &mut plansmith_fuzz::Rng) -> Vec<u8> {
            vec![rng.below(3) as u8]
        }
        fn check(&mut self, input: &[u8]) -> Result<plansmith_fuzz::Verdict, String> {
            match input[0] {
                0 => panic!("boom"),
                1 => Err("broken".into()),
                _ => Ok(plansmith_fuzz::Verdict::Accepted),
            }
        }
    }
    let r = plansmith_fuzz::run(&mut Bad, 0, 300, |_, _| {});
    assert!(r.findings.iter().any(|f| f.what == "panic: boom"));
    assert!(r.findings.iter().any(|f| f.what == "broken"));
    assert_eq!(r.accepted as usize + r.findings.len(), 300);
}

/// Inputs that once broke a target (saved from long runs) must pass now: `regressions/<target>/`.
#[test]
fn saved_regressions_pass() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut seen = 0;
    for dir in std::fs::read_dir(&root).expect("tests/regressions exists") {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut target = make(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let input = std::fs::read(&f).unwrap();
            // A 12 KB word once took 3 s to encode (quadratic merging); it is merged in
            // pieces now. The check is the target's own invariant (round trip).
            match target.check(&input) {
                Ok(_) => seen += 1,
                Err(e) => panic!("{}: {e}", f.display()),
            }
        }
    }
    assert!(
        seen > 0,
        "no saved regression inputs under {}",
        root.display()
    );
}

mod probe;
use probe::probe;

/// `--from N --cases 1` feeds exactly case N of the seed's run.
#[test]
fn a_case_replays_alone_from_its_number() {
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut all = probe(0, 0);
    plansmith_fuzz::run(&mut all, 7, 20, |_, _| {});
    let mut one = probe(0, 0);
    let span = plansmith_fuzz::Span {
        seed: 7,
        from: 13,
        cases: 1,
    };
    let r = plansmith_fuzz::run_span(&mut one, span, &never, |_| {});
    assert_eq!((r.from, r.cases), (13, 1));
    assert_eq!(one.seen, vec![all.seen[13].clone()]);
}

/// A stop request (SIGINT / SIGTERM in the binary) ends the run with the counts so far.
#[test]
fn a_stopped_run_reports_what_ran() {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut p = probe(0, 0);
    let span = plansmith_fuzz::Span {
        seed: 1,
        from: 0,
        cases: 1_000_000,
    };
    let r = plansmith_fuzz::run_span(&mut p, span, &stop, |e| {
        if let plansmith_fuzz::Event::Progress(r) = e {
            if r.cases == 2_000 {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    assert!(r.stopped);
    assert_eq!((r.cases, r.accepted), (2_000, 2_000));
}
