//! # plansmith-lm
//!
//! The language-model layer of plansmith: token codecs, the tiny causal transformer that
//! plan-DSL planners are trained from scratch on, its KV cache and decode sessions, and
//! prompt-masked SFT training — pure Rust on candle (core + nn), CPU first.
//!
//! ## What this crate owns
//! - **Codecs** ([`codec`], [`piece`]): learned sub-word pieces (the default for new planners),
//!   the mixle-compatible character codec (pad 0, unk 1, sorted corpus
//!   characters plus `\n`, persisted as `{"itos": [...]}`) and a byte-level codec; the
//!   [`Codec`] trait exposes `token_bytes` so a grammar engine can build its token trie.
//! - **TinyGpt** ([`tiny_gpt`]): mixle's `CausalLM` architecture (pre-LN, fused QKV, 4x GELU
//!   MLP, tied head, learned positions or RoPE) built only from ops that carry gradients on
//!   candle's CPU backend; weights in `model.safetensors` with mixle's tensor names.
//! - **KV cache and decoding** ([`decode`]): [`Session`] (feed / push / logits), cheap
//!   [`Snapshot`]s of a shared prefix, greedy and seeded temperature sampling, teacher-forced
//!   completion scoring.
//! - **Inference forward** ([`infer`]): [`InferModel`], a flat-buffer copy of a TinyGpt with a
//!   growable KV cache, ~10x cheaper per decode step than the candle graph; planners decode with it.
//! - **Training** ([`train`]): [`fit_pairs`] — prompt-masked next-token loss, AdamW with warm-up
//!   and cosine decay, gradient clipping, seeded deterministic batching, indicatif progress,
//!   atomic resumable checkpoints. On the CPU the step runs on the hand-written forward/backward
//!   of [`fast`] ([`FastTrainer`], ~4.7x faster than candle autograd); candle autograd stays as
//!   the reference ([`TrainEngine::Reference`]) the fast path is tested against.
//! - **Benchmarks** ([`mod@bench`]): training throughput and cached vs. uncached decode latency.
//!
//! ## What it must not know
//! Tools, catalogs, plan syntax, grammars and validation live in `plansmith-core` /
//! `plansmith-grammar` / `plansmith-planner`. This crate sees token ids, text and logits only: a
//! constrained decoder applies its own masks to [`Session::logits`] and pushes the token it
//! picks. No HTTP (axum), no CLI parsing, no `anyhow` — errors are the typed [`LmError`].
//!
//! ## Training on CPU: the gradient caveat
//! candle's fused CPU kernels for `layer_norm`, `rms_norm`, `softmax_last_dim` and `rope` have
//! no backward pass; anything trained here uses explicit LayerNorm math,
//! `candle_nn::ops::softmax`, `rope_slow` and plain matmul attention, and the test
//! `tests/grad.rs` asserts every trainable variable receives a non-zero gradient.

/// Benchmarks (reached through `plansmith bench`); not part of the library API.
#[cfg(feature = "bench")]
pub mod bench;
pub mod codec;
pub mod decode;
pub mod error;
pub mod fast;
pub mod infer;
pub mod io;
mod kernels;
pub mod optim;
pub mod piece;
pub mod tiny_gpt;
pub mod train;

pub use candle_core::Device;
pub use codec::{AnyCodec, ByteCodec, CharCodec, Codec, EOS_CHAR, PAD_ID, UNK_ID};
pub use decode::{
    generate, generate_from, generate_text, score_completion, score_tokens, CompletionScore,
    FinishReason, GenerateConfig, Generation, Sampler, Session, Snapshot,
};
pub use error::{LmError, Result};
pub use fast::{FastBatch, FastTrainer};
pub use infer::{InferCache, InferModel, Rows};
pub use piece::{DropoutEncoder, PieceCodec};
pub use tiny_gpt::{KvCache, PosEncoding, TinyGpt, TinyGptConfig};
pub use train::{
    fit_pairs, fit_token_pairs, CheckpointConfig, Progress, TrainConfig, TrainEngine, TrainReport,
};
