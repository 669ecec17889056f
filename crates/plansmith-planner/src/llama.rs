//! Pretrained Llama-family planners: a GGUF file or Hugging Face directory (optionally with a
//! PEFT LoRA adapter applied at load beside the quantized base), tools in the system prompt through the model's own chat
//! template, the system+tools prefix cached per catalog.

use std::path::{Path, PathBuf};

use plansmith_core::{Catalog, Syntax};
use plansmith_grammar::TokEnv;
use plansmith_llama::{
    GgufBundle, PeftAdapter, PrefixCache, PrefixKey, PrefixOutcome, Session, ToolList,
};
use serde::{Deserialize, Serialize};

use crate::backend::{DecodeState, ModelBackend, Persisted, Started};
use crate::error::PlannerError;
use crate::prompt::CatalogText;

/// Default memory budget of the prefix cache (one SmolLM2 1,500-token prefix is ~70 MiB).
pub const PREFIX_CACHE_BYTES: usize = 512 << 20;

/// Token budget of a reply (enough for several calls with long arguments); past it the
/// decoder steers the reply to close.
pub const MAX_NEW_TOKENS: usize = 256;

/// Default context limit: the model's own, capped here so a runaway prompt fails fast.
pub const MAX_CONTEXT: usize = 8192;

/// Where a pretrained planner's weights live (persisted in `planner.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlamaSource {
    /// The base model: a `.gguf` file or a Hugging Face directory. A relative path is
    /// resolved against the planner directory.
    pub base: PathBuf,
    /// A PEFT adapter directory applied at load beside the base (relative: inside the planner
    /// directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<PathBuf>,
}

impl LlamaSource {
    /// Paths resolved against `dir` (the planner directory the source was read from).
    pub fn resolved(&self, dir: &Path) -> LlamaSource {
        let abs = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };
        LlamaSource {
            base: abs(&self.base),
            adapter: self.adapter.as_deref().map(abs),
        }
    }
}

/// A loaded pretrained model with its tokenizer, chat template and prefix cache.
pub struct LlamaLm {
    pub bundle: GgufBundle,
    /// Absolute paths it was loaded from.
    pub source: LlamaSource,
    prefixes: PrefixCache,
    stops: Vec<u32>,
    eos: u32,
    limit: usize,
    /// The prompt is the chat template's own tool rendering (its reply format, e.g. Qwen's
    /// `<tool_call>` tags), not plansmith's system message asking for a JSON array.
    native_tools: bool,
    /// How plansmith's system message lists the tools (not used with `native_tools`).
    tool_list: ToolList,
}

