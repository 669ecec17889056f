//! `/v1/score` and `/v1/sample`: what the planner thinks of a given plan, and the plans it
//! would write without the grammar. Both use the planner's own catalog (a cascade's first hop)
//! and run on the planner workers like `/v1/plan`, under the same timeout and queue.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use plansmith_core::{Plan, Syntax};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::openai::finite;
use crate::params::{self, field, Object};
use crate::server::{read_body, AppState, Done, Task};

/// The most draws one `/v1/sample` request may ask for.
pub const MAX_SAMPLES: u64 = 64;

fn request_text(body: &Object) -> Result<String, ApiError> {
    match params::opt_str(body, "request")? {
        Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
        Some(_) => Err(ApiError::invalid("request", "`request` is empty")),
        None => Err(ApiError::invalid("request", "`request` is required")),
    }
}

/// The plan to score: `calls` as `/v1/plan` returns them, or `plan` as DSL text.
fn given_plan(body: &Object) -> Result<Plan, ApiError> {
    match (field(body, "calls"), field(body, "plan")) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "plan",
            "give `calls` or `plan`, not both",
        )),
        (Some(calls), None) => {
            let text = json!(calls).to_string();
            Syntax::JsonArray.parse(&text).map_err(|e| {
                ApiError::invalid(
                    "calls",
                    format!("`calls` must be an array of {{\"name\", \"arguments\"}}: {e}"),
                )
            })
        }
        (None, Some(Value::String(text))) => Syntax::Dsl
            .parse(text)
            .map_err(|e| ApiError::invalid("plan", format!("`plan` does not parse as DSL: {e}"))),
        (None, Some(v)) => Err(ApiError::invalid(
            "plan",
            format!("`plan` must be DSL text, not {}", params::kind(v)),
        )),
        (None, None) => Err(ApiError::invalid(
            "calls",
            "`calls` (or `plan`, as DSL text) is required",
        )),
    }
}

/// `POST /v1/score {"request", "calls" | "plan"}` ->
/// `{"score" | null, "unscored" | null, "floor", "would_accept", "valid", "violations"}`: the
/// score is the confidence the planner would have had writing the plan (its own mode, as the
/// floor); an invalid plan, or one its grammar does not write, has none and says why.
pub async fn score(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let result = async {
        let bytes = read_body(&st, req).await?;
        let body = params::parse_object(&bytes)?;
        params::only_fields(&body, &["request", "calls", "plan"])?;
        let request = request_text(&body)?;
        let plan = given_plan(&body)?;
        let (done, _) = st.run(Task::Score { request, plan }, false).await?;
        let Done::Score(given) = done else {
            return Err(ApiError::internal(
                "a worker answered a score with something else",
            ));
        };
        let floor = st.planner().settings.conf_floor;
        Ok::<_, ApiError>(
            Json(json!({
                "score": given.score.map(finite),
                "unscored": given.unscored,
                "floor": finite(floor),
                "would_accept": given.would_accept(floor),
                "valid": given.violations.is_empty(),
                "violations": given.violations,
            }))
            .into_response(),
        )
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /v1/sample {"request", "n" (5), "temperature" (1.0), "seed" (0)}` ->
/// `{"samples": [{"calls" | null, "score" | null, "valid", "text", "violations"}]}`, best first;
/// invalid draws are returned as invalid, never dropped.
pub async fn sample(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let result = async {
        let bytes = read_body(&st, req).await?;
        let body = params::parse_object(&bytes)?;
        params::only_fields(&body, &["request", "n", "temperature", "seed"])?;
        let request = request_text(&body)?;
        let n = params::opt_uint(&body, "n")?.unwrap_or(5);
        if !(1..=MAX_SAMPLES).contains(&n) {
            return Err(ApiError::invalid(
                "n",
                format!("`n` must be between 1 and {MAX_SAMPLES}, not {n}"),
            ));
        }
        let temperature = params::opt_number(&body, "temperature", 0.0, 10.0)?.unwrap_or(1.0);
        let seed = params::opt_uint(&body, "seed")?.unwrap_or(0);
        let task = Task::Sample {
            request,
            n: n as usize,
            temperature: temperature as f32,
            seed,
            deadline: Some(std::time::Instant::now() + st.config().timeout),
        };
        let (done, _) = st.run(task, false).await?;
        let Done::Sample(samples) = done else {
            return Err(ApiError::internal(
                "a worker answered a sample with something else",
            ));
        };
        let samples: Vec<Value> = samples
            .iter()
            .map(|s| {
                json!({"calls": s.plan.as_ref().map(|p| &p.calls), "score": s.score.map(finite),
                       "valid": s.plan.is_some(), "text": s.text, "violations": s.violations})
            })
            .collect();
        Ok::<_, ApiError>(Json(json!({ "samples": samples })).into_response())
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}
