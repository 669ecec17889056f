//! The harness's budgets, alone in their own test binary: they are charged in the process's CPU
//! time, which tests running beside them in one process would add to.

mod probe;
use probe::probe;

/// Budgets: CPU time over the budget is a finding; a case that sleeps past ten budgets is a
/// finding as "blocked"; a case within both is not. Findings are reported as they happen.
#[test]
fn budgets_are_charged_in_cpu_time_and_blocked_cases_still_count() {
    let never = std::sync::atomic::AtomicBool::new(false);
    let span = plansmith_fuzz::Span {
        seed: 1,
        from: 0,
        cases: 2,
    };
    let mut events = 0;
    let spin = plansmith_fuzz::run_span(&mut probe(40, 0), span, &never, |e| {
        if let plansmith_fuzz::Event::Finding(_) = e {
            events += 1
        }
    });
    assert_eq!(spin.findings.len(), 2, "{:?}", spin.findings);
    assert!(spin.findings[0].what.contains("ms of CPU"));
    assert_eq!(events, 2);
    let sleep = plansmith_fuzz::run_span(&mut probe(0, 120), span, &never, |_| {});
    assert_eq!(sleep.findings.len(), 2, "{:?}", sleep.findings);
    assert!(sleep.findings[0].what.contains("blocked"));
    let short_sleep = plansmith_fuzz::run_span(&mut probe(0, 10), span, &never, |_| {});
    assert!(
        short_sleep.findings.is_empty(),
        "{:?}",
        short_sleep.findings
    );
}
