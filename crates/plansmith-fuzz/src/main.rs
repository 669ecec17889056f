//! `plansmith-fuzz TARGET|all --cases N --seed S`: run fuzz targets, print a table (or JSON),
//! save findings, exit 1 if there were any.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};

use plansmith_fuzz::targets::{make, TARGETS};
use plansmith_fuzz::{Event, Span};

#[derive(Parser)]
#[command(
    name = "plansmith-fuzz",
    about = "Feed plansmith's parsers and HTTP routes mutated inputs; report panics and broken invariants.",
    after_help = "Targets:\n  catalog, plan, traces, chat, grammar, planner, gguf, tokenizer, http (or `all`).\n\nA finding is saved as FINDINGS/<target>/case-<n>.bin with a .txt saying what broke, as soon as it\nis found; rerun one case with --seed S --from N --cases 1, or feed the saved file with --replay.\n\nA case's budget is charged in CPU time (a run sharing its cores is not a finding); a case also\ncounts when its wall-clock time passes ten budgets (it was blocked). SIGINT or SIGTERM stops a run\nafter the case in progress and prints the counts so far (marked stopped)."
)]
struct Args {
    /// A target name, or `all`.
    target: String,
    /// Inputs per target.
    #[arg(long, default_value_t = 10_000)]
    cases: u64,
    /// Seed of the run (the same seed replays the same inputs).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// First case number: `--from N --cases 1` replays case N of the seed alone.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Where findings are written.
    #[arg(long, default_value = "fuzz-findings")]
    findings: PathBuf,
    /// One JSON object per target instead of the table.
    #[arg(long)]
    json: bool,
    /// List the targets and what each covers.
    #[arg(long)]
    list: bool,
    /// Feed these saved inputs (findings) to the target instead of generating any; print
    /// what each does now.
    #[arg(long, num_args = 1..)]
    replay: Vec<PathBuf>,
}

/// Set by SIGINT / SIGTERM: the run ends after the case in progress.
static STOP: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst)) {
        eprintln!("warning: cannot catch SIGINT/SIGTERM ({e}); a stopped run prints nothing");
    }
    if args.list {
        for (name, about) in TARGETS {
            println!("{name:10} {about}");
        }
        return ExitCode::SUCCESS;
    }
    if !args.replay.is_empty() {
        let mut target = match make(&args.target) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        let mut open = 0;
        for path in &args.replay {
            let input = match std::fs::read(path) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("error: cannot read {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.check(&input)));
            let what = match r {
                Ok(Ok(_)) => "ok".to_string(),
                Ok(Err(w)) => {
                    open += 1;
                    w
                }
                Err(_) => {
                    open += 1;
                    "panic".into()
                }
            };
            println!(
                "{}: {}",
                path.display(),
                what.chars().take(2000).collect::<String>()
            );
        }
        return if open > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        };
    }
    let names: Vec<&str> = if args.target == "all" {
        TARGETS.iter().map(|t| t.0).collect()
    } else {
        vec![args.target.as_str()]
    };
    let mut failed = false;
    if !args.json {
        println!(
            "{:10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>14}",
            "target", "cases", "accepted", "refused", "findings", "seconds", "slowest CPU ms"
        );
    }
    for name in names {
        let mut target = match make(name) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        let span = Span {
            seed: args.seed,
            from: args.from,
            cases: args.cases,
        };
        let mut saved = 0usize;
        let report = plansmith_fuzz::run_span(target.as_mut(), span, &STOP, |event| match event {
            Event::Finding(f) => match plansmith_fuzz::save_finding(name, f, &args.findings) {
                Ok(_) => saved += 1,
                Err(e) => eprintln!("error: cannot save finding of case {}: {e}", f.case),
            },
            Event::Progress(r) if r.cases % 10_000 == 0 => {
                eprint!(
                    "\r{name}: {}/{} cases, {} findings, {:.0} s",
                    r.cases,
                    args.cases,
                    r.findings.len(),
                    r.seconds
                );
                let _ = std::io::stderr().flush();
            }
            Event::Progress(_) => {}
        });
        if report.cases >= 10_000 {
            eprintln!();
        }
        if report.stopped {
            eprintln!(
                "{name}: stopped after {} of {} cases",
                report.cases, args.cases
            );
        }
        if args.json {
            println!("{}", report.to_json());
        } else {
            println!(
                "{:10} {:>10} {:>10} {:>10} {:>8} {:>9.1} {:>14.1}",
                report.target,
                report.cases,
                report.accepted,
                report.refused,
                report.findings.len(),
                report.seconds,
                report.slowest_cpu_ms
            );
            for f in report.findings.iter().take(5) {
                println!(
                    "  case {}: {}",
                    f.case,
                    f.what.chars().take(300).collect::<String>()
                );
            }
        }
        if !report.findings.is_empty() {
            failed = true;
            eprintln!(
                "{saved} findings saved under {}",
                args.findings.join(name).display()
            );
        }
        if report.stopped {
            break;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