fn load_err(path: &Path, e: impl std::fmt::Display) -> PlannerError {
    PlannerError::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl LlamaLm {
    /// Load the base model and apply the adapter, if any.
    pub fn load(source: LlamaSource) -> Result<LlamaLm, PlannerError> {
        let mut bundle = GgufBundle::load(&source.base).map_err(|e| load_err(&source.base, e))?;
        if let Some(dir) = &source.adapter {
            let adapter =
                PeftAdapter::load(dir, bundle.model.config()).map_err(|e| load_err(dir, e))?;
            let merged = bundle
                .model
                .with_adapter(&adapter)
                .map_err(|e| load_err(dir, e))?;
            bundle.model = std::sync::Arc::new(merged);
        }
        let tok = &bundle.tokenizer;
        // The reply ends with the template's end-of-turn token; fall back to EOS.
        let eos = tok
            .eot
            .or_else(|| tok.special_id("<|im_end|>"))
            .or(tok.eos)
            .ok_or_else(|| {
                load_err(
                    &source.base,
                    "the tokenizer has no end-of-turn or end-of-sequence token",
                )
            })?;
        let limit = bundle.model.config().max_position.min(MAX_CONTEXT);
        Ok(LlamaLm {
            stops: bundle.stop_ids(),
            bundle,
            source,
            prefixes: PrefixCache::new(PREFIX_CACHE_BYTES),
            eos,
            limit,
            native_tools: false,
            tool_list: ToolList::Json,
        })
    }

    /// List the tools in plansmith's system message as `list` says (what an adapter learnt).
    pub fn use_tool_list(&mut self, list: ToolList) {
        self.tool_list = list;
    }

    /// Prompt in the template's own tool format when `syntax` is [`Syntax::ToolCall`] (the
    /// reply format Qwen-style templates teach); an error if this model's template has none.
    pub fn use_syntax(&mut self, syntax: Syntax) -> Result<(), PlannerError> {
        self.native_tools = syntax == Syntax::ToolCall;
        if self.native_tools && !self.bundle.template.has_tool_call_tags() {
            return Err(load_err(
                &self.source.base,
                "the tool_call reply format needs a chat template that renders tools with \
                 <tool_call> tags (Qwen2.5, Qwen3); this model's does not — use the json format",
            ));
        }
        Ok(())
    }
}

impl ModelBackend for LlamaLm {
    fn grammar_eos(&self) -> u32 {
        self.eos
    }

    fn can_spell(&self, _text: &str) -> bool {
        true
    }

    fn max_new_tokens(&self) -> usize {
        MAX_NEW_TOKENS
    }

    fn fast_forward(&self) -> bool {
        true
    }

    // The chat prompt is measured per request (its overflow names the prompt length).
    fn check_catalog(&self, _: &Catalog, _: &str, _: CatalogText) -> Result<(), PlannerError> {
        Ok(())
    }

    fn persisted(&self) -> Persisted<'_> {
        Persisted::Pretrained {
            base: &self.source.base,
            adapter: self.source.adapter.as_deref(),
        }
    }

    fn free_stop(&self, id: u32) -> bool {
        id == self.eos || self.stops.contains(&id)
    }

    fn end_ids(&self) -> Vec<u32> {
        let mut ids = self.stops.clone();
        ids.push(self.eos);
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        let tok = &self.bundle.tokenizer;
        let tokens = tok.all_token_bytes().to_vec();
        let specials: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&id| {
                id != self.eos
                    && (tokens[id as usize].is_empty()
                        || tok.token_kind(id).is_some_and(|k| {
                            // User-defined tokens (Qwen's `<tool_call>`) are text the model
                            // writes; control and unused ones never belong in a reply.
                            (k.is_special() && k != plansmith_llama::TokenKind::UserDefined)
                                || k == plansmith_llama::TokenKind::Unused
                        }))
            })
            .collect();
        TokEnv::from_token_bytes(
            tokens,
            self.eos,
            &specials,
            Some(self.bundle.model.config().vocab_size),
        )
        .map_err(PlannerError::from)
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.bundle.tokenizer.encode(text, false, false).len()
    }

    fn detokenize(&self, ids: &[u32]) -> String {
        let ids: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&i| !self.free_stop(i))
            .collect();
        self.bundle
            .tokenizer
            .decode(&ids, true)
            .unwrap_or_else(|_| String::new())
    }

    /// The completion's tokens followed by the end-of-turn token.
    fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        let mut ids = self.bundle.tokenizer.encode(text, false, false);
        ids.push(self.eos);
        ids
    }

    /// The chat prompt (system message listing the tools, the user request, the generation
    /// prompt) with the system part served from the prefix cache.
    fn start(
        &self,
        catalog: &Catalog,
        hash: &str,
        request: &str,
        _catalog_text: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        let b = &self.bundle;
        let prompt = if self.native_tools {
            b.template
                .native_tools_prompt(&catalog.to_openai(), request)?
        } else {
            b.template
                .tools_prompt_as(None, &catalog.to_openai(), request, self.tool_list)?
        };
        let pt = prompt.tokenize(&b.tokenizer);
        // Leave room for a reply of a reasonable size.
        if pt.tokens.len() + 16 > self.limit {
            return Ok(Started::Overflow(format!(
                "prompt too long for the model ({} tokens, context {})",
                pt.tokens.len(),
                self.limit
            )));
        }
        let key = PrefixKey {
            model: b.model.fingerprint(),
            catalog: hash.to_string(),
            // Which prompt the prefix is: the template, its own tools or ours, and our list.
            template: b.template.id()
                ^ u64::from(self.native_tools)
                ^ (u64::from(self.tool_list == ToolList::Compact) << 1),
        };
        let mut session = b.model.session();
        let (logits, outcome) = self.prefixes.prefill(
            &mut session,
            &key,
            &pt.tokens[..pt.prefix_len],
            &pt.tokens[pt.prefix_len..],
        )?;
        Ok(Started::Ready {
            state: Box::new(LlamaState {
                session,
                limit: self.limit,
            }),
            logits,
            prefix_hit: Some(outcome == PrefixOutcome::Hit),
            prompt_tokens: pt.tokens.len(),
        })
    }
}

struct LlamaState {
    session: Session,
    limit: usize,
}

impl DecodeState for LlamaState {
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError> {
        Ok(self.session.prefill_all_logits(ids)?)
    }

    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError> {
        Ok(self.session.step(id)?)
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.session.len())
    }

    fn rewind(&mut self, n: usize) {
        let len = self.session.len().saturating_sub(n);
        self.session.truncate(len);
    }
}
