//! `plansmith score` and `plansmith sample`: what the planner thinks of a given plan, and
//! which plans it would write without the grammar — the same figures as the confidence floor.

use clap::Args;
use plansmith_core::Syntax;
use serde_json::json;

use crate::Outcome;

#[derive(Args)]
pub struct ScoreArgs {
    #[command(flatten)]
    model: super::plan::ModelArgs,
    /// The request the plan answers.
    #[arg(long)]
    request: String,
    /// Syntax of PLAN: dsl, envelope, openai or json.
    #[arg(long, default_value = "dsl")]
    syntax: Syntax,
    /// Print {"score", "floor", "would_accept", "valid", "violations"} as JSON.
    #[arg(long)]
    json: bool,
    /// The plan, e.g. 'perform(action=click; target.type=ui_element; target.label=Save)'.
    plan: String,
}

/// Score a plan: the confidence the planner would have had writing it for the request (in
/// its own confidence mode, as its floor), whether that reaches the floor, and whether the
/// plan is valid. Exit 0 if valid, 1 if not.
pub fn score(args: ScoreArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.model.cascade.is_none(),
        "score one planner at a time (--planner or --gguf), not a --cascade"
    );
    anyhow::ensure!(!args.request.trim().is_empty(), "--request is empty");
    let planner = super::plan::load_model(&args.model)?;
    let plan = args
        .syntax
        .parse(&args.plan)
        .map_err(|e| anyhow::anyhow!("cannot parse plan as {:?}: {e}", args.syntax))?;
    let given = planner.judge_given(&args.request, &plan)?;
    let floor = planner.settings.conf_floor;
    let would_accept = given.would_accept(floor);
    if args.json {
        println!(
            "{}",
            json!({"score": given.score.map(finite), "unscored": given.unscored,
                   "floor": floor, "would_accept": would_accept,
                   "valid": given.violations.is_empty(), "violations": given.violations})
        );
    } else {
        match (given.score, &given.unscored) {
            (Some(score), _) => println!(
                "score {score:.5} (floor {floor:.5}): {}",
                if would_accept {
                    "the gate would accept this plan"
                } else {
                    "below the floor: it would escalate"
                }
            ),
            (None, why) => println!(
                "no score: {}",
                why.as_deref()
                    .unwrap_or("the planner does not write this plan")
            ),
        }
        for v in &given.violations {
            println!("  {v}");
        }
    }
    Ok(if given.violations.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

#[derive(Args)]
pub struct SampleArgs {
    #[command(flatten)]
    model: super::plan::ModelArgs,
    /// How many plans to draw (at most 64).
    #[arg(short = 'n', long, default_value_t = 5)]
    n: usize,
    /// Sampling temperature (0 is greedy: every draw the same).
    #[arg(long, default_value_t = 1.0)]
    temperature: f32,
    /// Seeds the draws: the same seed gives the same samples.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// One JSON object per draw: {"plan", "score", "valid", "text", "violations"}.
    #[arg(long)]
    json: bool,
    request: String,
}

/// The most draws one `sample` call (or `/v1/sample` request) may ask for.
pub const MAX_SAMPLES: usize = 64;

/// Draw plans without the grammar, each validated and (when valid) scored; invalid draws are
/// shown as invalid, never dropped. Best first.
pub fn sample(args: SampleArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(
        args.model.cascade.is_none(),
        "sample one planner at a time (--planner or --gguf), not a --cascade"
    );
    anyhow::ensure!(
        (1..=MAX_SAMPLES).contains(&args.n),
        "-n must be between 1 and {MAX_SAMPLES}, got {}",
        args.n
    );
    anyhow::ensure!(
        args.temperature.is_finite() && args.temperature >= 0.0,
        "--temperature must be a number >= 0, got {}",
        args.temperature
    );
    anyhow::ensure!(!args.request.trim().is_empty(), "the request is empty");
    let planner = super::plan::load_model(&args.model)?;
    let samples = planner.sample(&args.request, args.n, args.temperature, args.seed)?;
    for s in &samples {
        if args.json {
            println!(
                "{}",
                json!({"plan": s.plan.as_ref().map(|p| &p.calls), "score": s.score,
                       "valid": s.plan.is_some(), "text": s.text, "violations": s.violations})
            );
        } else {
            match (&s.plan, s.score) {
                (Some(plan), Some(score)) => println!(
                    "{score:>10.5}  {}",
                    planner.settings.syntax.render(plan).trim_end()
                ),
                _ => println!(
                    "{:>10}  {} ({})",
                    "invalid",
                    s.text.trim_end(),
                    s.violations.join("; ")
                ),
            }
        }
    }
    Ok(Outcome::Ok)
}

/// A score as JSON (`null` when not finite: a plan too long for the context).
fn finite(x: f32) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}
