use std::path::PathBuf;

use clap::Args;
use plansmith_core::{Policy, Syntax};
use plansmith_grammar::{grammar_text, Options, Request, ToolChoice};

use crate::Outcome;

#[derive(Args)]
pub struct GrammarArgs {
    #[arg(long)]
    tools: PathBuf,
    /// dsl, envelope, openai or json.
    #[arg(long, default_value = "dsl")]
    syntax: Syntax,
    /// The request whose spans copied values must come from.
    #[arg(long)]
    request: Option<String>,
    /// none, auto, required, or a tool name.
    #[arg(long, default_value = "auto")]
    tool_choice: ToolChoice,
    /// Most calls per plan.
    #[arg(long, default_value_t = 4)]
    max_calls: usize,
    /// Copy policy: free (every free string must be a span of the request) or none.
    /// Default: free for the DSL, none otherwise.
    #[arg(long)]
    copy: Option<String>,
    /// lark: the llguidance grammar (what plansmith enforces, and what vLLM and SGLang get
    /// with --backend); json-schema: the plan's JSON Schema (what llama.cpp and OpenAI-style
    /// engines get; needs --syntax json, and cannot say what is copied from the request).
    #[arg(long, default_value = "lark", value_parser = ["lark", "json-schema"])]
    form: String,
}

pub fn run(args: GrammarArgs) -> anyhow::Result<Outcome> {
    let catalog = super::catalog::load(&args.tools)?;
    let mut options = Options::new(args.syntax);
    options.tool_choice = args.tool_choice;
    options.max_calls = args.max_calls;
    match args.copy.as_deref() {
        None => {}
        Some("free") => options.policy = Policy::copy_free_strings(),
        Some("none") => options.policy = Policy::default(),
        Some(other) => anyhow::bail!("unknown --copy `{other}` (expected free or none)"),
    }
    if args.form == "json-schema" {
        anyhow::ensure!(
            args.syntax == Syntax::JsonArray,
            "--form json-schema describes the json syntax only: add --syntax json"
        );
        let schema = plansmith_grammar::plan_schema(&catalog, &options)?;
        println!("{}", serde_json::to_string_pretty(&schema)?);
        return Ok(Outcome::Ok);
    }
    let request = Request::new(args.request.unwrap_or_default());
    print!("{}", grammar_text(&catalog, &options, &request)?);
    Ok(Outcome::Ok)
}
