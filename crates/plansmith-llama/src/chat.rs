//! Chat prompts from the model's own Jinja template (`tokenizer.chat_template`), rendered with
//! minijinja, with the tool catalog placed in the system prompt.

use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{LlamaError, Result};
use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Version tag of the tools prompt wording (part of [`ChatTemplate::id`]).
const TOOLS_PROMPT_VERSION: &str = "plansmith-tools-v1";

/// A compiled chat template plus the tokens it needs.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    bos_token: String,
    eos_token: String,
    /// The template handles a `tools` variable itself.
    native_tools: bool,
}

/// A rendered tools prompt: the cacheable prefix (system + tools) and the full prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsPrompt {
    /// Rendered system message alone (a string prefix of `full`).
    pub prefix: String,
    /// Rendered conversation ending with the generation prompt.
    pub full: String,
}

/// Token form of a [`ToolsPrompt`]: `tokens[..prefix_len]` is the cacheable prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsPromptTokens {
    pub tokens: Vec<u32>,
    pub prefix_len: usize,
}

fn raise_exception(msg: String) -> std::result::Result<String, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        msg,
    ))
}

/// The function objects (`{name, description, parameters}`) of an OpenAI `tools` array or a
/// plain list of functions.
pub fn tool_functions(tools: &Value) -> Result<Vec<Value>> {
    let arr = tools
        .as_array()
        .ok_or_else(|| LlamaError::Template("tools must be a JSON array".into()))?;
    arr.iter()
        .enumerate()
        .map(|(i, t)| {
            let f = t.get("function").unwrap_or(t);
            if f.get("name").and_then(Value::as_str).is_none() {
                return Err(LlamaError::Template(format!(
                    "tools[{i}]: missing string `name`"
                )));
            }
            Ok(f.clone())
        })
        .collect()
}

/// How the system message lists the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolList {
    /// Each tool's function object as one line of JSON (what OpenAI-style templates do).
    #[default]
    Json,
    /// A tool per line, `name: description`, then a line per parameter with its type (enum
    /// values spelled out, `?` for optional) and description: the same information in about
    /// half the tokens, so a per-request catalog costs half the prefill.
    Compact,
}

/// A schema's type the way [`ToolList::Compact`] writes it: enum values, `[item]` for arrays,
/// `{key: type}` for objects with properties.
fn compact_type(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" | ");
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".to_string(),
    };
    match ty.as_str() {
        "array" => format!(
            "[{}]",
            compact_type(schema.get("items").unwrap_or(&Value::Null))
        ),
        "object" => match schema.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => {
                let required = required_of(schema);
                let fields: Vec<String> = props
                    .iter()
                    .map(|(k, v)| {
                        let q = if required.contains(&k.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{k}{q}: {}", compact_type(v))
                    })
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
            _ => "object".to_string(),
        },
        _ => ty,
    }
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// One function in [`ToolList::Compact`] form (lines end with a newline).
fn compact_function(f: &Value) -> String {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
    let desc = text(f.get("description"));
    let mut s = if desc.is_empty() {
        format!("{name}\n")
    } else {
        format!("{name}: {desc}\n")
    };
    let params = f.get("parameters").unwrap_or(&Value::Null);
    let required = required_of(params);
    if let Some(props) = params.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let q = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            s.push_str(&format!("  {k}{q}: {}", compact_type(v)));
            if let Some(d) = v.get("default") {
                s.push_str(&format!(" = {d}"));
            }
            let d = text(v.get("description"));
            if !d.is_empty() {
                s.push_str(&format!(" -- {d}"));
            }
            s.push('\n');
        }
    }
    s
}

/// The system-prompt text that lists the tools and asks for a JSON array of calls.
pub fn tools_system_text(system: Option<&str>, tools: &Value) -> Result<String> {
    tools_system_text_as(system, tools, ToolList::Json)
}

/// [`tools_system_text`] with the tools listed as `list` says.
pub fn tools_system_text_as(system: Option<&str>, tools: &Value, list: ToolList) -> Result<String> {
    let fns = tool_functions(tools)?;
    let mut s = String::new();
    if let Some(sys) = system.filter(|s| !s.is_empty()) {
        s.push_str(sys);
        s.push_str("\n\n");
    }
    s.push_str("You are a function-calling assistant. You have access to these tools:\n<tools>\n");
    for f in &fns {
        match list {
            ToolList::Json => {
                s.push_str(&serde_json::to_string(f).unwrap_or_default());
                s.push('\n');
            }
            ToolList::Compact => s.push_str(&compact_function(f)),
        }
    }
    s.push_str(
        "</tools>\nAnswer the user's request with only a JSON array of tool calls, for example \
         [{\"name\": \"tool_name\", \"arguments\": {\"arg\": \"value\"}}]. \
         Use only the tools above and their parameters. Reply [] if no tool applies.",
    );
    Ok(s)
}

impl ChatTemplate {
    /// A template from Jinja source and the BOS / EOS token texts.
    pub fn new(source: impl Into<String>, bos_token: &str, eos_token: &str) -> Result<Self> {
        let source = source.into();
        let this = Self {
            native_tools: source.contains("tools"),
            source,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        };
        // Compile once to report syntax errors early.
        this.env()?;
        Ok(this)
    }

