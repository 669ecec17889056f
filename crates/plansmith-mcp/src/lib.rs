//! plansmith-mcp: tools from the MCP servers a user already runs, as a plansmith catalog, and
//! `tools/call` to execute the calls a planner verified.
//!
//! The client speaks MCP (JSON-RPC 2.0) over the stdio transport: one server process per
//! [`McpServer`], newline-delimited messages on its stdin/stdout, its stderr kept for error
//! messages. It is synchronous (a reader thread per server, a timeout per request), so a CLI
//! needs no async runtime; a server embeds it behind a blocking task.
//!
//! Everything that can go wrong with a server — it does not start, speaks another protocol
//! revision, writes something that is not JSON-RPC, hangs, exits mid-call — is an [`McpError`]
//! naming the server; one bad server does not stop the others ([`catalog::union`]).

pub mod catalog;
mod error;
mod fleet;
mod http;
mod message;
mod server;
mod stdio;

pub use error::McpError;
pub use fleet::{Fleet, ToolCheck};
pub use server::{CallResult, McpServer, ServerInfo, PROTOCOL_VERSIONS};
