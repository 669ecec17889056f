//! Calls and plans: what a planner emits.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One tool call: a tool name and its arguments (a JSON object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub name: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

impl Call {
    pub fn new(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Call {
            name: name.into(),
            arguments,
        }
    }
}

/// A plan: zero or more calls (empty means "no call"), plus an optional spoken reply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Plan {
    pub calls: Vec<Call>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoken_text: Option<String>,
}

impl Plan {
    pub fn new(calls: Vec<Call>) -> Self {
        Plan {
            calls,
            spoken_text: None,
        }
    }

    pub fn no_call() -> Self {
        Plan::default()
    }

    pub fn is_no_call(&self) -> bool {
        self.calls.is_empty()
    }
}
