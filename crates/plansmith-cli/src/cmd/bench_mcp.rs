//! `plansmith bench mcp`: the time a live MCP catalog takes to refresh, end to end — every
//! server listed again (every page, over its transport), the union rebuilt and checked tool by
//! tool, and the planner's grammar compiled for the new catalog (what the first
//! request after a change pays).

use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn run(
    servers: &[String],
    model: &super::plan::ModelArgs,
    refreshes: usize,
    json: bool,
) -> anyhow::Result<()> {
    let (fleet, first) = super::run::start_fleet(servers, Duration::from_secs(30))?;
    let planner = super::plan::load_model(model)?;
    let tools = first.catalog.len();
    let (mut list_ms, mut total_ms) = (Vec::new(), Vec::new());
    for _ in 0..refreshes.max(1) {
        let start = Instant::now();
        let (union, errors) = fleet.relist();
        if let Some(e) = errors.first() {
            anyhow::bail!("{e}");
        }
        let union = union?;
        let listed = start.elapsed();
        // A changed catalog hashes anew, so the planner compiles its grammar and validator
        // again: clear the caches to pay for that every time.
        planner.clear_caches();
        let catalog = Arc::new(union.catalog);
        planner.check_catalog(Some(&catalog))?;
        planner.prepare_catalog(&catalog)?;
        list_ms.push(listed.as_secs_f64() * 1e3);
        total_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    list_ms.sort_by(f64::total_cmp);
    total_ms.sort_by(f64::total_cmp);
    // At least one refresh ran, so every percentile exists.
    let pct = |v: &[f64], p: f64| plansmith_serve::bench::percentile(v, p).unwrap_or(0.0);
    let (l50, l99) = (pct(&list_ms, 50.0), pct(&list_ms, 99.0));
    let (t50, t99) = (pct(&total_ms, 50.0), pct(&total_ms, 99.0));
    if json {
        println!(
            "{}",
            serde_json::json!({"servers": servers.len(), "tools": tools, "refreshes": total_ms.len(),
                "list_p50_ms": l50, "list_p99_ms": l99, "refresh_p50_ms": t50, "refresh_p99_ms": t99})
        );
    } else {
        println!(
            "{} server(s), {tools} tools, {} refreshes\n\
             | step | p50 ms | p99 ms |\n|---|---:|---:|\n\
             | list every server again + union + per-tool check | {l50:.2} | {l99:.2} |\n\
             | ... + the planner's grammar for the new catalog | {t50:.2} | {t99:.2} |",
            servers.len(),
            total_ms.len()
        );
    }
    Ok(())
}