    /// The template stored in the GGUF (`tokenizer.chat_template`).
    pub fn from_gguf(g: &GgufFile, tok: &Tokenizer) -> Result<Self> {
        let src = g.get_str("tokenizer.chat_template")?;
        let text = |id: Option<u32>| {
            id.and_then(|i| tok.token_bytes(i))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        Self::new(src, &text(tok.bos), &text(tok.eos))
    }

    /// The ChatML template (fallback for models without one).
    pub fn chatml() -> Self {
        Self {
            source: "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}".into(),
            bos_token: String::new(),
            eos_token: "<|im_end|>".into(),
            native_tools: false,
        }
    }

    /// Gemma's turn format (`<start_of_turn>user` / `model`, `<end_of_turn>`), for Gemma files
    /// without a template of their own. Gemma has no system role: as its own template does, the
    /// system text opens the first user turn, followed by a blank line. Unlike that template, a
    /// system message alone renders as exactly that opening, so the tools prompt is a prefix of
    /// the conversation and can be cached. BOS comes from the tokenizer (`add_bos_token`).
    pub fn gemma() -> Self {
        Self {
            source: "{% for m in messages %}{% if m.role == 'system' %}<start_of_turn>user\n{{ m.content | trim }}\n\n{% else %}{% if not (loop.index0 == 1 and messages[0].role == 'system' and m.role == 'user') %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n{% endif %}{{ m.content | trim }}<end_of_turn>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}".into(),
            bos_token: String::new(),
            eos_token: "<end_of_turn>".into(),
            native_tools: false,
        }
    }

    /// BOS token text passed to the template.
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// EOS token text passed to the template.
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Identity of the template and the tools prompt wording (part of prefix-cache keys).
    pub fn id(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.source.hash(&mut h);
        self.bos_token.hash(&mut h);
        TOOLS_PROMPT_VERSION.hash(&mut h);
        h.finish()
    }

    fn env(&self) -> Result<minijinja::Environment<'static>> {
        let mut env = minijinja::Environment::new();
        // Hugging Face renders chat templates with trim_blocks and lstrip_blocks.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned("chat", self.source.clone())
            .map_err(|e| LlamaError::Template(format!("compile: {e:#}")))?;
        Ok(env)
    }

    /// Render messages (and `tools`, for templates that support them natively).
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let env = self.env()?;
        let tmpl = env
            .get_template("chat")
            .map_err(|e| LlamaError::Template(e.to_string()))?;
        let ctx = minijinja::context! {
            messages => messages,
            tools => tools,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        };
        tmpl.render(ctx)
            .map_err(|e| LlamaError::Template(format!("render: {e:#}")))
    }

    /// A tool-calling prompt: tools listed in the system message (this crate's wording, so the
    /// reply format is the same for every model), then the user request and the generation
    /// prompt. `prefix` is the rendered system message alone — cache it.
    pub fn tools_prompt(
        &self,
        system: Option<&str>,
        tools: &Value,
        user: &str,
    ) -> Result<ToolsPrompt> {
        self.tools_prompt_as(system, tools, user, ToolList::Json)
    }

    /// [`Self::tools_prompt`] with the tools listed as `list` says.
    pub fn tools_prompt_as(
        &self,
        system: Option<&str>,
        tools: &Value,
        user: &str,
        list: ToolList,
    ) -> Result<ToolsPrompt> {
        let sys = ChatMessage::new("system", tools_system_text_as(system, tools, list)?);
        let prefix = self.render(std::slice::from_ref(&sys), None, false)?;
        let full = self.render(&[sys, ChatMessage::new("user", user)], None, true)?;
        if !full.starts_with(&prefix) {
            return Err(LlamaError::Template(
                "the rendered system message is not a prefix of the rendered conversation".into(),
            ));
        }
        Ok(ToolsPrompt { prefix, full })
    }

    /// A tool-calling prompt in the model's own words: the template renders the tools (its
    /// system message and its reply format, e.g. Qwen's `<tool_call>` tags), then the request
    /// and the generation prompt. `prefix` is everything before the request's text — the same
    /// for every request against these tools, so it is what the prefix cache keeps.
    pub fn native_tools_prompt(&self, tools: &Value, user: &str) -> Result<ToolsPrompt> {
        if !self.native_tools {
            return Err(LlamaError::Template(
                "this chat template does not render tools itself".into(),
            ));
        }
        let render = |text: &str| self.render(&[ChatMessage::new("user", text)], Some(tools), true);
        let full = render(user)?;
        // Two requests that differ in their first character share exactly the prefix.
        let (a, b) = (render("A")?, render("B")?);
        let shared = a
            .char_indices()
            .zip(b.chars())
            .find(|((_, x), y)| x != y)
            .map_or(a.len(), |((i, _), _)| i);
        let prefix = a[..shared].to_string();
        if !full.starts_with(&prefix) || !full[prefix.len()..].starts_with(user) {
            return Err(LlamaError::Template(
                "the rendered tools are not a prefix of the rendered conversation".into(),
            ));
        }
        Ok(ToolsPrompt { prefix, full })
    }

    /// Whether the template renders a `tools` variable itself.
    pub fn has_native_tools(&self) -> bool {
        self.native_tools
    }

    /// Whether the template teaches the `<tool_call>` tag format (Qwen2.5, Qwen3, Hermes).
    pub fn has_tool_call_tags(&self) -> bool {
        self.native_tools && self.source.contains("<tool_call>")
    }
}

