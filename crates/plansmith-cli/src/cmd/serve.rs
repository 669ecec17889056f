//! `plansmith serve`: the OpenAI-compatible HTTP server (see crates/plansmith-serve).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use plansmith_serve::{LiveCatalog, LiveSource, ServeConfig};

use super::plan::{load_planner, PlannerArgs};
use crate::Outcome;

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub planner: PlannerArgs,
    /// Catalog for requests that send no `tools` (default: the planner's own).
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// Take the catalog from an MCP server: the command line that starts it (stdio), or its
    /// URL (streamable HTTP).
    /// Repeatable: the union of the servers' tools, names two servers share prefixed with the
    /// server's name. When a server announces its tools changed, the catalog is rebuilt
    /// (requests in flight finish on the old one). See docs/guide/mcp.md.
    #[arg(long = "mcp", value_name = "COMMAND", conflicts_with = "tools")]
    pub mcp: Vec<String>,
    /// Seconds each MCP request (start-up included) may take.
    #[arg(long, default_value_t = 30)]
    pub mcp_timeout: u64,
    /// Address to listen on. Loopback by default; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer KEY` on every route but /health.
    #[arg(long, env = "PLANSMITH_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Planner worker threads (default: the number of CPUs).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Requests that may wait for a worker; more are answered 429.
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Per-request limit on waiting + planning, in milliseconds; beyond it, 504. It is also
    /// the decode deadline: a worker stops decoding (or sampling) a request at it.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// Largest reply in tokens any request may have (default: the model's own budget — the
    /// tiny planner's context, 256 for a pretrained model). A request's `max_tokens` is capped
    /// by it; a plan still being written at its budget escalates ("token budget reached").
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Largest request body in bytes; larger ones are answered 413.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body: usize,
    /// Model id for /v1/models and responses (default: `plansmith-` and the planner directory's
    /// name, or the --gguf file's name without `.gguf`).
    #[arg(long)]
    pub model_id: Option<String>,
    /// Do not serve the playground page (by default at http://ADDR/ui).
    #[arg(long)]
    pub no_ui: bool,
}

impl ServeArgs {
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        if self.timeout_ms == 0 {
            anyhow::bail!("--timeout-ms must be at least 1");
        }
        if self.workers == Some(0) {
            anyhow::bail!("--workers must be at least 1");
        }
        if self.max_tokens == Some(0) {
            anyhow::bail!("--max-tokens must be at least 1");
        }
        let mut tools = self
            .tools
            .as_ref()
            .map(super::catalog::load)
            .transpose()?
            .map(Arc::new);
        let mut live_tools = None;
        if !self.mcp.is_empty() {
            let timeout = Duration::from_secs(self.mcp_timeout.max(1));
            let (fleet, union) = super::run::start_fleet(&self.mcp, timeout)?;
            tools = Some(Arc::new(union.catalog));
            live_tools = Some(LiveSource(Arc::new(FleetCatalog(fleet))));
        }
        // Named after what answers: the planner directory, else the GGUF file (without its
        // extension), else the embedded planner.
        let model_id = self.model_id.clone().unwrap_or_else(|| {
            let m = &self.planner.model;
            m.planner
                .as_ref()
                .and_then(|d| d.file_name())
                .or_else(|| m.gguf.as_ref().and_then(|f| f.file_stem()))
                .map(|n| format!("plansmith-{}", n.to_string_lossy()))
                .unwrap_or_else(|| "plansmith-default".into())
        });
        let defaults = ServeConfig::default();
        Ok(ServeConfig {
            addr: self.addr,
            tools,
            api_key: self.api_key.clone().filter(|k| !k.is_empty()),
            workers: self.workers.unwrap_or(defaults.workers),
            queue: self.queue,
            timeout: Duration::from_millis(self.timeout_ms),
            max_body: self.max_body,
            model_id,
            max_tokens: self.max_tokens,
            ui: !self.no_ui,
            live_tools,
        })
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<Outcome> {
    let config = args.config()?;
    let planner = Arc::new(load_planner(&args.planner)?);
    if !config.addr.ip().is_loopback() && config.api_key.is_none() {
        eprintln!("warning: listening on {} without --api-key: anyone who can reach it can use the planner", config.addr);
    }
    let model = config.model_id.clone();
    let workers = config.workers;
    let ui = config.ui;
    plansmith_serve::run_blocking(planner, config, |addr| {
        // A closed stdout (a supervisor that read the address and went away) must not take
        // the server down, so write errors are ignored.
        let mut out = std::io::stdout().lock();
        let mut banner =
            format!("plansmith serving {model} on http://{addr} ({workers} workers)\n");
        if ui {
            banner.push_str(&format!("playground: http://{addr}/ui\n"));
        }
        let _ = out.write_all(banner.as_bytes());
        let _ = out.flush();
    })?;
    Ok(Outcome::Ok)
}

/// The MCP servers' catalog as the server's live catalog: rebuilt when a server says its tools
/// changed.
struct FleetCatalog(plansmith_mcp::Fleet);

impl LiveCatalog for FleetCatalog {
    fn poll(&self) -> Option<Arc<plansmith_core::Catalog>> {
        let (union, errors) = self.0.refresh()?;
        for e in &errors {
            eprintln!("warning: {e}; its tools stay as they were");
        }
        match union {
            Ok(u) => {
                super::run::warn_left_out(&u);
                Some(Arc::new(u.catalog))
            }
            Err(e) => {
                eprintln!("warning: the MCP servers' new catalog is refused: {e}");
                None
            }
        }
    }
}
