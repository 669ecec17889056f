//! Catalog -> Lark grammar (llguidance dialect).
//!
//! Generation is split in two so the expensive, catalog-dependent part is done once:
//!
//! * [`Template`]: every rule that depends only on (catalog, syntax, policy, tool choice,
//!   max calls). Request-dependent values appear as *holes*: rule names (`copy_N`, `ent_N`)
//!   the template references but does not define.
//! * [`Template::grammar`]: appends the hole definitions for one [`Request`] — copy spans as
//!   llguidance `%regex {"substring_chunks": ...}` lexemes, visible-entity labels as literal
//!   alternatives — a few lines of text, microseconds.
//!
//! Choices (documented contracts):
//! * keys come in schema property order (optional keys skippable, each at most once, required
//!   ones mandatory); unknown keys are impossible. The DSL flattens nested objects / arrays as
//!   dotted keys in the same depth-first order. DSL arrays enumerate indices up to `maxItems`
//!   or [`DSL_ARRAY_CAP`].
//! * JSON syntaxes are compact with an optional single space after `:` and `,`.
//! * Numbers are bounded to 15 integer digits and 6 fraction digits (no exponent), so every
//!   emitted number parses exactly in every consumer. Ranges are honoured; for non-integers
//!   the language is a subset of the interval (see [`crate::regex::number_range`]).
//! * The grammar is never looser than `Syntax::parse` + validation: where an exact encoding
//!   is impossible it is stricter (fewer outputs), never silently looser; a feature we cannot
//!   honour at all is a [`GrammarError::Unsupported`].

use std::collections::HashMap;
use std::fmt::Write as _;

use plansmith_core::policy::{is_copied, number_literals};
use plansmith_core::request::{Request, ToolChoice};
use plansmith_core::syntax::is_valid_dsl_value;
use plansmith_core::{Catalog, CopyUnit, Policy, Syntax};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::copyfilter::{CopyFilter, CopyKeys, HoleSpans};
use crate::error::GrammarError;
use crate::regex::{self as rx, lit, repeat, JSON_CHAR};

/// Largest array the DSL grammar can emit when the schema sets no `maxItems`.
pub const DSL_ARRAY_CAP: usize = 16;

/// Most calls one plan may hold: the bound every `max_calls` is checked against (a repetition
/// count llguidance can represent, and more calls than any plan needs).
pub const MAX_CALLS: usize = 64;

/// Longest prose reply the `<tool_call>` surface takes as "no call" (characters).
const PROSE_CHARS: usize = 400;
const DSL_SAFE: &str = "[^()|=;\\n]";
/// A [`DSL_SAFE`] character that is not whitespace: the first and last of a copied value.
const DSL_SAFE_NON_SPACE: &str = "[^()|=;\\s]";

/// Everything about a constraint except the catalog and the request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Options {
    pub syntax: Syntax,
    pub policy: Policy,
    pub tool_choice: ToolChoice,
    /// Most calls in one plan (`parallel_tool_calls = false` -> 1).
    pub max_calls: usize,
}

impl Options {
    pub fn new(syntax: Syntax) -> Self {
        let policy = if syntax == Syntax::Dsl {
            Policy::copy_free_strings()
        } else {
            Policy::default()
        };
        Options {
            syntax,
            policy,
            tool_choice: ToolChoice::Auto,
            max_calls: 4,
        }
    }
}

mod bounds;
mod emit;
mod template;

use bounds::*;
use emit::*;
pub use template::Template;
pub(crate) use template::*;

/// Generate the request-independent template for `catalog` under `options`.
pub fn template(catalog: &Catalog, options: &Options) -> Result<Template, GrammarError> {
    generate(catalog, options, Vec::new(), None)
}

