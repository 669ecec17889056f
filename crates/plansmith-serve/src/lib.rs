//! plansmith-serve: the OpenAI-compatible HTTP server for plansmith planners.
//!
//! Routes (see the crate README for every behaviour):
//! - `POST /v1/chat/completions`: OpenAI tool calling (`tools`, `tool_choice`,
//!   `parallel_tool_calls`, `stream`), with a `plansmith` extension object in responses.
//! - `POST /v1/plan`: the native API (`{"request", "tools"?, "tool_choice"?, "entities"?}`).
//! - `GET /v1/models`, `GET /v1/tools` (the active catalog), `GET /health` (never behind the
//!   API key), `GET /metrics` (Prometheus).
//! - `GET /ui`: the playground page, which uses only the public routes above.
//!
//! Model work runs on a pool of dedicated worker threads fed by a bounded queue, never on the
//! async executor. One [`plansmith_planner::Planner`] is shared by every worker, and with it
//! the grammar and prefix caches.

/// Benchmarks (reached through `plansmith bench`); not part of the library API.
#[cfg(feature = "bench")]
pub mod bench;
pub mod client;
pub mod error;
pub mod metrics;
pub mod openai;
pub mod params;
pub mod pool;
pub mod score;
pub mod server;
pub mod ui;

pub use error::{ApiError, ServeError};
pub use server::{
    parse_plan, router, run_blocking, serve, spawn, AppState, LiveCatalog, LiveSource,
    RunningServer, ServeConfig,
};
