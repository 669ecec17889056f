//! Llama-family model configuration.

use serde::{Deserialize, Serialize};

/// Hyper-parameters of a Llama-family decoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rope_theta: f64,
    pub rms_eps: f64,
    /// Maximum context length (positions).
    pub max_position: usize,
    /// Output head shares the token embedding.
    pub tie_embeddings: bool,
}

impl LlamaConfig {
    /// A tiny configuration for tests.
    pub fn tiny(vocab_size: usize) -> Self {
        Self {
            vocab_size,
            hidden_size: 32,
            intermediate_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 8,
            rope_theta: 10_000.0,
            rms_eps: 1e-5,
            max_position: 256,
            tie_embeddings: true,
        }
    }

    /// Bytes of KV cache per token (f32).
    pub fn kv_bytes_per_token(&self) -> usize {
        2 * self.num_layers * self.num_kv_heads * self.head_dim * 4
    }
}