fn generate(
    catalog: &Catalog,
    options: &Options,
    impossible: Vec<CopyHole>,
    request: Option<&Request>,
) -> Result<Template, GrammarError> {
    let tools: Vec<&plansmith_core::Tool> = match &options.tool_choice {
        ToolChoice::None => Vec::new(),
        ToolChoice::Named(name) => {
            vec![catalog
                .get(name)
                .ok_or_else(|| GrammarError::UnknownTool(name.clone()))?]
        }
        ToolChoice::Auto | ToolChoice::Required => catalog.tools.iter().collect(),
    };
    let may_skip = matches!(options.tool_choice, ToolChoice::None | ToolChoice::Auto);
    if options.max_calls > MAX_CALLS {
        return Err(GrammarError::Invalid(format!(
            "max_calls = {} is more than the {MAX_CALLS} calls a plan may hold",
            options.max_calls
        )));
    }
    if !may_skip && options.max_calls == 0 {
        return Err(GrammarError::Invalid(
            "max_calls = 0 with a tool_choice that requires a call".into(),
        ));
    }
    if !may_skip && tools.is_empty() {
        return Err(GrammarError::Invalid(
            "tool_choice requires a call but the catalog has no tools".into(),
        ));
    }
    let surface = if options.syntax == Syntax::Dsl {
        Surface::Dsl
    } else {
        Surface::Json
    };
    let mut g = Gen::new(surface, &options.policy);
    g.impossible = impossible;
    g.request = request.map(|r| (r, options.policy.copy_unit));

    // per-tool argument expressions
    let mut calls: Vec<(String, String)> = Vec::new(); // (tool name, args expr)
    for tool in &tools {
        let args = match surface {
            Surface::Json => g.json_object(&tool.name, "", &tool.parameters),
            Surface::Dsl => g
                .object_body(&tool.name, "", "", &tool.parameters, None)
                .map(|b| match b {
                    (Some(ne), true) => format!("[{ne}]"),
                    (Some(ne), false) => ne,
                    (None, _) => String::new(),
                }),
        };
        match args {
            Ok(args) => calls.push((tool.name.clone(), args)),
            // a value this request cannot supply: the tool cannot be called for it
            Err(GenErr::Impossible) => {}
            Err(GenErr::Grammar(e)) => return Err(e),
        }
    }
    if calls.is_empty() && !may_skip {
        return Err(GrammarError::NoCallableTool);
    }
    let tools_left = calls.len();

    let max_calls = if tools_left == 0 {
        0
    } else {
        options.max_calls
    };
    let mut top = String::new();
    let mut alts: Vec<String> = Vec::new();
    match options.syntax {
        Syntax::Dsl => {
            let call_alts: Vec<String> = calls
                .iter()
                .map(|(name, args)| format!("{} {args} \")\"", lit(&format!("{name}("))))
                .collect();
            if may_skip {
                alts.push("\"done\\n\"".into());
            }
            if max_calls > 0 {
                let call = g.rule("call", &call_alts.join("\n    | "));
                let more = if max_calls > 1 {
                    format!(" (\" | \" {call}){}", repeat(0, Some(max_calls - 1)))
                } else {
                    String::new()
                };
                alts.push(format!("{call}{more} \"\\n\""));
            }
        }
        Syntax::Envelope => {
            let spoken = g.token(format!("/\"{JSON_CHAR}*\"/"));
            let tail = format!("[COMMA \"\\\"spoken_text\\\"\" COLON {spoken}]");
            if may_skip {
                alts.push(format!("\"{{\\\"verb\\\"\" COLON \"null\" {tail} \"}}\""));
            }
            if max_calls > 0 {
                let heads: Vec<String> = calls
                    .iter()
                    .map(|(name, args)| {
                        let verb = lit(&serde_json::to_string(name).unwrap_or_default());
                        format!(
                            "\"{{\\\"verb\\\"\" COLON {verb} COMMA \"\\\"args\\\"\" COLON {args}"
                        )
                    })
                    .collect();
                let head = g.rule("env", &heads.join("\n    | "));
                let first = g.rule("env_first", &format!("{head} {tail} \"}}\""));
                alts.push(first.clone());
                if max_calls > 1 {
                    let rest = g.rule("env_rest", &format!("{head} \"}}\""));
                    alts.push(format!(
                        "\"[\" {first} (COMMA {rest}){} \"]\"",
                        repeat(0, Some(max_calls - 1))
                    ));
                }
            }
        }
        Syntax::ToolCall => {
            // No call is an empty reply or a short prose answer that starts with a letter (a
            // model declining: "I'm sorry, …", which it is far likelier to write than nothing).
            // The prose holds no tag, code fence, brace or bracket: free text would otherwise
            // be an escape from the catalog (a small model writes its call as a Markdown code
            // block instead of a tag).
            if may_skip {
                alts.push(g.token(format!(
                    "/[A-Za-z][^<>`{{}}\\[\\]]{}/",
                    repeat(0, Some(PROSE_CHARS - 1))
                )));
            }
            if max_calls == 0 {
                alts.push("\"\"".into());
            } else {
                let items: Vec<String> = calls
                    .iter()
                    .map(|(name, args)| {
                        let n = lit(&serde_json::to_string(name).unwrap_or_default());
                        format!("\"{{\\\"name\\\"\" COLON {n} COMMA \"\\\"arguments\\\"\" COLON {args} \"}}\"")
                    })
                    .collect();
                let item = g.rule("call", &items.join("\n    | "));
                let tagged = g.rule(
                    "tagged",
                    &format!("\"<tool_call>\\n\" {item} \"\\n</tool_call>\""),
                );
                let more = if max_calls > 1 {
                    format!(" (\"\\n\" {tagged}){}", repeat(0, Some(max_calls - 1)))
                } else {
                    String::new()
                };
                // Qwen's template ends a call turn with a newline after the last tag.
                alts.push(if may_skip {
                    format!("[{tagged}{more} [\"\\n\"]]")
                } else {
                    format!("{tagged}{more} [\"\\n\"]")
                });
            }
        }
        Syntax::JsonArray | Syntax::OpenAi => {
            let items: Vec<String> = calls
                .iter()
                .map(|(name, args)| {
                    let n = lit(&serde_json::to_string(name).unwrap_or_default());
                    if options.syntax == Syntax::JsonArray {
                        format!("\"{{\\\"name\\\"\" COLON {n} COMMA \"\\\"arguments\\\"\" COLON {args} \"}}\"")
                    } else {
                        format!(
                            "\"{{\\\"type\\\"\" COLON \"\\\"function\\\"\" COMMA \"\\\"function\\\"\" COLON \"{{\\\"name\\\"\" COLON {n} COMMA \"\\\"arguments\\\"\" COLON {args} \"}}\" \"}}\""
                        )
                    }
                })
                .collect();
            let list = if max_calls > 0 {
                let item = g.rule("call", &items.join("\n    | "));
                let list = if max_calls > 1 {
                    format!("{item} (COMMA {item}){}", repeat(0, Some(max_calls - 1)))
                } else {
                    item
                };
                if may_skip {
                    format!("\"[\" [{list}] \"]\"")
                } else {
                    format!("\"[\" {list} \"]\"")
                }
            } else {
                "\"[\" \"]\"".to_string()
            };
            if options.syntax == Syntax::JsonArray {
                alts.push(list);
            } else {
                let content = g.token(format!("/\"{JSON_CHAR}*\"/"));
                alts.push(format!(
                    "\"{{\\\"content\\\"\" COLON (\"null\" | {content}) COMMA \"\\\"tool_calls\\\"\" COLON {list} \"}}\""
                ));
            }
        }
    }
    if alts.is_empty() {
        return Err(GrammarError::Invalid(
            "no output is possible with these options".into(),
        ));
    }
    let _ = writeln!(
        top,
        "%llguidance {{}}\n\nstart: {}\n",
        alts.join("\n    | ")
    );
    let mut lark = top;
    lark.push_str(&g.rules);
    lark.push('\n');
    if surface == Surface::Json {
        lark.push_str("COLON: /: ?/\nCOMMA: /, ?/\n");
    }
    lark.push_str(&g.token_defs);
    let trackable = surface == Surface::Dsl
        && !g.copy_holes.is_empty()
        && g.copy_holes.iter().all(|h| !h.quoted)
        && g.dsl_keys.values().all(|k| *k != KeyKind::Mixed);
    let copy_keys = trackable.then(|| {
        let mut keys = CopyKeys::new();
        for ((tool, key), kind) in &g.dsl_keys {
            keys.entry(tool.clone()).or_default().insert(
                key.clone(),
                match kind {
                    KeyKind::Copied(i) => Some(*i),
                    _ => None,
                },
            );
        }
        std::sync::Arc::new(keys)
    });
    Ok(Template {
        lark,
        copy_holes: g.copy_holes,
        entity_holes: g.entity_holes,
        copy_keys,
        copy_unit: options.policy.copy_unit,
        catalog: std::sync::Arc::new(catalog.clone()),
        options: options.clone(),
    })
}

