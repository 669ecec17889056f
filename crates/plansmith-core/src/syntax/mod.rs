//! The text forms of a plan: what models emit and what clients read.

mod dsl;
mod envelope;
mod openai;
mod spaced;
mod tool_call;

use serde::{Deserialize, Serialize};

use crate::plan::Plan;

pub use dsl::{is_valid_dsl_value, DSL_FORBIDDEN};
pub use spaced::to_spaced_json;

/// An output syntax. Every syntax renders a [`Plan`] and parses text back into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Syntax {
    /// `tool(k=v; k=v) | tool(k=v)\n`, or `done\n` for no call. Values are untyped strings;
    /// nested objects use dotted keys (`target.label=Safari`), arrays numeric ones (`choices.0=a`).
    Dsl,
    /// `{"verb": tool, "args": {...}, "spoken_text": "..."}`; `"verb": null` for no call;
    /// an array of envelopes for several calls.
    Envelope,
    /// An OpenAI assistant message: `{"content": ..., "tool_calls": [...]}` with `arguments`
    /// as a JSON string.
    OpenAi,
    /// A plain JSON array of `{"name", "arguments"}`.
    JsonArray,
    /// `<tool_call>\n{"name", "arguments"}\n</tool_call>` per call (Qwen2.5 / Qwen3 / Hermes
    /// chat templates); text without a tag for no call.
    ToolCall,
}

impl Syntax {
    pub const ALL: [Syntax; 5] = [
        Syntax::Dsl,
        Syntax::Envelope,
        Syntax::OpenAi,
        Syntax::JsonArray,
        Syntax::ToolCall,
    ];

    pub fn render(self, plan: &Plan) -> String {
        match self {
            Syntax::Dsl => dsl::render(plan),
            Syntax::Envelope => envelope::render(plan),
            Syntax::OpenAi => openai::render_message(plan),
            Syntax::JsonArray => openai::render_array(plan),
            Syntax::ToolCall => tool_call::render(plan),
        }
    }

    /// [`Self::render`] with the JSON of the JSON array and `<tool_call>` forms spaced as
    /// Python writes it (`{"name": "x", "arguments": {...}}`), the spacing pretrained chat
    /// models write their calls in; the other syntaxes render as [`Self::render`].
    pub fn render_spaced(self, plan: &Plan) -> String {
        match self {
            Syntax::JsonArray => to_spaced_json(&openai::array_value(plan)),
            Syntax::ToolCall => tool_call::render_with(plan, to_spaced_json),
            other => other.render(plan),
        }
    }

    pub fn parse(self, text: &str) -> Result<Plan, ParseError> {
        match self {
            Syntax::Dsl => dsl::parse(text),
            Syntax::Envelope => envelope::parse(text),
            Syntax::OpenAi => openai::parse_message(text),
            Syntax::JsonArray => openai::parse_array(text),
            Syntax::ToolCall => tool_call::parse(text),
        }
    }

    /// Whether values come out of `parse` as untyped strings (typed later from the schema).
    pub fn is_untyped(self) -> bool {
        self == Syntax::Dsl
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Syntax::Dsl => "dsl",
            Syntax::Envelope => "envelope",
            Syntax::OpenAi => "openai",
            Syntax::JsonArray => "json",
            Syntax::ToolCall => "tool_call",
        }
    }
}

impl std::str::FromStr for Syntax {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dsl" => Ok(Syntax::Dsl),
            "envelope" => Ok(Syntax::Envelope),
            "openai" => Ok(Syntax::OpenAi),
            "json" | "json_array" => Ok(Syntax::JsonArray),
            "tool_call" | "hermes" => Ok(Syntax::ToolCall),
            other => Err(format!(
                "unknown syntax `{other}` (expected dsl, envelope, openai, json or tool_call)"
            )),
        }
    }
}

impl std::fmt::Display for Syntax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a text is not a plan, and where (byte offset into the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {offset}")]
pub struct ParseError {
    pub offset: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(offset: usize, message: impl Into<String>) -> Self {
        ParseError {
            offset,
            message: message.into(),
        }
    }

    pub(crate) fn json(text: &str, e: &serde_json::Error) -> Self {
        // serde_json reports line/column; turn it into a byte offset.
        let offset = text
            .split_inclusive('\n')
            .take(e.line().saturating_sub(1))
            .map(str::len)
            .sum::<usize>()
            + e.column().saturating_sub(1);
        ParseError::new(offset.min(text.len()), format!("invalid JSON: {e}"))
    }
}
