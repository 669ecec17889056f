//! Load generation against a running server (`plansmith bench serve`): `n` requests at a
//! fixed concurrency over kept-alive connections; latency percentiles, throughput, status
//! counts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::Method;
use serde::Serialize;
use serde_json::Value;

use crate::client::Client;
use crate::error::ServeError;
use crate::server::{spawn, ServeConfig};

/// What one load run measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub route: String,
    pub requests: usize,
    pub concurrency: usize,
    /// Responses by HTTP status.
    pub status: BTreeMap<u16, usize>,
    /// Requests that got no HTTP response at all.
    pub transport_errors: usize,
    pub server_errors: usize,
    pub seconds: f64,
    pub requests_per_sec: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// With a remote backend: each request's time minus the engine's own (`engine_ms` in the
    /// answer), i.e. what plansmith and the loopback add; `None` when no answer carried it.
    pub overhead_p50_ms: Option<f64>,
    pub overhead_p99_ms: Option<f64>,
}

/// Send `requests` POSTs to `path`, cycling through `bodies`, from `concurrency` clients.
pub async fn load(
    addr: SocketAddr,
    api_key: Option<&str>,
    path: &str,
    bodies: Arc<Vec<Value>>,
    requests: usize,
    concurrency: usize,
) -> LoadReport {
    let concurrency = concurrency.max(1);
    let next = Arc::new(AtomicUsize::new(0));
    let samples = Arc::new(Mutex::new(Vec::<(u16, f64)>::with_capacity(requests)));
    let overheads = Arc::new(Mutex::new(Vec::<f64>::new()));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (next, samples, overheads, bodies, path) = (
            next.clone(),
            samples.clone(),
            overheads.clone(),
            bodies.clone(),
            path.to_string(),
        );
        let mut client = Client::new(addr);
        if let Some(k) = api_key {
            client = client.with_bearer(k);
        }
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests || bodies.is_empty() {
                    break;
                }
                let body = bodies[i % bodies.len()].to_string();
                let t = Instant::now();
                let (status, engine_ms) = match client.send(Method::POST, &path, &[], body).await {
                    Ok(r) => (r.status, engine_ms(&r.body)),
                    Err(_) => (0, None),
                };
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if let (Some(e), Ok(mut o)) = (engine_ms, overheads.lock()) {
                    o.push(ms - e);
                }
                if let Ok(mut s) = samples.lock() {
                    s.push((status, ms));
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let seconds = start.elapsed().as_secs_f64();
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let mut report = summarize(path, concurrency, &samples, seconds);
    let mut overheads = overheads.lock().map(|o| o.clone()).unwrap_or_default();
    overheads.sort_by(f64::total_cmp);
    report.overhead_p50_ms = percentile(&overheads, 50.0);
    report.overhead_p99_ms = percentile(&overheads, 99.0);
    report
}

/// The engine's own time an answer reports (`/v1/plan`'s `engine_ms`, or the chat
/// completion's `plansmith.engine_ms`).
fn engine_ms(body: &[u8]) -> Option<f64> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.get("engine_ms")
        .or_else(|| v.pointer("/plansmith/engine_ms"))
        .and_then(Value::as_f64)
}

/// The `p`th percentile of sorted values (nearest rank), `None` for none.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    (!sorted.is_empty()).then(|| sorted[((p / 100.0) * (sorted.len() - 1) as f64).round() as usize])
}