/// The full grammar text for one request (what `plansmith grammar` prints).
pub fn grammar_text(
    catalog: &Catalog,
    options: &Options,
    request: &Request,
) -> Result<String, GrammarError> {
    template(catalog, options)?.grammar(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hole_references_are_whole_names_outside_literals() {
        assert!(refers_to_a_hole("copy_0"));
        assert!(refers_to_a_hole("(copy_12 | T3)"));
        assert!(refers_to_a_hole("ent_1"));
        assert!(!refers_to_a_hole("(\"current_screen\" | \"copy_0\")"));
        assert!(!refers_to_a_hole("/ent_[0-9]/ | T4"));
        assert!(!refers_to_a_hole("xcopy_0 | copy_ | copy_x"));
    }

    #[test]
    fn word_chunks_follow_core_classes() {
        assert_eq!(
            chunks("press cmd+s, now!", CopyUnit::Words),
            vec!["press", " ", "cmd", "+", "s", ",", " ", "now", "!"]
        );
        assert_eq!(chunks("ab", CopyUnit::Chars), vec!["a", "b"]);
        assert!(chunks("", CopyUnit::Words).is_empty());
        // A number's separators stay inside its word; a sentence's full stop does not.
        assert_eq!(
            chunks("pay 3.50, 1,000. ok", CopyUnit::Words),
            vec!["pay", " ", "3.50", ",", " ", "1,000", ".", " ", "ok"]
        );
    }
}
