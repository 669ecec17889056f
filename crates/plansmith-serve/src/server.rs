//! The router, its handlers and middleware, and the ways to run it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use plansmith_core::Catalog;
use plansmith_core::Plan;
use plansmith_planner::{
    BackendError, GrammarError, Outcome, PlanRequest, Planner, PlannerError, Sample, Source,
};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::error::{ApiError, ServeError};
use crate::metrics::{route_label, HopSample, Metrics, Sampled};
use crate::openai::{self, Reply};
use crate::params::{self, field, Object};
use crate::pool::{Pool, SubmitError, Work};

/// A catalog that changes while the server runs (the tools of MCP servers). The server polls
/// it; a new catalog replaces the served one for the requests that arrive after it (requests
/// in flight finish on the catalog they started with).
pub trait LiveCatalog: Send + Sync {
    /// A new catalog if the source changed since the last call. Called from a blocking task.
    fn poll(&self) -> Option<Arc<Catalog>>;
    /// How often to poll.
    fn every(&self) -> Duration {
        Duration::from_millis(500)
    }
}

/// A shared [`LiveCatalog`] (its own type so [`ServeConfig`] stays `Debug`).
#[derive(Clone)]
pub struct LiveSource(pub Arc<dyn LiveCatalog>);

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveSource")
    }
}

/// How the server runs. [`ServeConfig::default`] is what `plansmith serve` uses without flags.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen; loopback unless told otherwise.
    pub addr: SocketAddr,
    /// The catalog requests without `tools` plan against (default: the planner's own).
    pub tools: Option<Arc<Catalog>>,
    /// When set, every route but `/health` needs `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// Planner worker threads.
    pub workers: usize,
    /// Jobs that may wait for a worker; beyond that, 429.
    pub queue: usize,
    /// Per-request limit on queueing + planning; beyond that, 504.
    pub timeout: Duration,
    /// Largest accepted request body in bytes; beyond that, 413.
    pub max_body: usize,
    /// The model id `/v1/models` lists and responses carry.
    pub model_id: String,
    /// Largest reply, in tokens, any request may have (None: the model's own budget); a
    /// request's `max_tokens` is capped by it.
    pub max_tokens: Option<usize>,
    /// Serve the playground page at `/ui` (`plansmith serve --no-ui` turns it off).
    pub ui: bool,
    /// Where a changing catalog comes from (`plansmith serve --mcp`); its first catalog is
    /// `tools`.
    pub live_tools: Option<LiveSource>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tools: None,
            api_key: None,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            queue: 64,
            timeout: Duration::from_secs(30),
            max_body: 1 << 20,
            model_id: "plansmith".into(),
            max_tokens: None,
            ui: true,
            live_tools: None,
        }
    }
}

/// A bounded extra past `max_body` that is read and thrown away before answering 413, so a
/// client still sending its body sees the answer instead of a reset connection.
const DRAIN_CAP: usize = 8 << 20;

/// What a worker is asked to do: plan, score a given plan, or draw plans.
pub enum Task {
    Plan(PlanRequest),
    Score {
        request: String,
        plan: Plan,
    },
    Sample {
        request: String,
        n: usize,
        temperature: f32,
        seed: u64,
        deadline: Option<Instant>,
    },
}

/// What it did.
pub enum Done {
    Plan(Outcome),
    Score(plansmith_planner::GivenPlan),
    Sample(Vec<Sample>),
}

type Job = Result<Done, PlannerError>;

fn run_task(planner: &Planner, task: &Task) -> Job {
    Ok(match task {
        Task::Plan(req) => Done::Plan(planner.plan_request(req)?),
        Task::Score { request, plan } => Done::Score(planner.judge_given(request, plan)?),
        Task::Sample {
            request,
            n,
            temperature,
            seed,
            deadline,
        } => Done::Sample(planner.sample_until(request, *n, *temperature, *seed, *deadline)?),
    })
}

