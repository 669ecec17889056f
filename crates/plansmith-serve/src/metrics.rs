//! Prometheus text metrics: requests by route and status, a latency histogram per route, and
//! the planner's own counters (escalations, grammar and prefix caches).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram's buckets.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The routes we label by name; anything else is `other` (keeps label cardinality bounded).
pub const ROUTES: [&str; 11] = [
    "/v1/chat/completions",
    "/v1/plan",
    "/v1/score",
    "/v1/sample",
    "/v1/tools",
    "/ui",
    "/v1/models",
    "/health",
    "/metrics",
    "/v1/models/{id}",
    "/ui/*",
];

pub fn route_label(path: &str) -> &'static str {
    if let Some(r) = ROUTES.iter().find(|r| **r == path) {
        return r;
    }
    if path.starts_with("/ui/") {
        return "/ui/*";
    }
    if path
        .strip_prefix("/v1/models/")
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
    {
        return "/v1/models/{id}";
    }
    "other"
}

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(&'static str, u16), u64>,
    latency: BTreeMap<&'static str, Histogram>,
    /// Decode-and-gate time per cascade hop (names come from the cascade file, checked at load).
    hop_latency: BTreeMap<String, Histogram>,
}

/// HTTP-level metrics, recorded by the tracking middleware.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// Gauges and counters owned by others, sampled when `/metrics` is rendered.
#[derive(Debug, Clone, Default)]
pub struct Sampled {
    pub plans: u64,
    pub escalations: u64,
    pub harvested_traces: u64,
    pub teacher_failures: u64,
    pub grammar_cache_hits: u64,
    pub grammar_cache_misses: u64,
    pub grammar_cache_entries: usize,
    pub prefix_cache_hits: u64,
    pub prefix_cache_misses: u64,
    pub queue_depth: usize,
    pub queue_capacity: usize,
    pub workers: usize,
    pub running: usize,
    pub queue_rejected: u64,
    pub jobs_skipped: u64,
    pub worker_panics: u64,
    /// A cascade's hops, in order (empty without one).
    pub hops: Vec<HopSample>,
}

/// One cascade hop's counters.
#[derive(Debug, Default, Clone)]
pub struct HopSample {
    pub name: String,
    pub requests: u64,
    pub answered: u64,
    pub escalated: u64,
}

