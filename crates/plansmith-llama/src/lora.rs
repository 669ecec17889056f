//! LoRA adapters on the attention projections over a frozen, dequantized f32 base, trained
//! with ops that carry gradients on CPU (explicit RMSNorm math, `rope_i_slow`,
//! `ops::softmax`, plain matmul attention), saved in PEFT layout.
//!
//! GGUF stores `attn_q` / `attn_k` rows permuted for interleaved RoPE; adapters are trained in
//! that layout and `lora_B` of q/k is un-permuted to the Hugging Face layout on save (and
//! permuted back on load), so PEFT tooling sees ordinary `q_proj` / `k_proj` adapters.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use serde::{Deserialize, Serialize};

use crate::config::LlamaConfig;
use crate::error::{LlamaError, Result};
use crate::model::LlamaModel;

/// A projection an adapter can target: the four attention projections and the three of the
/// SiLU-gated MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LoraTarget {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl LoraTarget {
    /// Every target, in the order adapters are stored.
    pub const ALL: [LoraTarget; 7] = [
        Self::Q,
        Self::K,
        Self::V,
        Self::O,
        Self::Gate,
        Self::Up,
        Self::Down,
    ];

    /// PEFT / Hugging Face module name.
    pub fn peft_name(self) -> &'static str {
        match self {
            Self::Q => "q_proj",
            Self::K => "k_proj",
            Self::V => "v_proj",
            Self::O => "o_proj",
            Self::Gate => "gate_proj",
            Self::Up => "up_proj",
            Self::Down => "down_proj",
        }
    }

    /// The Hugging Face sub-module holding the projection.
    pub fn hf_module(self) -> &'static str {
        match self {
            Self::Q | Self::K | Self::V | Self::O => "self_attn",
            Self::Gate | Self::Up | Self::Down => "mlp",
        }
    }

    /// PEFT tensor-name prefix of this target in layer `layer`.
    pub fn peft_prefix(self, layer: usize) -> String {
        format!(
            "base_model.model.model.layers.{layer}.{}.{}",
            self.hf_module(),
            self.peft_name()
        )
    }

    /// `(out, in)` of the projection for a model configuration.
    pub fn shape(self, cfg: &LlamaConfig) -> (usize, usize) {
        let (d, ff) = (cfg.hidden_size, cfg.intermediate_size);
        let (qd, kvd) = (
            cfg.num_heads * cfg.head_dim,
            cfg.num_kv_heads * cfg.head_dim,
        );
        match self {
            Self::Q => (qd, d),
            Self::K | Self::V => (kvd, d),
            Self::O => (d, qd),
            Self::Gate | Self::Up => (ff, d),
            Self::Down => (d, ff),
        }
    }

    /// Heads whose q/k rows GGUF permutes for interleaved RoPE (`None`: rows as in HF).
    pub(crate) fn rope_heads(self, cfg: &LlamaConfig) -> Option<usize> {
        match self {
            Self::Q => Some(cfg.num_heads),
            Self::K => Some(cfg.num_kv_heads),
            _ => None,
        }
    }

    /// Parse a PEFT module name (`q_proj`, ..., `down_proj`).
    pub fn from_peft(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.peft_name() == s)
    }
}

/// LoRA hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoraConfig {
    pub r: usize,
    pub alpha: f64,
    pub targets: Vec<LoraTarget>,
}

impl Default for LoraConfig {
    fn default() -> Self {
        Self {
            r: 8,
            alpha: 16.0,
            targets: vec![LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O],
        }
    }
}

impl LoraConfig {
    fn scale(&self) -> f64 {
        self.alpha / self.r as f64
    }
}

fn dense(w: &crate::linear::Linear) -> Result<Tensor> {
    crate::model::dense_weight(w)
}

struct DenseBlock {
    attn_norm: Tensor,
    w: [Tensor; 4], // q, k, v, o  ([out, in])
    ffn_norm: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    /// q / k / v biases (Qwen2) and per-head q / k norms (Qwen3), frozen.
    bias: [Option<Tensor>; 3],
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    /// Gemma 3's norms of the attention's and the MLP's outputs.
    post_attn_norm: Option<Tensor>,
    post_ffn_norm: Option<Tensor>,
}

