//! Prompt rendering for tiny planners: `request + "\n=> "`, with the catalog's compact line
//! in front for tools-in-prompt planners.

use plansmith_core::Catalog;

/// The separator between request and completion (mixle's format).
pub const ARROW: &str = "\n=> ";

/// The part of the prompt shared by every request against `catalog` (cached as a KV prefix).
pub fn prefix(catalog: &Catalog, tools_in_prompt: bool) -> String {
    if tools_in_prompt {
        format!("{}\n", catalog.compact_line())
    } else {
        String::new()
    }
}

/// Requests are one line: newlines become spaces (a newline ends a DSL completion).
pub fn clean_request(request: &str) -> String {
    request
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render(catalog: &Catalog, tools_in_prompt: bool, request: &str) -> String {
    format!(
        "{}{}{ARROW}",
        prefix(catalog, tools_in_prompt),
        clean_request(request)
    )
}
