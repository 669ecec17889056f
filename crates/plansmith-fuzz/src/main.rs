//! `plansmith-fuzz TARGET|all --cases N --seed S`: run fuzz targets, print a table (or JSON),
//! save findings, exit 1 if there were any.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use plansmith_fuzz::targets::{make, TARGETS};

#[derive(Parser)]
#[command(
    name = "plansmith-fuzz",
    about = "Feed plansmith's parsers and HTTP routes mutated inputs; report panics and broken invariants.",
    after_help = "Targets:\n  catalog, plan, traces, chat, grammar, planner, gguf, tokenizer, http (or `all`).\n\nA finding is saved as FINDINGS/<target>/case-<n>.bin with a .txt saying what broke; rerun one case with --seed S --from N --cases 1."
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

fn main() -> ExitCode {
    let args = Args::parse();
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
                what.chars().take(200).collect::<String>()
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
            "{:10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>10}",
            "target", "cases", "accepted", "refused", "findings", "seconds", "slowest ms"
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
        let report = plansmith_fuzz::run(target.as_mut(), args.seed, args.cases, |done, r| {
            if !args.json && done % 10_000 == 0 {
                eprint!(
                    "\r{name}: {done}/{} cases, {} findings",
                    args.cases,
                    r.findings.len()
                );
                let _ = std::io::stderr().flush();
            }
        });
        if !args.json && args.cases >= 10_000 {
            eprintln!();
        }
        if args.json {
            println!("{}", report.to_json());
        } else {
            println!(
                "{:10} {:>10} {:>10} {:>10} {:>8} {:>9.1} {:>10.1}",
                report.target,
                report.cases,
                report.accepted,
                report.refused,
                report.findings.len(),
                report.seconds,
                report.slowest_ms
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
            match plansmith_fuzz::save_findings(&report, &args.findings) {
                Ok(paths) => eprintln!(
                    "{} findings saved under {}",
                    paths.len(),
                    args.findings.join(name).display()
                ),
                Err(e) => eprintln!("error: cannot save findings: {e}"),
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
