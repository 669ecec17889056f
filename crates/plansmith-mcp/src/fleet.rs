//! Several MCP servers behind one catalog: started together, listed together, and listed
//! again when a server says its tools changed.

use std::sync::Mutex;
use std::time::Duration;

use plansmith_core::{Catalog, CatalogError};
use serde_json::Value;

use crate::catalog::{self, Union};
use crate::{McpError, McpServer};

/// A per-tool check beyond the catalog importer's (the grammar compiler, in the CLI).
pub type ToolCheck = Box<dyn Fn(&Catalog) -> Result<(), String> + Send + Sync>;

/// The servers that started, their last tool lists, and the check each tool must pass.
pub struct Fleet {
    servers: Vec<McpServer>,
    tools: Mutex<Vec<Vec<Value>>>,
    check: ToolCheck,
}

impl Fleet {
    /// Start and list every server in `commands`. A server that fails is returned as an error
    /// beside the fleet of the others (which may be empty).
    pub fn start(
        commands: &[String],
        timeout: Duration,
        check: ToolCheck,
    ) -> (Fleet, Vec<McpError>) {
        let mut servers = Vec::new();
        let mut tools = Vec::new();
        let mut errors = Vec::new();
        for command in commands {
            match McpServer::start(command, timeout).and_then(|s| {
                let t = s.list_tools()?;
                Ok((s, t))
            }) {
                Ok((s, t)) => {
                    servers.push(s);
                    tools.push(t);
                }
                Err(e) => errors.push(e),
            }
        }
        let fleet = Fleet {
            servers,
            tools: Mutex::new(tools),
            check,
        };
        (fleet, errors)
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Server `i` of the fleet (a [`catalog::Route`]'s `server`).
    pub fn server(&self, i: usize) -> &McpServer {
        &self.servers[i]
    }

    /// The catalog of the tools as last listed.
    pub fn union(&self) -> Result<Union, CatalogError> {
        let tools = self.tools.lock().unwrap_or_else(|p| p.into_inner());
        let named: Vec<(String, Vec<Value>)> = self
            .servers
            .iter()
            .zip(tools.iter())
            .map(|(s, t)| (s.name().to_string(), t.clone()))
            .collect();
        catalog::union(&named, |c| (self.check)(c))
    }

    /// List every server again, whether or not it announced a change (a refresh's worst
    /// case, which `plansmith bench mcp` times), and rebuild the catalog.
    pub fn relist(&self) -> (Result<Union, CatalogError>, Vec<McpError>) {
        let mut errors = Vec::new();
        for (i, s) in self.servers.iter().enumerate() {
            match s.list_tools() {
                Ok(t) => self.tools.lock().unwrap_or_else(|p| p.into_inner())[i] = t,
                Err(e) => errors.push(e),
            }
        }
        (self.union(), errors)
    }

    /// List again the servers that sent `notifications/tools/list_changed`; the new catalog
    /// when any did. A server that fails to list keeps its old tools (the error is returned
    /// with the catalog).
    pub fn refresh(&self) -> Option<(Result<Union, CatalogError>, Vec<McpError>)> {
        let mut changed = false;
        let mut errors = Vec::new();
        for (i, s) in self.servers.iter().enumerate() {
            if !s.take_list_changed() {
                continue;
            }
            match s.list_tools() {
                Ok(t) => {
                    self.tools.lock().unwrap_or_else(|p| p.into_inner())[i] = t;
                    changed = true;
                }
                Err(e) => errors.push(e),
            }
        }
        (changed || !errors.is_empty()).then(|| (self.union(), errors))
    }
}