/// Everything the handlers share. The planner (and with it the grammar and prefix caches)
/// is one, shared by all workers.
pub struct AppState {
    planner: Arc<Planner>,
    config: ServeConfig,
    /// Swapped whole when a live catalog changes; each request takes the `Arc` it starts with.
    catalog: RwLock<Arc<Catalog>>,
    pool: Pool<Task, Job>,
    metrics: Metrics,
    next_id: AtomicU64,
}

impl AppState {
    pub fn new(planner: Arc<Planner>, config: ServeConfig) -> Result<Arc<AppState>, ServeError> {
        if config.max_body == 0 {
            return Err(ServeError::Config(
                "max_body must be at least 1 byte".into(),
            ));
        }
        let catalog = config
            .tools
            .clone()
            .unwrap_or_else(|| planner.catalog.clone());
        planner
            .check_catalog(Some(&catalog))
            .map_err(|e| ServeError::Config(e.to_string()))?;
        let p = planner.clone();
        let work: Work<Task, Job> = Arc::new(move |task: &Task| run_task(&p, task));
        let pool = Pool::new(config.workers, config.queue, work)?;
        Ok(Arc::new(AppState {
            planner,
            config,
            catalog: RwLock::new(catalog),
            pool,
            metrics: Metrics::default(),
            next_id: AtomicU64::new(1),
        }))
    }

    pub fn config(&self) -> &ServeConfig {
        &self.config
    }

    /// The catalog requests without `tools` plan against, now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Serve `catalog` from now on, if the planner can plan for it (checked first; on error
    /// the old one stays).
    pub fn set_catalog(&self, catalog: Arc<Catalog>) -> Result<(), ServeError> {
        self.planner
            .check_catalog(Some(&catalog))
            .map_err(|e| ServeError::Config(e.to_string()))?;
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = catalog;
        Ok(())
    }

    pub fn planner(&self) -> &Planner {
        &self.planner
    }

    /// The Prometheus text `/metrics` serves.
    pub fn render_metrics(&self) -> String {
        let c = self.planner.counters();
        let g = self.planner.engine().cache_stats();
        let s = self.pool.stats();
        // With a cascade, a request escalates when its last hop passes it on, and the teacher
        // (with its harvest) sits behind the last hop.
        let hops = self.planner.hops();
        let last = hops[hops.len() - 1].counters();
        let hops = match self.planner.hop_name() {
            None => Vec::new(),
            Some(_) => hops
                .iter()
                .map(|h| {
                    let c = h.counters();
                    HopSample {
                        name: h.hop_name().unwrap_or_default().to_string(),
                        requests: c.requests,
                        answered: c.answered,
                        escalated: c.escalated,
                    }
                })
                .collect(),
        };
        self.metrics.render(&Sampled {
            hops,
            plans: c.requests,
            escalations: last.escalated,
            harvested_traces: last.harvested_traces,
            teacher_failures: last.teacher_failures,
            grammar_cache_hits: g.hits,
            grammar_cache_misses: g.misses,
            grammar_cache_entries: g.entries,
            prefix_cache_hits: c.prefix_cache_hits,
            prefix_cache_misses: c.prefix_cache_misses,
            queue_depth: s.queued.load(Ordering::Relaxed),
            queue_capacity: self.pool.capacity(),
            workers: self.pool.workers(),
            running: s.running.load(Ordering::Relaxed),
            queue_rejected: s.rejected.load(Ordering::Relaxed),
            jobs_skipped: s.skipped.load(Ordering::Relaxed),
            worker_panics: s.panicked.load(Ordering::Relaxed),
        })
    }

