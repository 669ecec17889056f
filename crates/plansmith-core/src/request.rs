//! What a caller asks a planner for besides the catalog: the request text, the entities it
//! may refer to, and which tools it may call (`tool_choice`). Plain data: the grammar, the
//! planner and the HTTP server all read these, so they live here and not in any of them.

use serde::{Deserialize, Serialize};

/// OpenAI-style `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Only the no-call form.
    None,
    /// A call or no call.
    #[default]
    Auto,
    /// At least one call.
    Required,
    /// Calls of this tool only (at least one).
    Named(String),
}

/// `tool_choice` given as an empty string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("empty tool_choice (expected none, auto, required or a tool name)")]
pub struct EmptyToolChoice;

impl std::str::FromStr for ToolChoice {
    type Err = EmptyToolChoice;
    /// `none`, `auto`, `required`, or a tool name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "" => return Err(EmptyToolChoice),
            name => ToolChoice::Named(name.to_string()),
        })
    }
}

/// A visible entity (e.g. an on-screen UI element) the request may refer to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub entity_type: String,
    pub label: String,
}

/// The per-request inputs of a grammar.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Request {
    pub text: String,
    #[serde(default)]
    pub entities: Vec<Entity>,
}

impl Request {
    pub fn new(text: impl Into<String>) -> Self {
        Request {
            text: text.into(),
            entities: Vec::new(),
        }
    }
}
