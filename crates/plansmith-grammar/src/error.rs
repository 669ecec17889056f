//! Typed errors.

/// Why a catalog / option set cannot be turned into a grammar, or why llguidance refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// A schema feature the constraint cannot enforce (never silently dropped).
    #[error("unsupported schema feature in tool `{tool}` at `{path}`: {feature}")]
    Unsupported {
        tool: String,
        path: String,
        feature: String,
    },
    /// `tool_choice` names a tool the catalog does not have.
    #[error("tool_choice names unknown tool `{0}`")]
    UnknownTool(String),
    /// An option combination that makes no sense (e.g. `max_calls = 0` with `required`).
    #[error("invalid constraint options: {0}")]
    Invalid(String),
    /// A call is required (`tool_choice` required or named) but every tool it may call needs a
    /// value this request cannot supply under the copy policy: no plan can be made for this
    /// request. The request's problem, not the catalog's.
    #[error("a call is required but no tool can be called with values copied from this request")]
    NoCallableTool,
    /// llguidance rejected the generated grammar (a bug here, or an exotic `pattern`).
    #[error("llguidance rejected the grammar: {0}")]
    Compile(String),
}

/// Why a token vocabulary could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokEnvError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Format {
        path: String,
        line: usize,
        message: String,
    },
    #[error("invalid vocabulary: {0}")]
    Invalid(String),
}

/// The constraint reached a state it cannot leave (a token the grammar forbids, an internal
/// llguidance error). The constraint stays dead; nothing panics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("constraint is dead: {reason}")]
pub struct Dead {
    pub reason: String,
}