    /// Run one plan on a worker, within the timeout.
    async fn plan(
        &self,
        req: PlanRequest,
        request_had_tools: bool,
    ) -> Result<(Outcome, Duration), ApiError> {
        // The worker stops decoding at the request's timeout, so a request the client has
        // stopped waiting for does not keep it busy.
        let mut req = req;
        req.deadline = Some(Instant::now() + self.config.timeout);
        if let Some(cap) = self.config.max_tokens {
            req.max_tokens = Some(req.max_tokens.map_or(cap, |m| m.min(cap)));
        }
        match self.run(Task::Plan(req), request_had_tools).await? {
            (Done::Plan(o), waited) => {
                for h in &o.hops {
                    self.metrics.observe_hop(&h.hop, h.latency);
                }
                Ok((o, waited))
            }
            _ => Err(ApiError::internal(
                "a worker answered a plan with something else",
            )),
        }
    }

    /// Run one task on a worker, within the timeout.
    pub(crate) async fn run(
        &self,
        task: Task,
        request_had_tools: bool,
    ) -> Result<(Done, Duration), ApiError> {
        let start = std::time::Instant::now();
        let ticket = self.pool.submit(task).map_err(|e| match e {
            SubmitError::Full => ApiError::queue_full(self.pool.capacity()),
            SubmitError::Closed => ApiError::unavailable("the server is shutting down"),
        })?;
        // On timeout (or when the client goes away and this future is dropped) the ticket is
        // dropped with it, which marks the job cancelled.
        let done = match tokio::time::timeout(self.config.timeout, ticket.wait()).await {
            Err(_) => return Err(ApiError::timeout(self.config.timeout.as_millis())),
            Ok(None) => return Err(ApiError::unavailable("the planner workers have stopped")),
            // A plan that finished past the deadline is late all the same: the timer is only
            // polled after the reply, so without this a fast planner could beat even a zero
            // timeout.
            Ok(Some(_)) if start.elapsed() > self.config.timeout => {
                return Err(ApiError::timeout(self.config.timeout.as_millis()))
            }
            Ok(Some(done)) => done,
        };
        match done.output {
            Err(panic) => Err(ApiError::internal(panic)),
            Ok(Ok(done_task)) => Ok((done_task, done.waited)),
            Ok(Err(PlannerError::Grammar(GrammarError::UnknownTool(name)))) => {
                Err(ApiError::invalid(
                    "tool_choice",
                    format!("tool_choice names `{name}`, which is not in the catalog"),
                ))
            }
            Ok(Err(PlannerError::Grammar(e))) if request_had_tools => Err(ApiError::invalid(
                "tools",
                format!("the tools cannot be compiled into a grammar: {e}"),
            )),
            Ok(Err(PlannerError::Catalog(e))) => Err(ApiError::invalid(
                "tools",
                format!("invalid tool catalog: {e}"),
            )),
            Ok(Err(e @ PlannerError::TooLong(_))) => Err(ApiError::invalid("request", e.to_string())),
            Ok(Err(e @ PlannerError::CatalogTooLong { .. })) if request_had_tools => {
                Err(ApiError::invalid("tools", e.to_string()))
            }
            Ok(Err(PlannerError::Backend(e @ BackendError::Timeout { .. }))) => {
                Err(ApiError::backend_timeout(e.to_string()))
            }
            Ok(Err(PlannerError::Backend(e))) => Err(ApiError::bad_gateway(e.to_string())),
            Ok(Err(e @ PlannerError::RemoteOnly(_))) => Err(ApiError::unsupported(
                "model",
                e.to_string(),
            )),
            Ok(Err(PlannerError::Trace(e))) => Err(ApiError::harvest_failed(format!(
                "the teacher answered, but its answer could not be harvested, so it is not returned: {e}"
            ))),
            Ok(Err(e)) => Err(ApiError::internal(format!("planning failed: {e}"))),
        }
    }

