//! The tiny GPT backend: a model trained here, its codec, and the tools line (for
//! tools-in-prompt planners) as a KV prefix cached by catalog hash.

use std::collections::HashMap;
use std::sync::Mutex;

use plansmith_core::Catalog;
use plansmith_grammar::TokEnv;
use plansmith_lm::{AnyCodec, Codec, InferCache, InferModel, Rows, TinyGpt};

use crate::backend::{DecodeState, ModelBackend, Persisted, Started};
use crate::error::PlannerError;
use crate::prompt::{self, CatalogText};

/// Context a short request, the arrow and a one-call reply take: what the advice in
/// [`PlannerError::CatalogTooLong`] leaves free.
const REQUEST_ROOM: usize = 48;

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

    fn rewind(&mut self, n: usize) {
        let len = self.cache.len().saturating_sub(n);
        self.cache.truncate(len);
    }
}

impl ModelBackend for TinyLm {
    fn tok_env(&self) -> Result<TokEnv, PlannerError> {
        tiny_tok_env(&self.codec, self.model.config().vocab)
    }

    fn grammar_eos(&self) -> u32 {
        // The codec's padding id never appears in text; the DSL's own `\n` terminator is
        // ordinary text to the grammar.
        self.codec.pad_id()
    }

    fn can_spell(&self, text: &str) -> bool {
        !self.codec.encode(text).contains(&plansmith_lm::UNK_ID)
    }

    fn max_new_tokens(&self) -> usize {
        self.model.config().block
    }

    fn fast_forward(&self) -> bool {
        !matches!(self.codec, AnyCodec::Piece(_))
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.codec.encode(text).len()
    }

    fn start(
        &self,
        catalog: &Catalog,
        hash: &str,
        request: &str,
        catalog_text: CatalogText,
    ) -> Result<Started<'_>, PlannerError> {
        let (mut cache, prefix_hit) = self.prefix_state(catalog, hash, catalog_text)?;
        let ids = self.codec.encode(&format!("{request}{}", prompt::ARROW));
        let tools_tokens = cache.len();
        match self.fast.forward(&ids, &mut cache, Rows::Last) {
            Ok(logits) => Ok(Started::Ready {
                state: Box::new(TinyState {
                    model: &self.fast,
                    cache,
                }),
                logits,
                prefix_hit,
                prompt_tokens: tools_tokens + ids.len(),
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

    fn check_catalog(
        &self,
        catalog: &Catalog,
        hash: &str,
        catalog_text: CatalogText,
    ) -> Result<(), PlannerError> {
        self.prefix_state(catalog, hash, catalog_text).map(|_| ())
    }

    fn free_stop(&self, id: u32) -> bool {
        id == self.codec.eos_id() || id == self.codec.pad_id()
    }

    fn detokenize(&self, ids: &[u32]) -> String {
        self.codec.decode(ids)
    }

    fn tokenize_completion(&self, text: &str) -> Vec<u32> {
        self.codec.encode(text)
    }

    fn into_tiny(self: Box<Self>) -> Option<(TinyGpt, AnyCodec)> {
        Some((self.model, self.codec))
    }

    fn persisted(&self) -> Persisted<'_> {
        Persisted::Tiny {
            model: &self.model,
            codec: &self.codec,
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
    TokEnv::from_token_bytes(tokens, eos, &specials, Some(model_vocab)).map_err(PlannerError::from)
}
