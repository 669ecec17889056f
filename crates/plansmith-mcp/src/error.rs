//! What can go wrong talking to an MCP server; every variant names the server.

/// An MCP server failure, with the server's name (and, where it exited, the end of its stderr).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}`: the command is empty")]
    EmptyCommand { server: String },
    #[error("MCP server `{server}`: cannot start `{command}`: {source}")]
    Spawn {
        server: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "MCP server `{server}` speaks protocol revision `{got}`; plansmith speaks {supported}"
    )]
    Version {
        server: String,
        got: String,
        supported: String,
    },
    #[error("MCP server `{server}` sent malformed JSON-RPC: {detail}")]
    Malformed { server: String, detail: String },
    #[error("MCP server `{server}` did not answer `{method}` within {ms} ms")]
    Timeout {
        server: String,
        method: String,
        ms: u64,
    },
    #[error("MCP server `{server}` exited ({status}) while `{method}` was pending{stderr}")]
    Exited {
        server: String,
        method: String,
        status: String,
        /// The end of the server's stderr, prefixed with ": " (empty when it wrote none).
        stderr: String,
    },
    #[error("MCP server `{server}`: `{method}` failed: {message} (JSON-RPC error {code})")]
    Rpc {
        server: String,
        method: String,
        code: i64,
        message: String,
    },
    #[error("MCP server `{server}`: cannot reach {url}: {detail}")]
    Connect {
        server: String,
        url: String,
        detail: String,
    },
    #[error("MCP server `{server}` answered `{method}` with HTTP {status}: {body}")]
    Http {
        server: String,
        method: String,
        status: u16,
        body: String,
    },
    #[error("MCP server `{server}`: cannot write to it: {source}")]
    Write {
        server: String,
        #[source]
        source: std::io::Error,
    },
}

impl McpError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            McpError::EmptyCommand { server }
            | McpError::Spawn { server, .. }
            | McpError::Version { server, .. }
            | McpError::Malformed { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Exited { server, .. }
            | McpError::Rpc { server, .. }
            | McpError::Connect { server, .. }
            | McpError::Http { server, .. }
            | McpError::Write { server, .. } => server,
        }
    }
}