    fn new_id(&self) -> String {
        format!(
            "chatcmpl-{:016x}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn tokens(&self, text: &str) -> usize {
        self.planner.count_tokens(text)
    }
}

/// The whole HTTP surface.
pub fn router(state: Arc<AppState>) -> Router {
    let routes = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/plan", post(plan))
        .route("/v1/score", post(crate::score::score))
        .route("/v1/sample", post(crate::score::sample))
        .route("/v1/tools", get(tools))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/health", get(health))
        .route("/metrics", get(metrics));
    let routes = if state.config.ui {
        crate::ui::routes(routes)
    } else {
        routes
    };
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state)
}

async fn track(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = route_label(req.uri().path());
    let start = Instant::now();
    let resp = next.run(req).await;
    st.metrics
        .observe(route, resp.status().as_u16(), start.elapsed());
    resp
}

async fn auth(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(key) = &st.config.api_key else {
        return next.run(req).await;
    };
    // The playground's files hold no data: the page asks for the key and sends it with every
    // API call it makes, under the same rule as any client.
    if req.uri().path() == "/health" || (st.config.ui && crate::ui::is_page(req.uri().path())) {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match given.and_then(|v| v.strip_prefix("Bearer ")) {
        None => ApiError::unauthorized("missing API key: send `Authorization: Bearer <key>`")
            .into_response(),
        Some(k) if !same(k.trim().as_bytes(), key.as_bytes()) => {
            ApiError::unauthorized("invalid API key").into_response()
        }
        Some(_) => next.run(req).await,
    }
}

/// Compare without an early exit on the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.uri().path()
    ))
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// The body, at most `max_body` bytes; a larger one is drained (up to a cap) and refused.
pub(crate) async fn read_body(st: &AppState, req: Request) -> Result<Bytes, ApiError> {
    let limit = st.config.max_body;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit.saturating_add(DRAIN_CAP)) {
        return Err(ApiError::too_large(limit));
    }
    let mut body = req.into_body();
    let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| ApiError::bad_body(format!("could not read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            total += data.len();
            if total > limit {
                if total > limit.saturating_add(DRAIN_CAP) {
                    break;
                }
                continue;
            }
            buf.extend_from_slice(&data);
        }
    }
    if total > limit {
        return Err(ApiError::too_large(limit));
    }
    Ok(Bytes::from(buf))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn chat_completions(State(st): State<Arc<AppState>>, req: Request) -> Response {
    match chat_inner(&st, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn chat_inner(st: &AppState, req: Request) -> Result<Response, ApiError> {
    let bytes = read_body(st, req).await?;
    let body = params::parse_object(&bytes)?;
    let chat = openai::parse_chat(&body, &st.catalog())?;
    let had_tools = field(&body, "tools").is_some();
    let requires_call = openai::call_was_required(&chat.plan.tool_choice);
    let prompt_tokens = st.tokens(&chat.plan.text);
    let reply = if chat.turn_done && !requires_call {
        Reply {
            calls: Vec::new(),
            spoken_text: None,
            ext: openai::extension(
                f32::NAN,
                false,
                Source::None,
                Some("tool results follow the last user message: that turn was already planned"),
            ),
            prompt_tokens,
            completion_tokens: 0,
        }
    } else {
        let (o, _) = st.plan(chat.plan.clone(), had_tools).await?;
        if o.calls.is_empty() && requires_call {
            return Err(ApiError::no_plan(format!(
                "tool_choice requires a call, but no verified plan was made{}",
                o.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )));
        }
        let mut ext = openai::extension(o.confidence, o.escalated, o.source, o.reason.as_deref());
        add_hops(&mut ext, &o);
        Reply {
            ext,
            completion_tokens: st.tokens(&o.text),
            // What the model read, tools prompt included; the request alone where no local
            // model read a prompt (a remote engine's reply, a dead end before the model).
            prompt_tokens: o.prompt_tokens.unwrap_or(prompt_tokens),
            calls: o.calls,
            spoken_text: o.spoken_text,
        }
    };
    let id = st.new_id();
    let created = unix_now();
    let model = &st.config.model_id;
    if chat.stream {
        let body = openai::sse_body(&openai::chunks(
            &id,
            created,
            model,
            &reply,
            chat.include_usage,
        ));
        let mut resp = Response::new(Body::from(body));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return Ok(resp);
    }
    Ok(Json(openai::completion(&id, created, model, &reply)).into_response())
}

const PLAN_FIELDS: [&str; 6] = [
    "request",
    "tools",
    "tool_choice",
    "entities",
    "max_calls",
    "max_tokens",
];

/// Read a `/v1/plan` request. Unlike the OpenAI route, unknown fields are refused.
pub fn parse_plan(body: &Object, catalog: &Arc<Catalog>) -> Result<PlanRequest, ApiError> {
    params::only_fields(body, &PLAN_FIELDS)?;
    let text = match body.get("request") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(ApiError::invalid("request", "`request` is empty")),
        None | Some(Value::Null) => {
            return Err(ApiError::invalid("request", "`request` is required"))
        }
        Some(v) => {
            return Err(ApiError::invalid(
                "request",
                format!("`request` must be a string, not {}", params::kind(v)),
            ))
        }
    };
    let request_catalog = field(body, "tools")
        .map(|t| params::parse_tools(t, "tools"))
        .transpose()?;
    let effective = request_catalog.unwrap_or_else(|| catalog.clone());
    let tool_choice = params::parse_tool_choice(field(body, "tool_choice"), &effective, true)?;
    let entities = params::parse_entities(field(body, "entities"), "entities")?;
    let max_calls = match params::opt_uint(body, "max_calls")? {
        Some(0) => {
            return Err(ApiError::invalid(
                "max_calls",
                "`max_calls` must be at least 1",
            ))
        }
        Some(m) if m > plansmith_planner::MAX_CALLS as u64 => {
            return Err(ApiError::invalid(
                "max_calls",
                format!(
                    "`max_calls` must be at most {} (got {m})",
                    plansmith_planner::MAX_CALLS
                ),
            ))
        }
        m => m.map(|m| m as usize),
    };
    let max_tokens = match params::opt_uint(body, "max_tokens")? {
        Some(0) => {
            return Err(ApiError::invalid(
                "max_tokens",
                "`max_tokens` must be at least 1",
            ))
        }
        m => m.map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
    };
    Ok(PlanRequest {
        text,
        catalog: Some(effective),
        tool_choice,
        max_calls,
        entities,
        max_tokens,
        deadline: None,
    })
}

/// With a cascade: which hop answered (`teacher`, or null when none did) and every hop's
/// confidence, floor and latency. With a remote backend: the engine's own time.
fn add_hops(out: &mut serde_json::Value, o: &Outcome) {
    if let Some(engine) = o.engine {
        out["engine_ms"] = json!(engine.as_secs_f64() * 1e3);
    }
    if !o.hops.is_empty() {
        out["hop"] = json!(o.hop);
        out["hops"] = json!(o.hops);
    }
}

/// The floor the plan's confidence was held to: the answering hop's in a cascade (the last
/// hop's when none answered), else the planner's.
fn floor_of(planner: &Planner, o: &Outcome) -> f32 {
    let hop = o
        .hops
        .iter()
        .find(|h| Some(&h.hop) == o.hop.as_ref())
        .or(o.hops.last());
    hop.map_or(planner.settings.conf_floor, |h| h.floor)
}

async fn plan(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let result = async {
        let bytes = read_body(&st, req).await?;
        let body = params::parse_object(&bytes)?;
        let plan = parse_plan(&body, &st.catalog())?;
        let (o, waited) = st.plan(plan, field(&body, "tools").is_some()).await?;
        let mut out = json!({
            "calls": o.calls,
            "confidence": openai::finite(o.confidence),
            "escalated": o.escalated,
            "floor": openai::finite(floor_of(&st.planner, &o)),
            "source": openai::source_name(o.source),
            "harvested": o.source == Source::Teacher && st.planner.harvests(),
            "latency_ms": o.latency.as_secs_f64() * 1e3,
            "queue_ms": waited.as_secs_f64() * 1e3,
        });
        if let Some(s) = &o.spoken_text {
            out["spoken_text"] = json!(s);
        }
        if let Some(r) = &o.reason {
            out["reason"] = json!(r);
        }
        if let Some(n) = o.prompt_tokens {
            out["prompt_tokens"] = json!(n);
        }
        add_hops(&mut out, &o);
        Ok::<_, ApiError>(Json(out).into_response())
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

fn model_object(st: &AppState) -> Value {
    json!({"id": st.config.model_id, "object": "model", "created": 0, "owned_by": "plansmith",
           "plansmith": {"tools": st.catalog().names().collect::<Vec<_>>(), "conf_floor": openai::finite(st.planner.settings.conf_floor)}})
}

/// The catalog requests without `tools` plan against, as OpenAI `tools`.
async fn tools(State(st): State<Arc<AppState>>) -> Json<Value> {
    let catalog = st.catalog();
    Json(json!({"object": "list", "hash": catalog.hash(), "tools": catalog.to_openai()}))
}

async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"object": "list", "data": [model_object(&st)]}))
}

