//! The language models a planner decodes with, behind one small interface: a tiny GPT trained
//! here (char / byte codec, mixle's `request\n=> ` prompt), or a pretrained Llama-family model
//! (GGUF or Hugging Face directory) prompted through its own chat template.
//!
//! The planner's decode loop, grammar, gate, teacher and harvest are the same for both; only
//! prompt building, the token vocabulary and the forward pass differ.

use std::collections::HashMap;
use std::sync::Mutex;

use plansmith_core::Catalog;
use plansmith_grammar::TokEnv;
use plansmith_lm::{AnyCodec, Codec, InferCache, InferModel, Rows, TinyGpt};

use crate::llama::LlamaLm;
use crate::prompt::{self, CatalogText};
use crate::PlannerError;

/// Context a short request, the arrow and a one-call reply take: what the advice in
/// [`PlannerError::CatalogTooLong`] leaves free.
const REQUEST_ROOM: usize = 48;

/// A model plus the way requests are put to it.
pub enum Lm {
    Tiny(TinyLm),
    Llama(LlamaLm),
}

/// A tiny GPT and its codec; the tools line (for tools-in-prompt planners) is a cached prefix.
/// Decoding runs on `fast`, a flat-buffer copy of the weights (the candle model is kept for
/// saving and as the starting point of further training).
pub struct TinyLm {
    pub model: TinyGpt,
    pub codec: AnyCodec,
    fast: Box<InferModel>,
    prefixes: Mutex<HashMap<String, InferCache>>,
}

impl TinyLm {
    pub fn new(model: TinyGpt, codec: AnyCodec) -> Result<Self, PlannerError> {
        Ok(TinyLm {
            fast: Box::new(InferModel::from_model(&model)?),
            model,
            codec,
            prefixes: Mutex::new(HashMap::new()),
        })
    }
}

/// An incremental decoding state: a KV cache positioned after the prompt.
pub(crate) trait DecodeState {
    /// Append `ids`; the next-token logits after each of them.
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError>;
    /// Append one token; the next-token logits.
    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError>;
    /// How many more tokens fit in the context.
    fn room(&self) -> usize;
}

/// The prompt has been fed: a state and the logits of the first completion token, or the
/// reason it could not be (the request does not fit the context).
pub(crate) enum Started<'a> {
    Ready {
        state: Box<dyn DecodeState + 'a>,
        logits: Vec<f32>,
        /// Whether the shared prefix came from the cache (None: there is no shared prefix).
        prefix_hit: Option<bool>,
    },
    Overflow(String),
}

struct TinyState<'a> {
    model: &'a InferModel,
    cache: InferCache,
}

impl DecodeState for TinyState<'_> {
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError> {
        let flat = self.model.forward(ids, &mut self.cache, Rows::All)?;
        let vocab = self.model.config().vocab;
        Ok(flat.chunks_exact(vocab).map(<[f32]>::to_vec).collect())
    }

    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError> {
        Ok(self.model.forward(&[id], &mut self.cache, Rows::Last)?)
    }

    fn room(&self) -> usize {
        self.model.config().block.saturating_sub(self.cache.len())
    }
}

