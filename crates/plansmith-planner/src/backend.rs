//! The seam between the planner loop and the language models it decodes with. A backend
//! says how requests are put to its model (prompt, vocabulary, context) and feeds the prompt;
//! the planner's decode loop, grammar, gate, teacher and harvest are the same for all of them.
//!
//! Two backends exist: a tiny GPT trained here ([`crate::tiny`]) and a pretrained Llama-family
//! model prompted through its chat template ([`crate::llama`]). A new model family implements
//! [`ModelBackend`] in its own module; nothing in the planner loop changes.

use std::path::Path;

use plansmith_core::Catalog;
use plansmith_grammar::TokEnv;
use plansmith_lm::{AnyCodec, TinyGpt};

use crate::error::PlannerError;
use crate::prompt::CatalogText;

/// A model plus the way requests are put to it.
pub trait ModelBackend: Send + Sync {
    /// The token vocabulary the grammar masks over.
    fn tok_env(&self) -> Result<TokEnv, PlannerError>;

    /// The id the grammar treats as end of output.
    fn grammar_eos(&self) -> u32;

    /// Whether the vocabulary can spell `text` (a char codec only knows its training chars).
    fn can_spell(&self, text: &str) -> bool;

    /// Longest completion a decode may produce before it is cut off as a dead end (a
    /// pretrained model can repeat itself inside an unbounded string forever).
    fn max_new_tokens(&self) -> usize;

    /// Whether tokens the grammar forces may skip the model. True where forced bytes have a
    /// single spelling (one-character or one-byte codecs) and for pretrained models, where the
    /// saved forward passes matter most; false for sub-word pieces, whose greedy spelling of
    /// forced bytes is often not the split the model was trained on.
    fn fast_forward(&self) -> bool;

    /// Tokens `text` takes in this model's vocabulary.
    fn count_tokens(&self, text: &str) -> usize;

    /// Feed the prompt for `request` against `catalog` (hash `hash`).
    fn start(
        &self,
        catalog: &Catalog,
        hash: &str,
        request: &str,
        catalog_text: CatalogText,
    ) -> Result<Started<'_>, PlannerError>;

    /// Check that `catalog` leaves the context room for a request (a backend with a cached
    /// catalog prefix may compute and cache it here).
    fn check_catalog(
        &self,
        catalog: &Catalog,
        hash: &str,
        catalog_text: CatalogText,
    ) -> Result<(), PlannerError>;

    /// Whether an unconstrained decode stops at `id`.
    fn free_stop(&self, id: u32) -> bool;

    /// Every token that ends a reply: where the grammar lets the reply end, the end competes
    /// with the best of these (a chat model may close with `<|endoftext|>` rather than the
    /// template's end-of-turn token, which [`ModelBackend::grammar_eos`] stands for).
    fn end_ids(&self) -> Vec<u32> {
        vec![self.grammar_eos()]
    }

    /// Text of generated ids (stop tokens dropped).
    fn detokenize(&self, ids: &[u32]) -> String;

    /// Ids of a completion text, as teacher forcing feeds them.
    fn tokenize_completion(&self, text: &str) -> Vec<u32>;

    /// What the planner directory stores for this model.
    fn persisted(&self) -> Persisted<'_>;

    /// The tiny GPT and its codec, taken out to continue training them (`train --init`);
    /// `None` for backends that are not a tiny GPT.
    fn into_tiny(self: Box<Self>) -> Option<(TinyGpt, AnyCodec)> {
        None
    }
}

/// What a planner directory records of its model: the families `planner.json` knows.
pub enum Persisted<'a> {
    /// A tiny GPT: its weights and codec live in the directory.
    Tiny {
        model: &'a TinyGpt,
        codec: &'a AnyCodec,
    },
    /// A pretrained model: the directory names the base file and holds the adapter, if any.
    Pretrained {
        base: &'a Path,
        adapter: Option<&'a Path>,
    },
    /// A model on a remote engine ([`crate::remote`]): nothing to save.
    Remote { describe: &'a str },
}

/// An incremental decoding state: a KV cache positioned after the prompt.
pub trait DecodeState {
    /// Append `ids`; the next-token logits after each of them.
    fn feed(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, PlannerError>;
    /// Append one token; the next-token logits.
    fn step(&mut self, id: u32) -> Result<Vec<f32>, PlannerError>;
    /// How many more tokens fit in the context.
    fn room(&self) -> usize;
    /// Forget the last `n` tokens fed (at most as many as were fed after the prompt), so
    /// another continuation can be fed from there.
    fn rewind(&mut self, n: usize);
}

/// The prompt has been fed: a state and the logits of the first completion token, or the
/// reason it could not be (the request does not fit the context).
pub enum Started<'a> {
    Ready {
        state: Box<dyn DecodeState + 'a>,
        logits: Vec<f32>,
        /// Whether the shared prefix came from the cache (None: there is no shared prefix).
        prefix_hit: Option<bool>,
        /// Tokens the model read: the tools prompt and the request (what an API reports as
        /// its usage's prompt tokens).
        prompt_tokens: usize,
    },
    Overflow(String),
}
