use std::path::PathBuf;

use clap::Args;
use plansmith_core::{validate::PlanValidator, Policy, Syntax};
use serde_json::json;

use crate::Outcome;

#[derive(Args)]
pub struct ValidateArgs {
    /// Tool catalog the plan must satisfy.
    #[arg(long)]
    tools: PathBuf,
    /// Syntax of PLAN_TEXT: dsl, envelope, openai or json.
    #[arg(long, default_value = "dsl")]
    syntax: Syntax,
    /// The user request; with it, free strings must be copied from it (DSL default policy).
    #[arg(long)]
    request: Option<String>,
    /// Skip copy-fidelity checks even when --request is given.
    #[arg(long)]
    no_copy: bool,
    /// Print `{"valid", "plan", "violations"}` as JSON.
    #[arg(long)]
    json: bool,
    /// The plan text, e.g. 'open(target.type=app; target.label=Safari)'.
    plan_text: String,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<Outcome> {
    let catalog = super::catalog::load(&args.tools)?;
    let validator = PlanValidator::new(&catalog)?;
    let plan = args
        .syntax
        .parse(&args.plan_text)
        .map_err(|e| anyhow::anyhow!("cannot parse plan: {e}"))?;
    let plan = if args.syntax.is_untyped() {
        validator.type_values(&plan)
    } else {
        plan
    };
    let policy = if args.no_copy || args.syntax != Syntax::Dsl {
        Policy::default()
    } else {
        Policy::copy_free_strings()
    };
    let violations = validator.validate(&plan, &policy, args.request.as_deref());
    if args.json {
        println!(
            "{}",
            json!({"valid": violations.is_empty(), "plan": plan, "violations": violations})
        );
    } else if violations.is_empty() {
        println!("valid: {}", Syntax::JsonArray.render(&plan));
    } else {
        println!("invalid:");
        for v in &violations {
            println!("  {v}");
        }
    }
    Ok(if violations.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}
