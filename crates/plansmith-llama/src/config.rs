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
    /// The Gemma-3 variations of the block; the default is the Llama block.
    #[serde(default, skip_serializing_if = "Gemma::is_off")]
    pub gemma: Gemma,
}

/// How a Gemma-3 decoder differs from a Llama one (llama.cpp's `gemma3` graph, Hugging Face's
/// `Gemma3ForCausalLM`). All off describes Llama / Qwen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gemma {
    /// Token embeddings are multiplied by `sqrt(hidden_size)` before the first block.
    pub scale_embeddings: bool,
    /// The feed-forward gate is GELU (tanh approximation) instead of SiLU: GeGLU.
    pub gelu_gate: bool,
    /// Layers that attend only to the last `window` positions (the query's own included);
    /// `None`: every layer sees the whole context.
    pub sliding_window: Option<usize>,
    /// Every `pattern`-th layer (the last of each group) sees the whole context; the others use
    /// the sliding window. Gemma 3: 6.
    pub sliding_window_pattern: usize,
    /// RoPE base of the sliding-window layers (Gemma 3: 10,000; the global layers use
    /// `rope_theta`).
    pub rope_theta_local: Option<f64>,
}

impl Gemma {
    /// True for a Llama / Qwen block.
    pub fn is_off(&self) -> bool {
        *self == Self::default()
    }
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
            gemma: Gemma::default(),
        }
    }

    /// The attention window of layer `layer`: `Some(w)` for a sliding-window layer.
    pub fn layer_window(&self, layer: usize) -> Option<usize> {
        let w = self.gemma.sliding_window?;
        let pattern = self.gemma.sliding_window_pattern;
        let global = pattern > 0 && (layer + 1).is_multiple_of(pattern);
        (!global).then_some(w)
    }

    /// The RoPE base of layer `layer`.
    pub fn layer_rope_theta(&self, layer: usize) -> f64 {
        match (self.layer_window(layer), self.gemma.rope_theta_local) {
            (Some(_), Some(local)) => local,
            _ => self.rope_theta,
        }
    }

    /// Check every size against what a model this runtime can hold may have, before anything
    /// is allocated from it (a file's header can claim 2^60 layers or positions). On failure:
    /// the field at fault and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let within = |field: &'static str, v: usize, max: usize| {
            if v == 0 || v > max {
                Err((field, format!("{v} is outside 1..={max}")))
            } else {
                Ok(())
            }
        };
        within("vocab_size", self.vocab_size, 1 << 22)?;
        within("hidden_size", self.hidden_size, 1 << 17)?;
        within("intermediate_size", self.intermediate_size, 1 << 19)?;
        within("num_layers", self.num_layers, 1024)?;
        within("num_heads", self.num_heads, 4096)?;
        within("num_kv_heads", self.num_kv_heads, self.num_heads)?;
        within("head_dim", self.head_dim, 1 << 12)?;
        within("max_position", self.max_position, 1 << 21)?;
        if !self.head_dim.is_multiple_of(2) {
            return Err((
                "head_dim",
                format!("{} is odd (RoPE rotates pairs)", self.head_dim),
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err((
                "num_kv_heads",
                format!(
                    "{} does not divide {} heads",
                    self.num_kv_heads, self.num_heads
                ),
            ));
        }
        if let Some(w) = self.gemma.sliding_window {
            within("sliding_window", w, 1 << 21)?;
        }
        let local = self.gemma.rope_theta_local.unwrap_or(self.rope_theta);
        for (field, v) in [
            ("rope_theta", self.rope_theta),
            ("rope_theta_local", local),
            ("rms_eps", self.rms_eps),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err((field, format!("{v} must be a positive number")));
            }
        }
        Ok(())
    }

    /// Bytes of KV cache per token (f32).
    pub fn kv_bytes_per_token(&self) -> usize {
        2 * self.num_layers * self.num_kv_heads * self.head_dim * 4
    }
}
