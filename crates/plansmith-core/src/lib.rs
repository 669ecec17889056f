//! plansmith-core: everything about tool calling that has no machine learning in it.
//!
//! It owns tool catalogs (and their importers), calls and plans, the text syntaxes a planner
//! emits (plan DSL, envelope JSON, OpenAI `tool_calls`, plain JSON array), validation of a plan
//! against a catalog and a policy, and training traces. It must not know about models, tensors,
//! grammars or HTTP: the crates that do build on these types instead of re-parsing JSON.

pub mod bfcl;
pub mod catalog;
pub mod overlap;
pub mod pattern;
pub mod plan;
pub mod policy;
pub mod request;
pub mod schema;
pub mod syntax;
pub mod trace;
pub mod validate;

pub use catalog::{Catalog, CatalogError, CatalogFormat, Tool};
pub use plan::{Call, Plan};
pub use policy::{CopyRule, CopyUnit, ParamRef, Policy};
pub use request::{EmptyToolChoice, Entity, Request, ToolChoice};
pub use syntax::{ParseError, Syntax};
pub use trace::{Trace, TraceError, TraceSource};
pub use validate::{validate, PlanValidator, Violation};
