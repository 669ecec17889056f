use clap::Args;
use plansmith_core::Syntax;

use crate::Outcome;

#[derive(Args)]
pub struct RenderArgs {
    /// Render as v6 executor tags ([CLICK:label], [TYPE:text], [KEY:cmd+s], ...).
    #[arg(long)]
    legacy_tags: bool,
    /// Syntax of PLAN_TEXT: dsl, envelope, openai or json.
    #[arg(long, default_value = "dsl")]
    from: Syntax,
    /// Syntax to render into (ignored with --legacy-tags).
    #[arg(long, default_value = "json")]
    to: Syntax,
    plan_text: String,
}

pub fn run(args: RenderArgs) -> anyhow::Result<Outcome> {
    let plan = args
        .from
        .parse(&args.plan_text)
        .map_err(|e| anyhow::anyhow!("cannot parse plan: {e}"))?;
    if args.legacy_tags {
        println!("{}", plansmith_data::legacy_tags(&plan)?);
    } else {
        println!("{}", args.to.render(&plan).trim_end());
    }
    Ok(Outcome::Ok)
}