/// Start a server for `planner` on a free loopback port (on a runtime of its own), send
/// `requests` requests built from `texts` at `concurrency` to `/v1/plan` and then the same load to
/// `/v1/chat/completions`, and stop it. The queue is sized so that the load itself never gets
/// 429: what is measured is planning plus HTTP, not rejection.
pub fn in_process(
    planner: std::sync::Arc<plansmith_planner::Planner>,
    mut config: ServeConfig,
    texts: &[String],
    requests: usize,
    concurrency: usize,
) -> Result<Vec<LoadReport>, ServeError> {
    if texts.is_empty() {
        return Err(ServeError::Config("no requests to send".into()));
    }
    config.addr = SocketAddr::from(([127, 0, 0, 1], 0));
    config.queue = config.queue.max(concurrency * 2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("plansmith-bench")
        .build()?;
    rt.block_on(async move {
        let server = spawn(planner, config.clone()).await?;
        let plan: Vec<Value> = texts.iter().map(|t| serde_json::json!({"request": t})).collect();
        let chat: Vec<Value> = texts
            .iter()
            .map(|t| serde_json::json!({"model": config.model_id, "messages": [{"role": "user", "content": t}]}))
            .collect();
        // Warm the grammar, validator and prefix caches the way a running server would be.
        let key = config.api_key.as_deref();
        load(server.addr, key, "/v1/plan", Arc::new(plan.iter().take(4).cloned().collect()), 4, 1).await;
        let mut reports = Vec::new();
        reports.push(load(server.addr, key, "/v1/plan", Arc::new(plan), requests, concurrency).await);
        reports.push(load(server.addr, key, "/v1/chat/completions", Arc::new(chat), requests, concurrency).await);
        server.shutdown().await?;
        Ok(reports)
    })
}

/// A Markdown table of load reports.
pub fn table(reports: &[LoadReport]) -> String {
    let mut out = String::from(
        "| route | requests | concurrency | 2xx | 4xx | 5xx | no response | p50 ms | p90 ms | p99 ms | max ms | req/s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in reports {
        let count = |lo: u16, hi: u16| {
            r.status
                .iter()
                .filter(|(s, _)| (lo..hi).contains(*s))
                .map(|(_, n)| n)
                .sum::<usize>()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |\n",
            r.route,
            r.requests,
            r.concurrency,
            count(200, 300),
            count(400, 500),
            r.server_errors,
            r.transport_errors,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.max_ms,
            r.requests_per_sec
        ));
    }
    for r in reports {
        if let (Some(p50), Some(p99)) = (r.overhead_p50_ms, r.overhead_p99_ms) {
            out.push_str(&format!(
                "\n{}: time beyond the engine's own (request minus engine_ms): p50 {p50:.2} ms, p99 {p99:.2} ms\n",
                r.route
            ));
        }
    }
    out
}

/// Percentiles and counts of `(status, ms)` samples (status 0: no response).
pub fn summarize(
    route: &str,
    concurrency: usize,
    samples: &[(u16, f64)],
    seconds: f64,
) -> LoadReport {
    let mut status = BTreeMap::new();
    let mut lat: Vec<f64> = Vec::with_capacity(samples.len());
    let mut transport_errors = 0;
    for &(s, ms) in samples {
        if s == 0 {
            transport_errors += 1;
        } else {
            *status.entry(s).or_insert(0) += 1;
        }
        lat.push(ms);
    }
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((p / 100.0) * (lat.len() - 1) as f64).round() as usize]
        }
    };
    let server_errors = status
        .iter()
        .filter(|(s, _)| **s >= 500)
        .map(|(_, n)| n)
        .sum();
    LoadReport {
        route: route.to_string(),
        requests: samples.len(),
        concurrency,
        status,
        transport_errors,
        server_errors,
        seconds,
        requests_per_sec: if seconds > 0.0 {
            samples.len() as f64 / seconds
        } else {
            0.0
        },
        mean_ms: if lat.is_empty() {
            0.0
        } else {
            lat.iter().sum::<f64>() / lat.len() as f64
        },
        p50_ms: pct(50.0),
        p90_ms: pct(90.0),
        p99_ms: pct(99.0),
        max_ms: lat.last().copied().unwrap_or(0.0),
        overhead_p50_ms: None,
        overhead_p99_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let samples: Vec<(u16, f64)> = (1..=100)
            .map(|i| (if i == 100 { 503 } else { 200 }, i as f64))
            .collect();
        let r = summarize("/v1/plan", 4, &samples, 2.0);
        assert_eq!(r.p50_ms, 51.0);
        assert_eq!(r.p99_ms, 99.0);
        assert_eq!(r.max_ms, 100.0);
        assert_eq!(r.server_errors, 1);
        assert_eq!(r.requests_per_sec, 50.0);
    }
}
