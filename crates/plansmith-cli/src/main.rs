//! `plansmith`: the one binary. Each subcommand lives in `cmd/`; this file only parses
//! arguments and turns errors into `error: ...` with exit code 2.

mod cmd;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "plansmith",
    version,
    about = "Small, local, verified tool-call planners",
    long_about = "plansmith turns a request plus a tool catalog (JSON Schemas) into validated tool calls.\n\n\
        Catalogs may be OpenAI `tools`, an MCP `tools/list` result, Anthropic tools, BFCL function\n\
        lists or xLAM tool lists; the format is detected.",
    after_help = "Examples:\n  plansmith catalog check examples/pace/tools.json\n  \
        plansmith validate --tools examples/pace/tools.json --request 'open safari' \\\n      'open(target.type=app; target.label=safari)'"
)]
struct Cli {
    /// Compute threads for model work (sets RAYON_NUM_THREADS). On a busy machine 1 is
    /// often faster than 2: candle's pool spins while its threads wait for a core.
    #[arg(long, global = true, env = "PLANSMITH_THREADS")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect and check tool catalogs.
    #[command(subcommand)]
    Catalog(cmd::catalog::CatalogCommand),
    /// Check a plan against a catalog: exit 0 if valid, 1 with the list of violations if not.
    Validate(cmd::validate::ValidateArgs),
    /// Plan requests with a planner (the embedded default unless --planner is given).
    Plan(cmd::plan::PlanArgs),
    /// Score a given plan for a request: the planner's log-probability of it against the
    /// floor, and whether it is valid.
    Score(cmd::score::ScoreArgs),
    /// Draw plans for a request without the grammar, each validated and scored (seeded).
    Sample(cmd::score::SampleArgs),
    /// Train a tiny planner from traces (or LoRA-tune a pretrained one): SFT, floor
    /// calibration, test report.
    Train(Box<cmd::train::TrainArgs>),
    /// Refit a planner's confidence floor on calibration traces and re-measure it on test
    /// traces, without retraining.
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// Evaluate planners.
    #[command(subcommand)]
    Eval(cmd::eval::EvalCommand),
    /// Generate, augment, import and export training data.
    #[command(subcommand)]
    Data(cmd::data::DataCommand),
    /// Serve a planner over HTTP: OpenAI-compatible tool calling, /v1/plan, /metrics.
    Serve(cmd::serve::ServeArgs),
    /// Plan a request against the tools of MCP servers and run the verified calls through them
    Run(cmd::run::RunArgs),
    /// Print the constraint grammar (llguidance Lark) for a catalog.
    Grammar(cmd::grammar::GrammarArgs),
    /// Convert a plan between syntaxes, or to legacy executor tags.
    Render(cmd::render::RenderArgs),
    /// Benchmarks (grammar masks, tiny-LM training and decoding, planner latency).
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
}

/// Exit codes: 0 success, 1 "checked and found wanting" (e.g. an invalid plan), 2 bad input.
pub enum Outcome {
    Ok,
    Failed,
}

/// `plansmith ... | head` closes stdout early; `println!` then panics on the broken pipe. Exit
/// quietly instead, with the status a process killed by SIGPIPE has (128 + 13), as `cat` and
/// friends do. Not by restoring SIGPIPE itself: the server and teacher commands write to sockets
/// and child processes, where a closed peer must be an error, not the end of the process.
fn quiet_on_broken_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_stdout();
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        // Before any thread pool exists: candle and rayon read it on first use.
        std::env::set_var("RAYON_NUM_THREADS", n.max(1).to_string());
    }
    let result = match cli.command {
        Command::Catalog(c) => cmd::catalog::run(c),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Validate(a) => cmd::validate::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Score(a) => cmd::score::score(a),
        Command::Sample(a) => cmd::score::sample(a),
        Command::Train(a) => cmd::train::run(*a),
        Command::Eval(c) => cmd::eval::run(c),
        Command::Data(c) => cmd::data::run(c),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Grammar(a) => cmd::grammar::run(a),
        Command::Render(a) => cmd::render::run(a),
        Command::Bench(c) => cmd::bench::run(c),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message before
/// it already ends with (library errors that print their source inline as well as chain it
/// would otherwise say the same thing twice).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut last = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !last.is_empty() && last.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
        last = text;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// Shaped like a `thiserror` enum variant `#[error("...: {0}")] X(#[from] E)`.
    #[derive(Debug)]
    struct Inline(std::io::Error);

    impl std::fmt::Display for Inline {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "catalog is not valid JSON: {}", self.0)
        }
    }

    impl std::error::Error for Inline {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_printed_inline_is_not_repeated() {
        let inner = std::io::Error::other("key must be a string at line 1 column 2");
        let e = anyhow::Error::new(Inline(inner)).context("in catalog bad.json");
        assert_eq!(
            error_chain(&e),
            "in catalog bad.json: catalog is not valid JSON: key must be a string at line 1 column 2"
        );
    }

    #[test]
    fn a_cause_not_printed_inline_is_kept() {
        let e = anyhow::Error::new(std::io::Error::other("no such file")).context("cannot read x");
        assert_eq!(error_chain(&e), "cannot read x: no such file");
    }
}
