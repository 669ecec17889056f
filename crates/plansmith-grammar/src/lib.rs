//! plansmith-grammar: catalog -> llguidance grammar -> token masks, with a grammar cache.
//!
//! ```text
//! let env = TokEnv::from_token_bytes(token_bytes, eos, &[], Some(model_vocab))?;
//! let engine = Engine::new(env)?;                         // once per vocabulary
//! let mut c = engine.constraint(&catalog, &options, &request)?;  // per request (cached)
//! loop {
//!     for t in c.forced_tokens() { c.commit(t)?; }        // fast-forward, skip the model
//!     if c.is_stopped() { break; }
//!     c.apply_mask(&mut logits)?;                         // -inf where disallowed
//!     c.commit(sample(&logits))?;
//! }
//! ```

/// Benchmarks (reached through `plansmith bench`); not part of the library API.
#[cfg(feature = "bench")]
pub mod bench;
mod copyfilter;
mod engine;
mod error;
mod gen;
pub mod regex;
mod runtime;
mod schema_form;
mod tokenv;

pub use engine::{CacheKey, CacheStats, Engine, Prepared};
pub use error::{Dead, GrammarError, TokEnvError};
pub use gen::{grammar_text, template, Options, Template, DSL_ARRAY_CAP, MAX_CALLS};
/// The request types live in plansmith-core (the server parses them without this crate);
/// re-exported here because every grammar call takes them.
pub use plansmith_core::request::{Entity, Request, ToolChoice};
pub use runtime::{Constraint, ConstraintState, Mask};
pub use schema_form::plan_schema;
pub use tokenv::TokEnv;