/// Frozen f32 copy of a model plus trainable LoRA matrices.
pub struct LoraTrainer {
    cfg: LlamaConfig,
    lora: LoraConfig,
    embed: Tensor,
    blocks: Vec<DenseBlock>,
    norm: Tensor,
    output: Tensor,
    cos: Tensor,
    sin: Tensor,
    /// Gemma 3's sliding-window layers' RoPE tables, when their base differs.
    local_rope: Option<(Tensor, Tensor)>,
    /// (layer, target) -> (A [r, in], B [out, r]).
    adapters: BTreeMap<(usize, LoraTarget), (Var, Var)>,
    opt: AdamW,
}

fn rms_norm_explicit(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(x.broadcast_div(&(ms + eps)?.sqrt()?)?.broadcast_mul(w)?)
}

/// Row permutation GGUF -> HF for q/k: within each head, GGUF row `2i + s` is HF row
/// `s * hd/2 + i`.
pub(crate) fn gguf_to_hf_rows(t: &Tensor, n_heads: usize, head_dim: usize) -> Result<Tensor> {
    let cols = t.dim(1)?;
    Ok(t.reshape((n_heads, head_dim / 2, 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((n_heads * head_dim, cols))?)
}

pub(crate) fn hf_to_gguf_rows(t: &Tensor, n_heads: usize, head_dim: usize) -> Result<Tensor> {
    let cols = t.dim(1)?;
    Ok(t.reshape((n_heads, 2, head_dim / 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((n_heads * head_dim, cols))?)
}

impl LoraTrainer {
    /// Dequantize `model` into a frozen f32 base and create adapters (A random, B zero, as PEFT).
    pub fn new(model: &LlamaModel, lora: LoraConfig, lr: f64, seed: u64) -> Result<Self> {
        let cfg = model.config().clone();
        if let Some(t) = lora.targets.iter().find(|t| (**t as usize) > 3) {
            return Err(LlamaError::Unsupported(format!(
                "the autograd reference trainer adapts attention projections only, not {}",
                t.peft_name()
            )));
        }
        let dev = Device::Cpu;
        let mut blocks = Vec::new();
        for b in model.blocks() {
            blocks.push(DenseBlock {
                attn_norm: b.attn_norm.clone(),
                w: [dense(&b.wq)?, dense(&b.wk)?, dense(&b.wv)?, dense(&b.wo)?],
                ffn_norm: b.ffn_norm.clone(),
                gate: dense(&b.gate)?,
                up: dense(&b.up)?,
                down: dense(&b.down)?,
                bias: [b.bq.clone(), b.bk.clone(), b.bv.clone()],
                q_norm: b.q_norm.clone(),
                k_norm: b.k_norm.clone(),
                post_attn_norm: b.post_attn_norm.clone(),
                post_ffn_norm: b.post_ffn_norm.clone(),
            });
        }
        let (cos, sin) = crate::model::rope_tables(&cfg, &dev)?;
        let local_rope = crate::model::local_rope_tables(&cfg, &dev)?;
        let mut rng = crate::model::SplitMix(seed);
        let mut adapters = BTreeMap::new();
        let mut vars = Vec::new();
        for (li, b) in blocks.iter().enumerate() {
            for &t in &lora.targets {
                let w = &b.w[t as usize];
                let (out, inp) = w.dims2()?;
                let bound = 1.0 / (inp as f64).sqrt();
                let a = Var::from_tensor(&rng.uniform_tensor((lora.r, inp), bound as f32)?)?;
                let bm = Var::from_tensor(&Tensor::zeros((out, lora.r), DType::F32, &dev)?)?;
                vars.push(a.clone());
                vars.push(bm.clone());
                adapters.insert((li, t), (a, bm));
            }
        }
        let opt = AdamW::new(
            vars,
            ParamsAdamW {
                lr,
                weight_decay: 0.0,
                ..Default::default()
            },
        )?;
        Ok(Self {
            embed: model.embed_dense()?,
            norm: model.norm_weight().clone(),
            output: model.output_dense()?,
            cfg,
            lora,
            blocks,
            cos,
            sin,
            local_rope,
            adapters,
            opt,
        })
    }

    /// All trainable variables with their PEFT-style names.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        let mut v = Vec::new();
        for ((li, t), (a, b)) in &self.adapters {
            let p = t.peft_prefix(*li);
            v.push((format!("{p}.lora_A.weight"), a.clone()));
            v.push((format!("{p}.lora_B.weight"), b.clone()));
        }
        v
    }

    fn proj(&self, li: usize, t: LoraTarget, x: &Tensor) -> Result<Tensor> {
        let w = &self.blocks[li].w[t as usize];
        let y = x.matmul(&w.t()?)?;
        let y = match self.blocks[li].bias.get(t as usize) {
            Some(Some(bias)) => y.broadcast_add(bias)?,
            _ => y,
        };
        match self.adapters.get(&(li, t)) {
            Some((a, b)) => {
                let d = x.matmul(&a.as_tensor().t()?)?.matmul(&b.as_tensor().t()?)?;
                Ok((y + (d * self.lora.scale())?)?)
            }
            None => Ok(y),
        }
    }

    /// Logits `[len, vocab]` for a sequence starting at position 0 (differentiable).
    pub fn forward(&self, tokens: &[u32]) -> Result<Tensor> {
        self.head(&self.hidden(tokens)?)
    }

    /// Final norm and output projection of hidden states `[n, d]`.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let x = rms_norm_explicit(x, &self.norm, self.cfg.rms_eps)?;
        Ok(x.matmul(&self.output.t()?)?)
    }

    /// Hidden states `[len, d]` after the last block (before the final norm).
    fn hidden(&self, tokens: &[u32]) -> Result<Tensor> {
        let cfg = &self.cfg;
        let l = tokens.len();
        if l == 0 || l > cfg.max_position {
            return Err(LlamaError::ContextOverflow {
                needed: l,
                max: cfg.max_position,
            });
        }
        let dev = Device::Cpu;
        let (nh, nkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
        let group = nh / nkv;
        let ids = Tensor::new(tokens, &dev)?;
        let mut x = self.embed.embedding(&ids)?;
        if cfg.gemma.scale_embeddings {
            x = (x * f64::from((cfg.hidden_size as f32).sqrt()))?;
        }
        // Causal, and on a sliding-window layer only the last `w` positions.
        let mask_for = |window: Option<usize>| -> Result<Tensor> {
            let mut m = vec![0f32; l * l];
            for i in 0..l {
                for j in 0..l {
                    if j > i || window.is_some_and(|w| i - j >= w) {
                        m[i * l + j] = f32::NEG_INFINITY;
                    }
                }
            }
            Ok(Tensor::from_vec(m, (l, l), &dev)?)
        };
        let scale = 1.0 / (hd as f64).sqrt();
        let post_norm = |y: Tensor, w: &Option<Tensor>| -> Result<Tensor> {
            Ok(match w {
                Some(w) => rms_norm_explicit(&y, w, cfg.rms_eps)?,
                None => y,
            })
        };
        for (li, b) in self.blocks.iter().enumerate() {
            let window = cfg.layer_window(li);
            let mask = mask_for(window)?;
            let (cos, sin) = match (&self.local_rope, window) {
                (Some((c, s)), Some(_)) => (c, s),
                _ => (&self.cos, &self.sin),
            };
            let h = rms_norm_explicit(&x, &b.attn_norm, cfg.rms_eps)?;
            let q = self.proj(li, LoraTarget::Q, &h)?;
            let k = self.proj(li, LoraTarget::K, &h)?;
            let v = self.proj(li, LoraTarget::V, &h)?;
            let q = q.reshape((1, l, nh, hd))?.transpose(1, 2)?.contiguous()?;
            let k = k.reshape((1, l, nkv, hd))?.transpose(1, 2)?.contiguous()?;
            let q = match &b.q_norm {
                Some(w) => rms_norm_explicit(&q, w, cfg.rms_eps)?,
                None => q,
            };
            let k = match &b.k_norm {
                Some(w) => rms_norm_explicit(&k, w, cfg.rms_eps)?,
                None => k,
            };
            let q = candle_nn::rotary_emb::rope_i_slow(&q, cos, sin)?;
            let k = candle_nn::rotary_emb::rope_i_slow(&k, cos, sin)?;
            let q = (q.reshape((nkv, group * l, hd))? * scale)?;
            let k = k.reshape((nkv, l, hd))?;
            let v = v.reshape((l, nkv, hd))?.transpose(0, 1)?.contiguous()?;
            let att = q.matmul(&k.t()?)?;
            let att = att
                .reshape((nkv, group, l, l))?
                .broadcast_add(&mask)?
                .reshape((nkv, group * l, l))?;
            let att = candle_nn::ops::softmax(&att, D::Minus1)?;
            let y = att
                .matmul(&v)?
                .reshape((nh, l, hd))?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((l, nh * hd))?;
            let y = post_norm(self.proj(li, LoraTarget::O, &y)?, &b.post_attn_norm)?;
            x = (x + y)?;
            let h = rms_norm_explicit(&x, &b.ffn_norm, cfg.rms_eps)?;
            let g = h.matmul(&b.gate.t()?)?;
            let u = h.matmul(&b.up.t()?)?;
            let gated = if cfg.gemma.gelu_gate {
                g.gelu()? // tanh approximation
            } else {
                (g.clone() * candle_nn::ops::sigmoid(&g)?)?
            };
            let f = (gated * u)?;
            x = (x + post_norm(f.matmul(&b.down.t()?)?, &b.post_ffn_norm)?)?;
        }
        Ok(x)
    }

    /// Mean next-token cross-entropy over completion positions (`tokens[prompt_len..]`).
    pub fn loss(&self, tokens: &[u32], prompt_len: usize) -> Result<Tensor> {
        if prompt_len == 0 || prompt_len >= tokens.len() {
            return Err(LlamaError::State(format!(
                "prompt_len {prompt_len} must be in 1..{}",
                tokens.len()
            )));
        }
        // Only completion positions carry loss: project just those rows through the
        // vocabulary-sized head (for a 1,300-token tools prompt that head is most of the
        // step's memory traffic).
        let hidden = self.hidden(&tokens[..tokens.len() - 1])?;
        let start = prompt_len - 1;
        let n = tokens.len() - prompt_len;
        let pred = self.head(&hidden.narrow(0, start, n)?)?;
        let target = Tensor::new(&tokens[prompt_len..], &Device::Cpu)?;
        Ok(candle_nn::loss::cross_entropy(&pred, &target)?)
    }

    /// One optimizer step on one example; returns the loss before the step.
    pub fn train_step(&mut self, tokens: &[u32], prompt_len: usize) -> Result<f32> {
        let loss = self.loss(tokens, prompt_len)?;
        self.opt.backward_step(&loss)?;
        Ok(loss.to_scalar::<f32>()?)
    }

    /// Save in PEFT layout: `adapter_config.json` + `adapter_model.safetensors`.
    pub fn save_peft(&self, dir: &Path, base_model: &str) -> Result<()> {
        let mut tensors = BTreeMap::new();
        for ((li, t), (a, b)) in &self.adapters {
            let p = t.peft_prefix(*li);
            let bt = match t.rope_heads(&self.cfg) {
                Some(h) => gguf_to_hf_rows(b.as_tensor(), h, self.cfg.head_dim)?,
                None => b.as_tensor().clone(),
            };
            tensors.insert(format!("{p}.lora_A.weight"), a.as_tensor().clone());
            tensors.insert(format!("{p}.lora_B.weight"), bt);
        }
        write_peft(dir, &tensors, &self.lora, 0.0, base_model)
    }
}

/// Write a PEFT adapter directory (`adapter_model.safetensors` with PEFT's tensor names, and
/// `adapter_config.json`), each file atomically.
pub(crate) fn write_peft(
    dir: &Path,
    tensors: &BTreeMap<String, Tensor>,
    lora: &LoraConfig,
    dropout: f32,
    base_model: &str,
) -> Result<()> {
    let io = |path: &Path, source| LlamaError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let st = dir.join("adapter_model.safetensors");
    let bytes =
        safetensors::serialize(tensors.iter(), None).map_err(|e| LlamaError::Safetensors {
            path: st.clone(),
            reason: e.to_string(),
        })?;
    plansmith_core::trace::write_atomic(&st, &bytes).map_err(|e| io(&st, e))?;
    let config = serde_json::json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": lora.r,
        "lora_alpha": lora.alpha,
        "lora_dropout": dropout,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "target_modules": lora.targets.iter().map(|t| t.peft_name()).collect::<Vec<_>>(),
    });
    let cp = dir.join("adapter_config.json");
    let text = serde_json::to_vec_pretty(&config).map_err(|source| LlamaError::Json {
        path: cp.clone(),
        source,
    })?;
    plansmith_core::trace::write_atomic(&cp, &text).map_err(|e| io(&cp, e))
}

/// A PEFT adapter read back from disk (B of q/k permuted back to GGUF layout).
#[derive(Debug)]
pub struct PeftAdapter {
    /// Directory the adapter was loaded from (named in errors).
    pub path: std::path::PathBuf,
    pub config: LoraConfig,
    /// (layer, target) -> (A [r, in], B [out, r]) in GGUF layout.
    pub weights: BTreeMap<(usize, LoraTarget), (Tensor, Tensor)>,
}

impl PeftAdapter {
    /// Load `adapter_config.json` + `adapter_model.safetensors` for a model config.
    pub fn load(dir: &Path, cfg: &LlamaConfig) -> Result<Self> {
        let cp = dir.join("adapter_config.json");
        let text = std::fs::read_to_string(&cp).map_err(|source| LlamaError::Io {
            path: cp.clone(),
            source,
        })?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| LlamaError::Json {
                path: cp.clone(),
                source,
            })?;
        let r = v["r"]
            .as_u64()
            .ok_or_else(|| LlamaError::State(format!("{}: missing `r`", cp.display())))?
            as usize;
        let alpha = v["lora_alpha"].as_f64().unwrap_or(r as f64);
        if r == 0 {
            return Err(LlamaError::State(format!("{}: `r` is 0", cp.display())));
        }
        let modules = v["target_modules"].as_array().ok_or_else(|| {
            LlamaError::Unsupported(format!(
                "{}: `target_modules` must be a list of module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
                cp.display()
            ))
        })?;
        let mut targets: Vec<LoraTarget> = Vec::new();
        for m in modules {
            let t = m.as_str().and_then(LoraTarget::from_peft).ok_or_else(|| {
                LlamaError::Unsupported(format!(
                    "{}: LoRA target module {m} (supported: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
                    cp.display()
                ))
            })?;
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        targets.sort();
        let st = dir.join("adapter_model.safetensors");
        let tensors = candle_core::safetensors::load(&st, &Device::Cpu)?;
        let mut weights = BTreeMap::new();
        for li in 0..cfg.num_layers {
            for &t in &targets {
                let p = t.peft_prefix(li);
                let get = |n: &str| {
                    tensors
                        .get(n)
                        .map(|t| t.to_dtype(DType::F32))
                        .transpose()?
                        .ok_or_else(|| LlamaError::MissingTensor {
                            path: st.clone(),
                            tensor: n.to_string(),
                        })
                };
                let a = get(&format!("{p}.lora_A.weight"))?;
                let b = get(&format!("{p}.lora_B.weight"))?;
                let b = match t.rope_heads(cfg) {
                    Some(h) if b.dims() == [h * cfg.head_dim, r] => {
                        hf_to_gguf_rows(&b, h, cfg.head_dim)?
                    }
                    Some(h) => {
                        return Err(LlamaError::TensorShape {
                            path: st.clone(),
                            tensor: format!("{p}.lora_B.weight"),
                            found: b.dims().to_vec(),
                            expected: vec![h * cfg.head_dim, r],
                        })
                    }
                    None => b,
                };
                weights.insert((li, t), (a, b));
            }
        }
        Ok(Self {
            path: dir.to_path_buf(),
            config: LoraConfig { r, alpha, targets },
            weights,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_permutation_round_trips() {
        let t = Tensor::arange(0f32, 48.0, &Device::Cpu)
            .unwrap()
            .reshape((12, 4))
            .unwrap();
        let hf = gguf_to_hf_rows(&t, 3, 4).unwrap();
        let back = hf_to_gguf_rows(&hf, 3, 4).unwrap();
        assert_eq!(t.to_vec2::<f32>().unwrap(), back.to_vec2::<f32>().unwrap());
        // GGUF row 1 (pair 0, second element) is HF row 2 (second half, index 0).
        assert_eq!(
            hf.to_vec2::<f32>().unwrap()[2],
            t.to_vec2::<f32>().unwrap()[1]
        );
    }
}
