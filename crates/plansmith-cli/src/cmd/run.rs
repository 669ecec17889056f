//! `plansmith run --mcp CMD REQUEST`: tools from MCP servers, a verified plan, and the calls
//! executed through `tools/call`.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use plansmith_core::validate::PlanValidator;
use plansmith_core::{Catalog, Plan, Policy, Syntax};
use plansmith_mcp::catalog;
use plansmith_planner::PlanRequest;
use serde_json::{json, Value};

use super::plan::PlannerArgs;
use crate::Outcome;

#[derive(Args)]
#[command(after_help = "\
Examples:
  plansmith run --mcp 'npx -y @modelcontextprotocol/server-filesystem /tmp' --dry-run \"list the files in /tmp\"
  plansmith run --mcp 'mcp-server-filesystem /tmp' --plan '[{\"name\":\"list_directory\",\"arguments\":{\"path\":\"/tmp\"}}]' \"list /tmp\"

Tools MCP does not mark read-only are taken to be destructive (MCP's destructiveHint defaults to
true): they run only with --yes or after a yes at the terminal's prompt.
Exit status: 0 every call ran; 1 no verified plan, a call refused or a tool reporting an error;
2 bad input (no server could be started, a --plan that does not parse or validate).")]
pub struct RunArgs {
    #[command(flatten)]
    planner: PlannerArgs,
    /// An MCP server: the command line that starts it (stdio), or its URL (streamable HTTP,
    /// `http://127.0.0.1:3001/mcp`). Repeatable: the
    /// catalog is the union of the servers' tools (a name two servers share is prefixed with
    /// the server's name). A server that fails is reported; the others keep working.
    #[arg(long = "mcp", required = true, value_name = "COMMAND")]
    mcp: Vec<String>,
    /// Print the verified calls; call nothing.
    #[arg(long)]
    dry_run: bool,
    /// Run calls to possibly destructive tools without asking.
    #[arg(long)]
    yes: bool,
    /// Run this plan instead of planning (checked against the servers' catalog first).
    #[arg(long, value_name = "PLAN")]
    plan: Option<String>,
    /// Syntax of --plan: json (`[{"name", "arguments"}]`), dsl, envelope or openai.
    #[arg(long, default_value = "json", requires = "plan")]
    syntax: Syntax,
    /// Seconds each MCP request (start-up included) may take.
    #[arg(long, default_value_t = 30)]
    mcp_timeout: u64,
    /// One JSON object per line: the plan, then each call's result.
    #[arg(long)]
    json: bool,
    /// The request.
    request: String,
}

pub fn run(args: RunArgs) -> anyhow::Result<Outcome> {
    let timeout = Duration::from_secs(args.mcp_timeout.max(1));
    let (fleet, union) = start_fleet(&args.mcp, timeout)?;
    anyhow::ensure!(
        !union.catalog.tools.is_empty(),
        "the MCP servers offer no tool plansmith can plan for"
    );
    let Some(plan) = plan(&args, &union.catalog)? else {
        return Ok(Outcome::Failed);
    };
    if args.json {
        println!("{}", json!({"plan": plan.calls}));
    } else {
        println!("plan: {}", Syntax::Dsl.render(&plan).trim_end());
    }
    if args.dry_run {
        return Ok(Outcome::Ok);
    }
    for call in &plan.calls {
        let route = &union.routes[&call.name];
        let server = fleet.server(route.server);
        if route.destructive && !args.yes && !confirm(&call.name, server.name())? {
            let msg = format!(
                "not run: `{}` may change things (MCP destructiveHint); pass --yes to run it",
                call.name
            );
            if args.json {
                println!("{}", json!({"call": call, "refused": msg}));
            } else {
                println!("{msg}");
            }
            return Ok(Outcome::Failed);
        }
        let arguments = Value::Object(call.arguments.clone());
        let result = server.call_tool(&route.tool, &arguments)?;
        if args.json {
            println!(
                "{}",
                json!({"call": call, "server": server.name(), "is_error": result.is_error,
                       "content": result.content, "structured": result.structured})
            );
        } else {
            println!(
                "{} on {}{}:\n{}",
                call.name,
                server.name(),
                if result.is_error {
                    " (the tool reports an error)"
                } else {
                    ""
                },
                indent(&result.text())
            );
        }
        if result.is_error {
            return Ok(Outcome::Failed);
        }
    }
    Ok(Outcome::Ok)
}

/// Start the MCP servers (a failing one is a warning; none working is an error) and make their
/// catalog: each tool must also compile into the planning grammar, or it is left out (said).
pub fn start_fleet(
    commands: &[String],
    timeout: Duration,
) -> anyhow::Result<(plansmith_mcp::Fleet, catalog::Union)> {
    let check: plansmith_mcp::ToolCheck = Box::new(|one| {
        let options = plansmith_grammar::Options::new(Syntax::JsonArray);
        plansmith_grammar::grammar_text(one, &options, &plansmith_grammar::Request::new(""))
            .map(drop)
            .map_err(|e| e.to_string())
    });
    let (fleet, errors) = plansmith_mcp::Fleet::start(commands, timeout, check);
    for e in &errors {
        eprintln!("warning: {e}; going on without it");
    }
    anyhow::ensure!(!fleet.is_empty(), "no MCP server could be used");
    let union = fleet.union()?;
    warn_left_out(&union);
    Ok((fleet, union))
}

pub fn warn_left_out(union: &catalog::Union) {
    for l in &union.left_out {
        eprintln!(
            "warning: tool `{}` of MCP server `{}` left out: {}",
            l.tool, l.server, l.why
        );
    }
}

/// The verified plan: `--plan` checked against the catalog, or the planner's accepted plan.
/// `None` when the planner has no verified plan (said on stderr).
fn plan(args: &RunArgs, catalog: &Catalog) -> anyhow::Result<Option<Plan>> {
    if let Some(text) = &args.plan {
        let validator = PlanValidator::new(catalog)?;
        let plan = args
            .syntax
            .parse(text)
            .map_err(|e| anyhow::anyhow!("cannot parse --plan: {e}"))?;
        let plan = if args.syntax.is_untyped() {
            validator.type_values(&plan)
        } else {
            plan
        };
        let violations = validator.validate(&plan, &Policy::default(), Some(&args.request));
        anyhow::ensure!(
            violations.is_empty(),
            "--plan does not fit the MCP servers' tools: {}",
            violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        return Ok(Some(plan));
    }
    let planner = super::plan::load_planner(&args.planner)?;
    let req = PlanRequest {
        catalog: Some(Arc::new(catalog.clone())),
        ..PlanRequest::new(&args.request)
    };
    let o = planner.plan_request(&req)?;
    if o.escalated || o.calls.is_empty() {
        let why = o
            .reason
            .clone()
            .unwrap_or_else(|| "the planner chose no call".into());
        if args.json {
            println!(
                "{}",
                json!({"plan": null, "escalated": o.escalated, "reason": why, "confidence": o.confidence})
            );
        } else {
            eprintln!("no verified plan: {why} (confidence {:.3})", o.confidence);
        }
        return Ok(None);
    }
    Ok(Some(Plan {
        calls: o.calls,
        spoken_text: None,
    }))
}

/// Ask at the terminal; without one, the answer is no.
fn confirm(tool: &str, server: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("call `{tool}` on MCP server `{server}`? It may change things. [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the answer")?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
