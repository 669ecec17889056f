//! One MCP server, over either transport: the requests plansmith makes (`initialize`,
//! `tools/list`, `tools/call`) and the server's name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use crate::http::HttpLink;
use crate::stdio::StdioLink;
use crate::McpError;

/// Protocol revisions this client speaks, newest first (it asks for the first). Their
/// `tools/list` and `tools/call` are the same for what plansmith uses.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// `tools/list` pages before a server is taken to paginate forever.
const MAX_PAGES: usize = 1000;

/// What a server said about itself in `initialize`.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
    /// The server announces `notifications/tools/list_changed`.
    pub list_changed: bool,
}

/// The answer to a `tools/call`.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// Content blocks (`{"type":"text","text":...}`, images, resources) as sent.
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    /// The tool reported a failure (`isError`): its content says what.
    pub is_error: bool,
}

impl CallResult {
    /// The text blocks joined by newlines; other blocks as `[type]`.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .map(|c| match (c["type"].as_str(), c["text"].as_str()) {
                (Some("text"), Some(t)) => t.to_string(),
                (Some(kind), _) => format!("[{kind}]"),
                _ => "[?]".to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

enum Link {
    Stdio(StdioLink),
    Http(HttpLink),
}

/// A running MCP server. Dropping it ends the process (stdio) or the session (HTTP).
pub struct McpServer {
    name: String,
    link: Link,
    next_id: AtomicU64,
    timeout: Duration,
    info: Option<ServerInfo>,
}

impl McpServer {
    /// Connect to the server `spec` names and `initialize` it: an `http://` or `https://` URL
    /// (streamable HTTP), or the command line that starts it (stdio; split as a shell would:
    /// `npx -y @modelcontextprotocol/server-filesystem /tmp`). `timeout` bounds each request,
    /// the handshake included.
    pub fn start(spec: &str, timeout: Duration) -> Result<McpServer, McpError> {
        let spec = spec.trim();
        let (name, link) = if spec.starts_with("http://") || spec.starts_with("https://") {
            let name = url_name(spec);
            let link = Link::Http(HttpLink::new(&name, spec, timeout));
            (name, link)
        } else {
            let words = split_command(spec);
            let name = server_name(&words);
            let link = Link::Stdio(StdioLink::spawn(&name, spec, &words)?);
            (name, link)
        };
        let mut server = McpServer {
            name,
            link,
            next_id: AtomicU64::new(1),
            timeout,
            info: None,
        };
        server.initialize()?;
        Ok(server)
    }

    /// The name errors and prefixed tool names use (from the command: `filesystem` for
    /// `npx -y @modelcontextprotocol/server-filesystem /tmp`; from a URL, its host and port).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the server said in `initialize`.
    pub fn info(&self) -> Option<&ServerInfo> {
        self.info.as_ref()
    }

    /// Whether the server sent `notifications/tools/list_changed` since the last call (the
    /// flag is cleared by reading it): the catalog must be listed again.
    pub fn take_list_changed(&self) -> bool {
        match &self.link {
            Link::Stdio(l) => l.take_list_changed(),
            Link::Http(l) => l.take_list_changed(),
        }
    }

    fn initialize(&mut self) -> Result<(), McpError> {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSIONS[0],
                "capabilities": {},
                "clientInfo": {"name": "plansmith", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        let got = r["protocolVersion"].as_str().unwrap_or("").to_string();
        if !PROTOCOL_VERSIONS.contains(&got.as_str()) {
            return Err(McpError::Version {
                server: self.name.clone(),
                got,
                supported: PROTOCOL_VERSIONS.join(", "),
            });
        }
        self.info = Some(ServerInfo {
            name: r["serverInfo"]["name"].as_str().unwrap_or("").to_string(),
            version: r["serverInfo"]["version"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            protocol_version: got.clone(),
            list_changed: r["capabilities"]["tools"]["listChanged"] == json!(true),
        });
        self.notify("notifications/initialized", json!({}))?;
        if let Link::Http(l) = &self.link {
            l.initialized(&got);
        }
        Ok(())
    }

    /// Every tool the server offers (all pages of `tools/list`), as the server wrote them.
    pub fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let r = self.request("tools/list", params)?;
            let Some(page) = r["tools"].as_array() else {
                return Err(self.malformed("`tools/list` answered without a `tools` array"));
            };
            tools.extend(page.iter().cloned());
            match r.get("nextCursor") {
                Some(Value::String(c)) if !c.is_empty() => cursor = Some(c.clone()),
                _ => return Ok(tools),
            }
        }
        Err(self.malformed(&format!(
            "`tools/list` still paginating after {MAX_PAGES} pages"
        )))
    }