impl Lm {
    /// The token vocabulary the grammar masks over.
    pub(crate) fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        match self {
            Lm::Tiny(t) => tiny_tok_env(&t.codec, t.model.config().vocab),
            Lm::Llama(l) => l.tok_env(),
        }
    }

    /// The id the grammar treats as end of output.
    pub(crate) fn grammar_eos(&self) -> u32 {
        match self {
            // The codec's padding id never appears in text; the DSL's own `\n` terminator
            // is ordinary text to the grammar.
            Lm::Tiny(t) => t.codec.pad_id(),
            Lm::Llama(l) => l.eos(),
        }
    }

    /// Whether the vocabulary can spell `text` (a char codec only knows its training chars).
    pub(crate) fn can_spell(&self, text: &str) -> bool {
        match self {
            Lm::Tiny(t) => !t.codec.encode(text).contains(&plansmith_lm::UNK_ID),
            Lm::Llama(_) => true,
        }
    }

    /// Longest completion a decode may produce before it is cut off as a dead end (a
    /// pretrained model can repeat itself inside an unbounded string forever).
    pub(crate) fn max_new_tokens(&self) -> usize {
        match self {
            Lm::Tiny(t) => t.model.config().block,
            Lm::Llama(_) => crate::llama::MAX_NEW_TOKENS,
        }
    }

    /// Whether tokens the grammar forces may skip the model. True for one-character (and
    /// one-byte) codecs, where forced bytes have a single spelling, and for pretrained models,
    /// where the saved forward passes matter most; false for sub-word pieces, whose greedy
    /// spelling of forced bytes is often not the split the model was trained on.
    pub fn fast_forward(&self) -> bool {
        match self {
            Lm::Tiny(t) => !matches!(t.codec, AnyCodec::Piece(_)),
            Lm::Llama(_) => true,
        }
    }

    /// Tokens `text` takes in this model's vocabulary.
    pub fn count_tokens(&self, text: &str) -> usize {
        match self {
            Lm::Tiny(t) => t.codec.encode(text).len(),
            Lm::Llama(l) => l.count_tokens(text),
        }
    }

    /// Feed the prompt for `request` against `catalog` (hash `hash`).
    pub(crate) fn start(
        &self,
        catalog: &Catalog,
        hash: &str,
        request: &str,
        catalog_text: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        match self {
            Lm::Tiny(t) => {
                let (mut cache, prefix_hit) = t.prefix_state(catalog, hash, catalog_text)?;
                let ids = t.codec.encode(&format!("{request}{}", prompt::ARROW));
                let tools_tokens = cache.len();
                match t.fast.forward(&ids, &mut cache, Rows::Last) {
                    Ok(logits) => Ok(Started::Ready {
                        state: Box::new(TinyState {
                            model: &t.fast,
                            cache,
                        }),
                        logits,
                        prefix_hit,
                    }),
                    Err(plansmith_lm::LmError::ContextOverflow { needed, block }) => {
                        Ok(Started::Overflow(if tools_tokens == 0 {
                            format!("request too long for the model ({needed} > {block} tokens)")
                        } else {
                            format!(
                                "request too long for the model: the tools take {tools_tokens} \
                                 tokens and the request {}, more than its {block}",
                                needed.saturating_sub(tools_tokens)
                            )
                        }))
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Lm::Llama(l) => l.start(catalog, hash, request),
        }
    }

    /// Check that `catalog`'s tools line leaves the context any room for a request (for a
    /// tiny model this also computes and caches its prefix).
    pub(crate) fn check_catalog(
        &self,
        catalog: &Catalog,
        hash: &str,
        catalog_text: CatalogText,
    ) -> Result<(), PlannerError> {
        match self {
            Lm::Tiny(t) => t.prefix_state(catalog, hash, catalog_text).map(|_| ()),
            // The chat prompt is measured per request (its overflow names the prompt length).
            Lm::Llama(_) => Ok(()),
        }
    }

    /// Whether an unconstrained decode stops at `id` (and how many tokens it may take).
    pub(crate) fn free_stop(&self, id: u32) -> bool {
        match self {
            Lm::Tiny(t) => id == t.codec.eos_id() || id == t.codec.pad_id(),
            Lm::Llama(l) => l.is_stop(id),
        }
    }

    /// Text of generated ids (stop tokens dropped).
    pub(crate) fn detokenize(&self, ids: &[u32]) -> String {
        match self {
            Lm::Tiny(t) => t.codec.decode(ids),
            Lm::Llama(l) => l.detokenize(ids),
        }
    }

    /// Ids of a completion text, as teacher forcing feeds them.
    pub(crate) fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        match self {
            Lm::Tiny(t) => t.codec.encode(text),
            Lm::Llama(l) => l.tokenize_completion(text),
        }
    }
}

impl TinyLm {
    /// KV cache after the shared prompt prefix (the tools line), cached by catalog hash.
    fn prefix_state(
        &self,
        catalog: &Catalog,
        hash: &str,
        catalog_text: CatalogText,
    ) -> Result<(InferCache, Option<bool>), PlannerError> {
        let text = prompt::prefix(catalog, catalog_text);
        if text.is_empty() {
            return Ok((InferCache::new(), None));
        }
        if let Some(cache) = self
            .prefixes
            .lock()
            .map_err(|_| PlannerError::Poisoned)?
            .get(hash)
        {
            return Ok((cache.clone(), Some(true)));
        }
        let ids = self.codec.encode(&text);
        let block = self.model.config().block;
        // A tools line that fills the context leaves no request any room: refuse the catalog
        // (one that leaves a little makes long requests dead ends, named in `start`).
        if ids.len() >= block {
            return Err(PlannerError::CatalogTooLong {
                tools: catalog.len(),
                tokens: ids.len(),
                block,
                fit: block.saturating_sub(REQUEST_ROOM) * catalog.len() / ids.len().max(1),
            });
        }
        let mut cache = InferCache::new();
        self.fast.forward(&ids, &mut cache, Rows::Last)?;
        let mut map = self.prefixes.lock().map_err(|_| PlannerError::Poisoned)?;
        if map.len() >= 32 {
            map.clear();
        }
        map.insert(hash.to_string(), cache.clone());
        Ok((cache, Some(false)))
    }
}

pub fn tiny_tok_env(codec: &AnyCodec, model_vocab: usize) -> Result<TokEnv, PlannerError> {
    let n = codec.vocab_size();
    let tokens: Vec<Vec<u8>> = (0..n as u32).map(|id| codec.token_bytes(id)).collect();
    let eos = codec.pad_id();
    let specials: Vec<u32> = (0..n as u32)
        .filter(|&id| id != eos && tokens[id as usize].is_empty())
        .collect();
    TokEnv::from_token_bytes(tokens, eos, &specials, Some(model_vocab))
        .map_err(PlannerError::from)
}