impl Histogram {
    fn add(&mut self, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += s;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{b}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

impl Metrics {
    pub fn observe(&self, route: &'static str, status: u16, elapsed: Duration) {
        let Ok(mut m) = self.inner.lock() else { return };
        *m.requests.entry((route, status)).or_default() += 1;
        m.latency.entry(route).or_default().add(elapsed);
    }

    /// One cascade hop's decode-and-gate time for one request.
    pub fn observe_hop(&self, hop: &str, elapsed: Duration) {
        let Ok(mut m) = self.inner.lock() else { return };
        match m.hop_latency.get_mut(hop) {
            Some(h) => h.add(elapsed),
            None => m
                .hop_latency
                .entry(hop.to_string())
                .or_default()
                .add(elapsed),
        }
    }

    /// Requests recorded for `route` with `status` so far.
    pub fn count(&self, route: &str, status: u16) -> u64 {
        self.inner
            .lock()
            .map(|m| {
                m.requests
                    .iter()
                    .filter(|((r, s), _)| *r == route && *s == status)
                    .map(|(_, n)| n)
                    .sum()
            })
            .unwrap_or(0)
    }

    pub fn render(&self, s: &Sampled) -> String {
        let (requests, latency, hop_latency) = match self.inner.lock() {
            Ok(m) => (m.requests.clone(), m.latency.clone(), m.hop_latency.clone()),
            Err(_) => Default::default(),
        };
        let mut out = String::new();
        header(
            &mut out,
            "plansmith_http_requests_total",
            "counter",
            "HTTP requests by route and status code.",
        );
        for ((route, status), n) in &requests {
            let _ = writeln!(
                out,
                "plansmith_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        header(
            &mut out,
            "plansmith_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by route.",
        );
        for (route, h) in &latency {
            h.render(
                &mut out,
                "plansmith_http_request_duration_seconds",
                &format!("route=\"{route}\""),
            );
        }
        let counters: [(&str, &str, u64); 11] = [
            (
                "plansmith_plans_total",
                "Requests the planner decoded.",
                s.plans,
            ),
            (
                "plansmith_escalations_total",
                "Plans that escalated (below the floor, invalid or dead-ended).",
                s.escalations,
            ),
            (
                "plansmith_harvested_traces_total",
                "Teacher answers appended to the harvest file.",
                s.harvested_traces,
            ),
            (
                "plansmith_teacher_failures_total",
                "Escalations the teacher failed to answer.",
                s.teacher_failures,
            ),
            (
                "plansmith_grammar_cache_hits_total",
                "Compiled-grammar cache hits.",
                s.grammar_cache_hits,
            ),
            (
                "plansmith_grammar_cache_misses_total",
                "Compiled-grammar cache misses.",
                s.grammar_cache_misses,
            ),
            (
                "plansmith_prefix_cache_hits_total",
                "Catalog prompt-prefix KV cache hits.",
                s.prefix_cache_hits,
            ),
            (
                "plansmith_prefix_cache_misses_total",
                "Catalog prompt-prefix KV cache misses.",
                s.prefix_cache_misses,
            ),
            (
                "plansmith_queue_rejected_total",
                "Requests refused because the work queue was full.",
                s.queue_rejected,
            ),
            (
                "plansmith_jobs_skipped_total",
                "Queued jobs skipped because the client had gone or timed out.",
                s.jobs_skipped,
            ),
            (
                "plansmith_worker_panics_total",
                "Planner panics caught by a worker.",
                s.worker_panics,
            ),
        ];
        for (name, help, v) in counters {
            header(&mut out, name, "counter", help);
            let _ = writeln!(out, "{name} {v}");
        }
        let gauges: [(&str, &str, usize); 5] = [
            (
                "plansmith_grammar_cache_entries",
                "Compiled grammars held in the cache.",
                s.grammar_cache_entries,
            ),
            (
                "plansmith_queue_depth",
                "Jobs waiting for a worker.",
                s.queue_depth,
            ),
            (
                "plansmith_queue_capacity",
                "How many jobs may wait for a worker.",
                s.queue_capacity,
            ),
            ("plansmith_workers", "Planner worker threads.", s.workers),
            (
                "plansmith_workers_busy",
                "Worker threads planning right now.",
                s.running,
            ),
        ];
        for (name, help, v) in gauges {
            header(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {v}");
        }
        if !s.hops.is_empty() {
            type Pick = fn(&HopSample) -> String;
            let series: [(&str, &str, &str, Pick); 3] = [
                (
                    "plansmith_hop_requests_total",
                    "counter",
                    "Requests a cascade hop decoded.",
                    |h| h.requests.to_string(),
                ),
                (
                    "plansmith_hop_answered_total",
                    "counter",
                    "Requests a cascade hop's model answered at its floor.",
                    |h| h.answered.to_string(),
                ),
                (
                    "plansmith_hop_escalated_total",
                    "counter",
                    "Requests a cascade hop passed on (to the next hop or the teacher).",
                    |h| h.escalated.to_string(),
                ),
            ];
            for (name, kind, help, pick) in series {
                header(&mut out, name, kind, help);
                for h in &s.hops {
                    // Hop names are checked at load ([A-Za-z0-9_.-]), so they need no escaping.
                    let _ = writeln!(out, "{name}{{hop=\"{}\"}} {}", h.name, pick(h));
                }
            }
            header(
                &mut out,
                "plansmith_hop_duration_seconds",
                "histogram",
                "Time a cascade hop spent decoding and gating a request.",
            );
            for (hop, h) in &hop_latency {
                h.render(
                    &mut out,
                    "plansmith_hop_duration_seconds",
                    &format!("hop=\"{hop}\""),
                );
            }
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_labels_are_bounded() {
        let m = Metrics::default();
        m.observe(route_label("/v1/plan"), 200, Duration::from_micros(700));
        m.observe(route_label("/v1/plan"), 200, Duration::from_millis(30));
        m.observe(route_label("/etc/passwd"), 404, Duration::from_millis(1));
        let text = m.render(&Sampled::default());
        assert!(
            text.contains("plansmith_http_requests_total{route=\"/v1/plan\",status=\"200\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("plansmith_http_requests_total{route=\"other\",status=\"404\"} 1"),
            "{text}"
        );
        assert!(text.contains(
            "plansmith_http_request_duration_seconds_bucket{route=\"/v1/plan\",le=\"0.001\"} 1"
        ));
        assert!(text.contains(
            "plansmith_http_request_duration_seconds_bucket{route=\"/v1/plan\",le=\"0.05\"} 2"
        ));
        assert!(
            text.contains("plansmith_http_request_duration_seconds_count{route=\"/v1/plan\"} 2")
        );
        assert_eq!(route_label("/v1/models/plansmith"), "/v1/models/{id}");
        assert_eq!(m.count("/v1/plan", 200), 2);
    }
}
