//! plansmith-llama: the Llama-family pretrained runtime.
//!
//! - [`GgufFile`]: GGUF header / metadata / quantized tensors with typed errors.
//! - [`Tokenizer`]: GPT-2 byte-level BPE from GGUF metadata, llama.cpp-compatible splitting.
//! - [`LlamaModel`] + [`Session`]: forward with KV cache, `prefill` / `step` -> logits,
//!   `snapshot` / `restore`; [`PrefixCache`]: LRU of prefix snapshots bounded by memory.
//! - [`ModelBundle`]: one entry point for a `.gguf` file or a Hugging Face directory
//!   (`config.json` + safetensors + `tokenizer.json`), see [`hf`].
//! - [`ChatTemplate`]: the GGUF's Jinja chat template via minijinja, tools in the system prompt.

mod attention;
pub mod config;
pub mod error;
pub mod gguf;
mod kquant;
mod linear;
pub mod model;
pub mod qkernel;
mod spm;
pub mod tokenizer;

pub use config::{Gemma, LlamaConfig};
pub use error::{LlamaError, Result};
pub use gguf::{GgufArch, GgufFile};
pub use model::{argmax, KvSnapshot, LlamaModel, Session};
pub use tokenizer::{PreTokenizer, TokenKind, Tokenizer};
pub mod chat;
pub mod prefix;

pub use chat::{ChatMessage, ChatTemplate, ToolList, ToolsPrompt, ToolsPromptTokens};
pub use prefix::{PrefixCache, PrefixKey, PrefixOutcome};
pub mod bundle;

pub use bundle::{greedy_generate, GgufBundle, ModelBundle};
pub mod hf;

pub use hf::{HfArch, HfConfig};
/// Benchmarks (reached through `plansmith bench`); not part of the library API.
#[cfg(feature = "bench")]
pub mod bench;

#[cfg(feature = "bench")]
pub use bench::{bench_lm, BenchOptions, BenchReport, BenchRow};
pub mod lora;

pub use lora::{LoraConfig, LoraTarget, LoraTrainer, PeftAdapter};
pub mod train;

pub use train::{
    bf16::supported as bf16_supported, check_lora_settings, BasePrecision, EngineConfig, Example,
    LoraEngine, StepStats,
};
