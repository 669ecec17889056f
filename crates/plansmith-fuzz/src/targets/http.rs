//! Every HTTP route in process, on the embedded default planner: mutated bodies for each
//! route (streaming included), sometimes the wrong method. No client input may get a 5xx;
//! every error is OpenAI-shaped with a message; a stream ends with `[DONE]`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use plansmith_serve::{router, AppState, ServeConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::pace_openai;
use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

const ROUTES: &[(&str, Method)] = &[
    ("/v1/chat/completions", Method::POST),
    ("/v1/plan", Method::POST),
    ("/v1/score", Method::POST),
    ("/v1/sample", Method::POST),
    ("/v1/models", Method::GET),
    ("/v1/models/plansmith", Method::GET),
    ("/v1/tools", Method::GET),
    ("/health", Method::GET),
    ("/metrics", Method::GET),
    ("/ui", Method::GET),
];

pub struct HttpTarget {
    app: axum::Router,
    rt: tokio::runtime::Runtime,
    seeds: Vec<(usize, Value)>,
}

fn seeds() -> Vec<(usize, Value)> {
    let weather = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}]);
    let user = |t: &str| json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": t}]);
    vec![
        (
            0,
            json!({"model": "plansmith", "messages": user("open safari")}),
        ),
        (
            0,
            json!({"model": "x", "messages": user("what is the weather in Paris"), "tools": weather, "tool_choice": "required", "max_tokens": 64}),
        ),
        (
            0,
            json!({"messages": user("scroll down"), "stream": true, "stream_options": {"include_usage": true}, "parallel_tool_calls": false}),
        ),
        (
            0,
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "open safari"}]},
            {"role": "assistant", "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "open", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "ok"}], "tool_choice": {"type": "function", "function": {"name": "open"}}}),
        ),
        (
            0,
            json!({"messages": user("open safari"), "tools": pace_openai(), "temperature": 0.2, "seed": 3, "stop": ["\n"]}),
        ),
        (1, json!({"request": "open safari"})),
        (
            1,
            json!({"request": "text Bob hello", "tools": weather, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "entities": [{"type": "contact", "label": "Bob"}], "max_calls": 2, "max_tokens": 32}),
        ),
        (
            1,
            json!({"request": "((((((((((((((((((((((((((((((", "tool_choice": {"type": "function", "function": {"name": "say"}}}),
        ),
        (
            2,
            json!({"request": "open safari", "calls": [{"name": "open", "arguments": {"target": {"type": "app", "label": "safari"}}}]}),
        ),
        (
            2,
            json!({"request": "open safari", "plan": "open(target.type=app; target.label=safari)"}),
        ),
        (
            3,
            json!({"request": "open safari", "n": 2, "temperature": 0.7, "seed": 1}),
        ),
        (4, json!({})),
        (5, json!({})),
        (6, json!({})),
        (7, json!({})),
        (8, json!({})),
        (9, json!({})),
    ]
}

impl HttpTarget {
    pub fn new() -> Result<Self, String> {
        let planner = Arc::new(
            plansmith_planner::dir::default_planner()
                .map_err(|e| format!("the embedded planner: {e}"))?,
        );
        let config = ServeConfig {
            workers: 1,
            queue: 8,
            timeout: Duration::from_secs(30),
            max_body: 256 * 1024,
            model_id: "plansmith".into(),
            ..ServeConfig::default()
        };
        let state = AppState::new(planner, config).map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(HttpTarget {
            app: router(state),
            rt,
            seeds: seeds(),
        })
    }
}

impl Target for HttpTarget {
    fn name(&self) -> &'static str {
        "http"
    }

    fn budget(&self) -> Duration {
        Duration::from_secs(10)
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let (route, seed) = rng.pick(&self.seeds).clone();
        let donor = rng.pick(&self.seeds).1.clone();
        // Byte 0: the route; byte 1: odd = the wrong method; then the body.
        let mut out = vec![route as u8, u8::from(rng.chance(0.05))];
        out.extend(mutate::json_bytes(rng, &seed, &donor));
        out
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        if input.len() < 2 {
            return Ok(Verdict::Refused);
        }
        let (path, method) = &ROUTES[input[0] as usize % ROUTES.len()];
        let method = if input[1] % 2 == 1 {
            if *method == Method::GET {
                Method::POST
            } else {
                Method::GET
            }
        } else {
            method.clone()
        };
        let body = input[2..].to_vec();
        let req = Request::builder()
            .method(method.clone())
            .uri(*path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .map_err(|e| e.to_string())?;
        let app = self.app.clone();
        let (status, bytes, sse) = self.rt.block_on(async move {
            let resp = app.oneshot(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let sse = resp
                .headers()
                .get("content-type")
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, bytes, sse))
        })?;
        let text = String::from_utf8_lossy(&bytes);
        if status >= 500 {
            return Err(format!("{method} {path} answered {status}: {text}"));
        }
        if status >= 400 {
            let v: Value = serde_json::from_slice(&bytes)
                .map_err(|_| format!("{method} {path} answered {status} without JSON: {text}"))?;
            let msg = v["error"]["message"].as_str().unwrap_or_default();
            if msg.is_empty() || !v["error"]["type"].is_string() {
                return Err(format!(
                    "{method} {path}: a {status} that is not OpenAI-shaped: {text}"
                ));
            }
            return Ok(Verdict::Refused);
        }
        if sse && !text.trim_end().ends_with("data: [DONE]") {
            return Err(format!(
                "{path}: a stream that does not end with [DONE]: {text}"
            ));
        }
        Ok(Verdict::Accepted)
    }
}