async fn model(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if id == st.config.model_id {
        Ok(Json(model_object(&st)))
    } else {
        Err(ApiError::not_found(format!(
            "no model `{id}` (this server serves `{}`)",
            st.config.model_id
        )))
    }
}

async fn health(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"status": "ok", "model": st.config.model_id}))
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut resp = st.render_metrics().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// A server running on the current tokio runtime (tests, benchmarks).
pub struct RunningServer {
    pub addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Stop accepting, finish in-flight requests, and wait.
    pub async fn shutdown(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        (&mut self.task)
            .await
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))??;
        Ok(())
    }
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })
}

/// Poll the live catalog, if any, for as long as the server runs; a catalog the planner cannot
/// plan for is reported and the old one kept.
fn watch_live_catalog(state: &Arc<AppState>) {
    let Some(LiveSource(live)) = state.config.live_tools.clone() else {
        return;
    };
    let state = Arc::downgrade(state);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(live.every());
        loop {
            tick.tick().await;
            let Some(st) = state.upgrade() else { return };
            let l = live.clone();
            let Ok(Some(catalog)) = tokio::task::spawn_blocking(move || l.poll()).await else {
                continue;
            };
            let n = catalog.tools.len();
            match st.set_catalog(catalog) {
                Ok(()) => eprintln!("catalog changed: now {n} tools"),
                Err(e) => eprintln!("warning: the changed catalog is not served: {e}"),
            }
        }
    });
}

/// Bind `config.addr` (port 0 picks one) and serve in a background task.
pub async fn spawn(
    planner: Arc<Planner>,
    config: ServeConfig,
) -> Result<RunningServer, ServeError> {
    let listener = bind(config.addr).await?;
    let addr = listener.local_addr()?;
    let state = AppState::new(planner, config)?;
    watch_live_catalog(&state);
    let app = router(state.clone());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await
    });
    Ok(RunningServer {
        addr,
        state,
        shutdown: Some(tx),
        task,
    })
}

/// Bind, report the bound address to `on_listen`, and serve until `shutdown` resolves.
pub async fn serve(
    planner: Arc<Planner>,
    config: ServeConfig,
    on_listen: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let listener = bind(config.addr).await?;
    let state = AppState::new(planner, config)?;
    watch_live_catalog(&state);
    on_listen(listener.local_addr()?);
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// [`serve`] on a runtime of its own, until Ctrl-C (what `plansmith serve` calls).
pub fn run_blocking(
    planner: Arc<Planner>,
    config: ServeConfig,
    on_listen: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("plansmith-http")
        .build()?;
    rt.block_on(serve(planner, config, on_listen, async {
        let _ = tokio::signal::ctrl_c().await;
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
