//! The catalog of several MCP servers: the union of their tools, names prefixed by server
//! where two servers offer the same name, each tool checked like any catalog's, and where each
//! catalog name routes for `tools/call`.

use std::collections::{BTreeMap, HashMap};

use plansmith_core::{Catalog, CatalogError};
use serde_json::{json, Value};

/// Where a catalog tool goes when called.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Index of the server in the list given to [`union`].
    pub server: usize,
    /// The tool's name on that server.
    pub tool: String,
    /// MCP's `destructiveHint` (which defaults to true unless the tool is `readOnlyHint`).
    pub destructive: bool,
}

/// A tool that is not in the catalog, and why.
#[derive(Debug, Clone)]
pub struct LeftOut {
    pub server: String,
    pub tool: String,
    pub why: String,
}

/// The servers' tools as one catalog.
#[derive(Debug)]
pub struct Union {
    pub catalog: Catalog,
    /// Catalog tool name -> where it goes.
    pub routes: BTreeMap<String, Route>,
    pub left_out: Vec<LeftOut>,
}

/// Whether MCP annotations mark a tool as possibly destructive: `destructiveHint` defaults to
/// true and only a read-only tool is safe by default (MCP's tool annotations).
pub fn is_destructive(tool: &Value) -> bool {
    let a = &tool["annotations"];
    if a["readOnlyHint"] == json!(true) {
        return false;
    }
    a["destructiveHint"] != json!(false)
}

/// The union of `servers`' tools (`(server name, tools/list tools)`). A tool the catalog
/// importer refuses, or that `check` refuses (the grammar compiler, where the caller has one),
/// is left out with the reason, never loosened; the others still make the catalog.
pub fn union(
    servers: &[(String, Vec<Value>)],
    mut check: impl FnMut(&Catalog) -> Result<(), String>,
) -> Result<Union, CatalogError> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (_, tools) in servers {
        for t in tools {
            if let Some(n) = t["name"].as_str() {
                *count.entry(n).or_default() += 1;
            }
        }
    }
    let mut kept = Vec::new();
    let mut routes = BTreeMap::new();
    let mut left_out = Vec::new();
    for (si, (server, tools)) in servers.iter().enumerate() {
        for t in tools {
            let original = t["name"].as_str().unwrap_or("").to_string();
            let name = if count.get(original.as_str()).copied().unwrap_or(0) > 1 {
                format!("{server}_{original}")
            } else {
                original.clone()
            };
            let mut renamed = t.clone();
            if let Value::Object(m) = &mut renamed {
                m.insert("name".into(), json!(name));
            }
            let verdict = Catalog::from_value(&json!([renamed]))
                .map_err(|e| e.to_string())
                .and_then(|one| check(&one));
            if let Err(why) = verdict {
                left_out.push(LeftOut {
                    server: server.clone(),
                    tool: original,
                    why,
                });
                continue;
            }
            if routes.contains_key(&name) {
                left_out.push(LeftOut {
                    server: server.clone(),
                    tool: original,
                    why: format!("the name `{name}` is taken"),
                });
                continue;
            }
            routes.insert(
                name,
                Route {
                    server: si,
                    tool: original,
                    destructive: is_destructive(t),
                },
            );
            kept.push(renamed);
        }
    }
    let catalog = Catalog::from_value(&json!({ "tools": kept }))?;
    Ok(Union {
        catalog,
        routes,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, annotations: Value) -> Value {
        json!({"name": name, "description": "d", "annotations": annotations,
               "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}})
    }

    #[test]
    fn clashing_names_are_prefixed_and_bad_tools_left_out() {
        let a = vec![
            tool("read", json!({"readOnlyHint": true})),
            tool("write", json!({})),
        ];
        let b = vec![
            tool("read", json!({"destructiveHint": false})),
            json!({"name": "bad", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "a**"}}}}),
            tool("vetoed", json!({})),
        ];
        let u = union(&[("fs".into(), a), ("web".into(), b)], |c| {
            if c.tools[0].name == "vetoed" {
                Err("the grammar cannot enforce it".into())
            } else {
                Ok(())
            }
        })
        .unwrap();
        let names: Vec<&str> = u.catalog.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["fs_read", "write", "web_read"]);
        assert_eq!(
            u.routes["web_read"],
            Route {
                server: 1,
                tool: "read".into(),
                destructive: false
            }
        );
        assert!(!u.routes["fs_read"].destructive);
        assert!(
            u.routes["write"].destructive,
            "destructive unless marked otherwise"
        );
        let out: Vec<(&str, &str)> = u
            .left_out
            .iter()
            .map(|l| (l.server.as_str(), l.tool.as_str()))
            .collect();
        assert_eq!(out, vec![("web", "bad"), ("web", "vetoed")]);
        assert!(
            u.left_out[0].why.contains("pattern"),
            "{}",
            u.left_out[0].why
        );
    }
}