    /// Call one tool. A tool that fails reports `is_error` (not an `Err`): that is the tool's
    /// answer; `Err` is the server failing.
    pub fn call_tool(&self, tool: &str, arguments: &Value) -> Result<CallResult, McpError> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let Some(content) = r["content"].as_array() else {
            return Err(self.malformed("`tools/call` answered without a `content` array"));
        };
        Ok(CallResult {
            content: content.clone(),
            structured: r.get("structuredContent").cloned(),
            is_error: r["isError"] == json!(true),
        })
    }

    fn malformed(&self, detail: &str) -> McpError {
        McpError::Malformed {
            server: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), McpError> {
        match &self.link {
            Link::Stdio(l) => l.notify(method, params),
            Link::Http(l) => l.notify(method, params),
        }
    }

    fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        match &self.link {
            Link::Stdio(l) => l.request(id, method, params, self.timeout),
            Link::Http(l) => l.request(id, method, params),
        }
    }
}

/// A name for a server reached by URL: its host and port (`127_0_0_1_3001`).
fn url_name(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    safe_name(host)
}

/// `s` with every character but ASCII letters and digits made `_`; `server` if empty.
fn safe_name(s: &str) -> String {
    let name: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() {
        "server".into()
    } else {
        name
    }
}

/// Split a command line into words as a POSIX shell would (quotes group, backslashes escape);
/// an unbalanced quote leaves the line as one word, which then fails to start, named.
fn split_command(command: &str) -> Vec<String> {
    shlex::split(command).unwrap_or_else(|| vec![command.to_string()])
}

/// A short name for a server from its command: the package or program, without launchers
/// (`npx -y`, `node`, `uvx`, `python3 -m`), npm scopes and `mcp-server-` / `server-` prefixes.
fn server_name(words: &[String]) -> String {
    const LAUNCHERS: [&str; 9] = [
        "npx", "node", "uvx", "uv", "python", "python3", "deno", "bun", "run",
    ];
    let word = words
        .iter()
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .zip(words)
        .find(|(base, w)| !w.starts_with('-') && !LAUNCHERS.contains(base))
        .map(|(_, w)| w.as_str())
        .unwrap_or("server");
    let base = word
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(word);
    let base = base.split('@').next().unwrap_or(base);
    let base = base.strip_suffix(".py").unwrap_or(base);
    let base = base.strip_suffix(".js").unwrap_or(base);
    let short = base
        .strip_prefix("mcp-server-")
        .or_else(|| base.strip_prefix("server-"))
        .or_else(|| base.strip_prefix("mcp_server_"))
        .unwrap_or(base);
    safe_name(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"npx -y "@scope/server x" 'a b' c\ d"#),
            vec!["npx", "-y", "@scope/server x", "a b", "c d"]
        );
        assert_eq!(split_command("  "), Vec::<String>::new());
        assert_eq!(split_command("''"), vec![""]);
        assert_eq!(split_command("a 'b"), vec!["a 'b"]);
    }

    #[test]
    fn servers_are_named_after_their_package() {
        let name = |c: &str| server_name(&split_command(c));
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-filesystem /tmp"),
            "filesystem"
        );
        assert_eq!(
            name("node_modules/.bin/mcp-server-everything stdio"),
            "everything"
        );
        assert_eq!(name("python3 -m weather_server"), "weather_server");
        assert_eq!(name("python3 tests/stub.py --flag"), "stub");
        assert_eq!(name("/usr/bin/my-tools"), "my_tools");
        assert_eq!(name(""), "server");
    }

    proptest::proptest! {
        /// Any command line or URL gives a non-empty name of safe characters.
        #[test]
        fn names_are_never_empty(s in ".{0,60}") {
            for n in [server_name(&split_command(&s)), url_name(&s)] {
                proptest::prop_assert!(!n.is_empty());
                proptest::prop_assert!(n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'), "{}", n);
            }
        }
    }

    #[test]
    fn url_servers_are_named_after_host_and_port() {
        assert_eq!(url_name("http://127.0.0.1:3001/mcp"), "127_0_0_1_3001");
        assert_eq!(
            url_name("https://user@tools.example.com/mcp"),
            "tools_example_com"
        );
    }
}