impl ToolsPrompt {
    /// Tokenize; the prefix length is the longest common token prefix of the prefix alone and
    /// the full prompt (equal to the prefix's token count when the boundary is a clean split).
    pub fn tokenize(&self, tok: &Tokenizer) -> ToolsPromptTokens {
        let p = tok.encode(&self.prefix, true, true);
        let tokens = tok.encode(&self.full, true, true);
        let prefix_len = p.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
        ToolsPromptTokens { tokens, prefix_len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders_and_prefix_matches() {
        let t = ChatTemplate::chatml();
        let tools = serde_json::json!([{"type": "function", "function": {"name": "set", "description": "Set a value", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}]);
        let p = t.tools_prompt(None, &tools, "set x to 3").unwrap();
        assert!(p.prefix.starts_with("<|im_start|>system\n"));
        assert!(p.prefix.contains("{\"name\":\"set\""));
        assert!(p
            .full
            .ends_with("<|im_start|>user\nset x to 3<|im_end|>\n<|im_start|>assistant\n"));
    }

    #[test]
    fn the_compact_list_keeps_names_types_enums_and_descriptions_in_fewer_characters() {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "book_room",
            "description": "Book a   meeting room.", "parameters": {"type": "object",
            "properties": {
                "room": {"type": "string", "description": "Room name."},
                "size": {"type": "string", "enum": ["small", "large"]},
                "people": {"type": "integer", "default": 2},
                "who": {"type": "array", "items": {"type": "string"}},
                "at": {"type": "object", "properties": {"day": {"type": "string"},
                    "hour": {"type": "integer"}}, "required": ["day"]}},
            "required": ["room", "size"]}}}]);
        let compact = tools_system_text_as(None, &tools, ToolList::Compact).unwrap();
        let json = tools_system_text(None, &tools).unwrap();
        assert!(
            compact.contains(
                "book_room: Book a meeting room.\n  room: string -- Room name.\n  \
             size: \"small\" | \"large\"\n  people?: integer = 2\n  who?: [string]\n  \
             at?: {day: string, hour?: integer}\n</tools>"
            ),
            "{compact}"
        );
        assert!(compact.len() < json.len());
        // The request is still a suffix after the cached prefix.
        let p = ChatTemplate::chatml()
            .tools_prompt_as(None, &tools, "book it", ToolList::Compact)
            .unwrap();
        assert!(p.full.starts_with(&p.prefix) && p.prefix.contains("book_room: Book"));
    }

    #[test]
    fn native_tools_prompt_prefix_ends_where_the_request_starts() {
        let src = "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>\nUse <tool_call>.<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
        let t = ChatTemplate::new(src, "", "<|im_end|>").unwrap();
        assert!(t.has_tool_call_tags());
        let tools = serde_json::json!([{"type": "function", "function": {"name": "set", "parameters": {}}}]);
        let p = t.native_tools_prompt(&tools, "A lamp on").unwrap();
        assert_eq!(
            p.prefix,
            "<|im_start|>system\n<tools>set;</tools>\nUse <tool_call>.<|im_end|>\n<|im_start|>user\n"
        );
        assert!(p
            .full
            .ends_with("A lamp on<|im_end|>\n<|im_start|>assistant\n"));
        assert!(ChatTemplate::chatml()
            .native_tools_prompt(&tools, "x")
            .is_err());
    }

    #[test]
    fn gemma_puts_the_system_text_in_the_first_user_turn() {
        let t = ChatTemplate::gemma();
        let tools = serde_json::json!([{"name": "set", "parameters": {}}]);
        let p = t.tools_prompt(None, &tools, "set x to 3").unwrap();
        assert!(p
            .prefix
            .starts_with("<start_of_turn>user\nYou are a function-calling"));
        assert!(p.prefix.ends_with("Reply [] if no tool applies.\n\n"));
        assert_eq!(
            &p.full[p.prefix.len()..],
            "set x to 3<end_of_turn>\n<start_of_turn>model\n"
        );
        let chat = t
            .render(
                &[
                    ChatMessage::new("user", "hi"),
                    ChatMessage::new("assistant", "hello"),
                ],
                None,
                true,
            )
            .unwrap();
        assert_eq!(
            chat,
            "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nhello<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn bad_template_is_an_error() {
        assert!(matches!(
            ChatTemplate::new("{% for %}", "", ""),
            Err(LlamaError::Template(_))
        ));
        let t = ChatTemplate::new("{{ raise_exception('nope') }}", "", "").unwrap();
        let e = t.render(&[], None, true).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        assert!(tool_functions(&serde_json::json!({"a": 1})).is_err());
    }
}
