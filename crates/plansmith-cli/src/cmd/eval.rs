use std::path::PathBuf;

use clap::{Args, Subcommand};
use plansmith_core::trace::{read_traces, write_atomic};
use plansmith_planner::eval::{curve_svg, evaluate, items};
use plansmith_planner::GateMetrics;

use crate::Outcome;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Agreement, coverage and silent-wrong of a planner on a trace file.
    Traces(TracesArgs),
    /// BFCL (its data and AST rules) for a planner, a GGUF model (constrained or --free), or
    /// any OpenAI-compatible --endpoint, beside published leaderboard figures.
    Bfcl(super::bfcl::BfclArgs),
}

#[derive(Args)]
pub struct TracesArgs {
    #[command(flatten)]
    model: super::plan::ModelArgs,
    /// Score the gate at this confidence floor instead of the planner's calibrated one.
    #[arg(long, allow_hyphen_values = true)]
    floor: Option<f32>,
    /// Traces with reference plans (JSONL).
    #[arg(long)]
    data: PathBuf,
    /// Also decode without the grammar, to show what the constraint buys.
    #[arg(long)]
    free: bool,
    /// Write report.json, per-item results and the coverage/precision curve (SVG) here.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn print_gate_table(rows: &[(&str, Option<&GateMetrics>)]) {
    println!(
        "{:<12} {:>6} {:>9} {:>9} {:>9} {:>12} {:>10} {:>8}",
        "split", "n", "agreement", "coverage", "precision", "silent_wrong", "escalated", "invalid"
    );
    for (name, m) in rows {
        if let Some(m) = m {
            println!(
                "{:<12} {:>6} {:>9.4} {:>9.4} {:>9.4} {:>12} {:>10.4} {:>8}",
                name,
                m.n,
                m.agreement,
                m.coverage,
                m.precision,
                m.silent_wrong,
                m.escalation_rate,
                m.invalid_emitted
            );
        }
    }
}

pub fn run(command: EvalCommand) -> anyhow::Result<Outcome> {
    match command {
        EvalCommand::Traces(args) => traces(args),
        EvalCommand::Bfcl(args) => super::bfcl::run(args),
    }
}

fn traces(args: TracesArgs) -> anyhow::Result<Outcome> {
    if args.model.cascade.is_some() {
        return cascade_traces(args);
    }
    let mut planner = super::plan::load_model(&args.model)?;
    if let Some(f) = args.floor {
        planner.set_floor(f);
    }
    let traces = read_traces(&args.data)?;
    let items = items(&traces)?;
    // Progress goes to stderr with --json too: the report is stdout's, and a long run in the
    // background logs where it is.
    let bar = crate::progress::bar(items.len() as u64, "planning");
    let (summary, judged) = evaluate(&planner, &items, args.free, |done, total| {
        bar.set_position(done as u64);
        crate::progress::log_when_hidden(&bar, done as u64, total as u64, "planned");
    })?;
    bar.finish_and_clear();
    let report = serde_json::json!({
        "n": summary.n, "agreement": summary.agreement, "coverage": summary.coverage,
        "silent_wrong": summary.silent_wrong, "escalation_rate": summary.escalation_rate,
        "invalid_emitted": summary.invalid_emitted, "precision": summary.precision,
        "conf_floor": summary.conf_floor, "free": summary.free, "by_mode": summary.by_mode,
        "p50_latency_ms": summary.p50_latency_ms,
    });
    if let Some(dir) = &args.out {
        write_report(dir, &report)?;
        let lines: String = items
            .iter()
            .zip(&judged)
            .map(|(item, j)| {
                serde_json::json!({"request": item.request, "output": j.decoded.text, "correct": j.correct,
                    "valid": j.decoded.is_valid(), "confidence": j.decoded.confidence(planner.settings.confidence),
                    "violations": j.decoded.violations, "dead": j.decoded.dead})
                .to_string()
                    + "\n"
            })
            .collect();
        write_atomic(dir.join("items.jsonl"), lines.as_bytes())?;
        let title = format!(
            "{}: precision vs coverage as the floor moves",
            args.data.display()
        );
        write_atomic(
            dir.join("coverage.svg"),
            curve_svg(&planner, &judged, &title).as_bytes(),
        )?;
    }
    if args.json {
        println!("{report}");
    } else {
        let m = GateMetrics {
            n: summary.n,
            agreement: summary.agreement,
            coverage: summary.coverage,
            silent_wrong: summary.silent_wrong,
            precision: summary.precision,
            escalation_rate: summary.escalation_rate,
            invalid_emitted: summary.invalid_emitted,
        };
        print_gate_table(&[(
            &args
                .data
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Some(&m),
        )]);
        if let Some(f) = &summary.free {
            println!("\n{:<14} {:>9} {:>9}", "decoding", "agreement", "valid");
            println!(
                "{:<14} {:>9.4} {:>9.4}",
                "constrained",
                summary.agreement,
                1.0 - summary.invalid_emitted as f64 / summary.n.max(1) as f64
            );
            println!("{:<14} {:>9.4} {:>9.4}", "free", f.agreement, f.valid);
        }
        println!(
            "\nfloor {:.4}; p50 latency {:.2} ms",
            summary.conf_floor, summary.p50_latency_ms
        );
    }
    Ok(Outcome::Ok)
}

/// `eval traces --cascade`: every request through every hop (and the teacher), judged on the
/// plan that came out; per hop and overall.
fn cascade_traces(args: TracesArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.floor.is_none() && !args.free,
        "--floor and --free do not apply to a --cascade (floors are set per hop in its file)"
    );
    let planner = super::plan::load_model(&args.model)?;
    let items = items(&read_traces(&args.data)?)?;
    let bar = crate::progress::bar(items.len() as u64, "planning");
    let report = plansmith_planner::eval::evaluate_cascade(&planner, &items, |done, total| {
        bar.set_position(done as u64);
        crate::progress::log_when_hidden(&bar, done as u64, total as u64, "planned");
    })?;
    bar.finish_and_clear();
    if let Some(dir) = &args.out {
        write_report(dir, &report)?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(Outcome::Ok);
    }
    println!(
        "{:<12} {:>7} {:>8} {:>9} {:>9} {:>12} {:>9} {:>9}",
        "hop", "reached", "answered", "coverage", "accuracy", "silent_wrong", "p50 ms", "p99 ms"
    );
    for h in &report.hops {
        println!(
            "{:<12} {:>7} {:>8} {:>9.4} {:>9.4} {:>12} {:>9.2} {:>9.2}",
            h.hop,
            h.reached,
            h.answered,
            h.coverage,
            h.accuracy,
            h.silent_wrong,
            h.p50_ms,
            h.p99_ms
        );
    }
    println!(
        "\n{} requests: {:.4} answered by a model hop (teacher calls saved), {} unanswered, silent wrong {:.4}, p50 {:.2} ms, p99 {:.2} ms",
        report.n,
        report.model_coverage,
        report.unanswered,
        report.silent_wrong_rate,
        report.p50_ms,
        report.p99_ms
    );
    Ok(Outcome::Ok)
}

/// `DIR/report.json`, written atomically (the directory made if needed).
fn write_report(dir: &std::path::Path, report: &impl serde::Serialize) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_atomic(
        dir.join("report.json"),
        serde_json::to_string_pretty(report)?.as_bytes(),
    )?;
    Ok(())
}
