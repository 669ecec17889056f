//! Llama-family decoder for inference: RMSNorm, interleaved RoPE (GGUF layout), grouped-query
//! attention, SwiGLU, tied or separate output head. Activations are f32; weights are quantized
//! (the own Q4_1 kernel or candle's `QMatMul` over GGUF blocks) or dense f32.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor, D};

use crate::attention::{cached_attention, AttnShape};
use crate::config::LlamaConfig;
use crate::error::{LlamaError, Result};
use crate::gguf::{GgufArch, GgufFile};
use crate::linear::Linear;
use crate::qkernel::QMatrix;

/// Token embedding table: quantized rows (dequantized on lookup) or dense f32.
#[derive(Debug, Clone)]
pub(crate) enum Embedding {
    Quantized(Arc<QTensor>),
    /// Repacked for the own kernels, shared with a tied output head.
    Packed(Arc<QMatrix>),
    Dense(Tensor),
}

impl Embedding {
    fn lookup(&self, ids: &[u32], device: &Device) -> Result<Tensor> {
        Ok(match self {
            Self::Quantized(q) => q.embedding(&Tensor::new(ids, device)?)?,
            Self::Packed(q) => {
                let mut rows = Vec::with_capacity(ids.len() * q.cols());
                for &id in ids {
                    rows.extend(q.dequantize_row(id as usize)?);
                }
                Tensor::from_vec(rows, (ids.len(), q.cols()), device)?
            }
            Self::Dense(t) => t.embedding(&Tensor::new(ids, device)?)?,
        })
    }
}

/// Weights of one decoder block.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub attn_norm: Tensor,
    pub wq: Linear,
    pub wk: Linear,
    pub wv: Linear,
    pub wo: Linear,
    pub ffn_norm: Tensor,
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    /// q/k/v projection biases (Qwen2), q/k rows in the interleaved-RoPE layout.
    pub bq: Option<Tensor>,
    pub bk: Option<Tensor>,
    pub bv: Option<Tensor>,
    /// Per-head RMSNorm weights `[head_dim]` applied to q / k before RoPE (Qwen3), in the
    /// interleaved-RoPE layout.
    pub q_norm: Option<Tensor>,
    pub k_norm: Option<Tensor>,
    /// RMSNorm weights applied to the attention / feed-forward output before it joins the
    /// residual stream (Gemma 3).
    pub post_attn_norm: Option<Tensor>,
    pub post_ffn_norm: Option<Tensor>,
}

impl Block {
    /// A block without biases or q/k norms.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn plain(
        attn_norm: Tensor,
        wq: Linear,
        wk: Linear,
        wv: Linear,
        wo: Linear,
        ffn_norm: Tensor,
        gate: Linear,
        up: Linear,
        down: Linear,
    ) -> Self {
        Self {
            attn_norm,
            wq,
            wk,
            wv,
            wo,
            ffn_norm,
            gate,
            up,
            down,
            bq: None,
            bk: None,
            bv: None,
            q_norm: None,
            k_norm: None,
            post_attn_norm: None,
            post_ffn_norm: None,
        }
    }
}

/// Dense f32 copy of a (possibly quantized) matmul weight.
pub(crate) fn dense_weight(w: &Linear) -> Result<Tensor> {
    w.to_dense()
}

fn hash_tensor(t: &Tensor, h: &mut impl Hasher) -> Result<()> {
    t.dims().hash(h);
    for v in t.flatten_all()?.to_vec1::<f32>()? {
        v.to_bits().hash(h);
    }
    Ok(())
}

/// A loaded Llama-family model (immutable; share it behind an `Arc` across sessions).
#[derive(Debug)]
pub struct LlamaModel {
    cfg: LlamaConfig,
    embed: Embedding,
    blocks: Vec<Block>,
    norm: Tensor,
    output: Linear,
    /// cos / sin tables `[max_position, head_dim / 2]`.
    cos: Tensor,
    sin: Tensor,
    /// The same for the sliding-window layers when their RoPE base differs (Gemma 3).
    local_rope: Option<(Tensor, Tensor)>,
    fingerprint: u64,
    device: Device,
}

/// RoPE tables for interleaved rotation of pairs `(x[2i], x[2i+1])` with frequency
/// `theta^(-2i/d)`. The angle `pos * freq` is formed in f32, as Hugging Face's rotary embedding
/// and llama.cpp form it: the models were trained with those tables, and an f64 angle differs
/// by up to ~1e-5 at a few thousand positions (measured against PyTorch + PEFT gradients in
/// `tests/lora_peft_golden.rs`, where it was the largest error of the training step).
pub(crate) fn rope_tables(cfg: &LlamaConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    rope_tables_for(cfg.rope_theta, cfg, device)
}

/// [`rope_tables`] for the local (sliding-window) layers, when their base differs.
pub(crate) fn local_rope_tables(
    cfg: &LlamaConfig,
    device: &Device,
) -> Result<Option<(Tensor, Tensor)>> {
    match cfg.gemma.rope_theta_local {
        Some(theta) if theta != cfg.rope_theta && cfg.gemma.sliding_window.is_some() => {
            Ok(Some(rope_tables_for(theta, cfg, device)?))
        }
        _ => Ok(None),
    }
}

fn rope_tables_for(theta: f64, cfg: &LlamaConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = cfg.head_dim / 2;
    let n = cfg.max_position;
    let mut cos = Vec::with_capacity(n * half);
    let mut sin = Vec::with_capacity(n * half);
    let inv: Vec<f32> = (0..half)
        .map(|i| (1.0 / theta.powf(2.0 * i as f64 / cfg.head_dim as f64)) as f32)
        .collect();
    for p in 0..n {
        for f in &inv {
            let a = p as f32 * f;
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    Ok((
        Tensor::from_vec(cos, (n, half), device)?,
        Tensor::from_vec(sin, (n, half), device)?,
    ))
}

impl LlamaModel {
    /// Load from an opened GGUF file (any [`GgufArch`]: `llama`, `qwen2`, `qwen3`, `gemma3`).
    pub fn from_gguf(g: &mut GgufFile) -> Result<Self> {
        let cfg = g.llama_config()?;
        let d = cfg.hidden_size;
        let (hd, nh, nkv, ff) = (
            cfg.head_dim,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.intermediate_size,
        );
        let dev = Device::Cpu;
        let qmm = |g: &mut GgufFile, name: &str, shape: &[usize]| -> Result<Linear> {
            let q = g.tensor(name, Some(shape))?;
            Linear::from_qtensor(q)
        };
        let dense = |g: &mut GgufFile, name: &str, shape: &[usize]| -> Result<Tensor> {
            let q = g.tensor(name, Some(shape))?;
            Ok(q.dequantize(&Device::Cpu)?)
        };
        let arch = g.architecture()?;
        // q/k (and their biases / norms) in the interleaved-RoPE order, permuted when the file
        // stores them rotate-half (see `GgufArch::rotates_halves`).
        let rope_rows = |g: &mut GgufFile, name: &str, shape: &[usize], heads: usize| {
            if arch.rotates_halves() {
                g.tensor_rope_interleaved(name, shape, heads, hd)
            } else {
                g.tensor(name, Some(shape))
            }
        };
        let embed_q = Arc::new(g.tensor("token_embd.weight", Some(&[cfg.vocab_size, d]))?);
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let p = |s: &str| format!("blk.{i}.{s}.weight");
            let pb = |s: &str| format!("blk.{i}.{s}.bias");
            let mut b = Block::plain(
                dense(g, &p("attn_norm"), &[d])?,
                Linear::from_qtensor(rope_rows(g, &p("attn_q"), &[nh * hd, d], nh)?)?,
                Linear::from_qtensor(rope_rows(g, &p("attn_k"), &[nkv * hd, d], nkv)?)?,
                qmm(g, &p("attn_v"), &[nkv * hd, d])?,
                qmm(g, &p("attn_output"), &[d, nh * hd])?,
                dense(g, &p("ffn_norm"), &[d])?,
                qmm(g, &p("ffn_gate"), &[ff, d])?,
                qmm(g, &p("ffn_up"), &[ff, d])?,
                qmm(g, &p("ffn_down"), &[d, ff])?,
            );
            match arch {
                GgufArch::Llama => {}
                GgufArch::Qwen2 => {
                    b.bq = Some(rope_rows(g, &pb("attn_q"), &[nh * hd], nh)?.dequantize(&dev)?);
                    b.bk = Some(rope_rows(g, &pb("attn_k"), &[nkv * hd], nkv)?.dequantize(&dev)?);
                    b.bv = Some(dense(g, &pb("attn_v"), &[nkv * hd])?);
                }
                GgufArch::Qwen3 | GgufArch::Gemma3 => {
                    b.q_norm = Some(rope_rows(g, &p("attn_q_norm"), &[hd], 1)?.dequantize(&dev)?);
                    b.k_norm = Some(rope_rows(g, &p("attn_k_norm"), &[hd], 1)?.dequantize(&dev)?);
                }
            }
            if arch == GgufArch::Gemma3 {
                // Gemma's norms scale by (1 + w); llama.cpp's converter stores 1 + w already.
                b.post_attn_norm = Some(dense(g, &p("post_attention_norm"), &[d])?);
                b.post_ffn_norm = Some(dense(g, &p("post_ffw_norm"), &[d])?);
            }
            blocks.push(b);
        }
        let norm = dense(g, "output_norm.weight", &[d])?;
        // A tied head shares the repacked table with the embedding lookup.
        let embed_packed = crate::linear::packed(&embed_q)?.map(Arc::new);
        let output = if cfg.tie_embeddings {
            match &embed_packed {
                Some(p) => Linear::Packed(p.clone()),
                None => Linear::from_arc(embed_q.clone())?,
            }
        } else {
            qmm(g, "output.weight", &[cfg.vocab_size, d])?
        };
        let (cos, sin) = rope_tables(&cfg, &dev)?;
        let local_rope = local_rope_tables(&cfg, &dev)?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(&cfg).unwrap_or_default().hash(&mut h);
        // By content, not path: a checkpoint or cached prefix of this file is found again when
        // the file is reached through another path.
        g.content_sample_hash()?.hash(&mut h);
        g.file_size().hash(&mut h);
        let mut names: Vec<&str> = g.tensor_names().collect();
        names.sort_unstable();
        names.hash(&mut h);
        let embed = match (embed_packed, embed_q.dtype()) {
            (Some(p), _) => Embedding::Packed(p),
            (None, candle_core::quantized::GgmlDType::F32) => {
                Embedding::Dense(embed_q.dequantize(&dev)?)
            }
            (None, _) => Embedding::Quantized(embed_q),
        };
        Ok(Self {
            cfg,
            embed,
            blocks,
            norm,
            output,
            cos,
            sin,
            local_rope,
            fingerprint: h.finish(),
            device: dev,
        })
    }

    /// Build from dense parts (safetensors loading, tests).
    pub(crate) fn from_parts(
        cfg: LlamaConfig,
        embed: Tensor,
        blocks: Vec<Block>,
        norm: Tensor,
        output: Option<Tensor>,
        fingerprint: u64,
    ) -> Result<Self> {
        let dev = embed.device().clone();
        let (cos, sin) = rope_tables(&cfg, &dev)?;
        let local_rope = local_rope_tables(&cfg, &dev)?;
        let output = Linear::dense(output.unwrap_or_else(|| embed.clone()));
        Ok(Self {
            cfg,
            embed: Embedding::Dense(embed),
            blocks,
            norm,
            output,
            cos,
            sin,
            local_rope,
            fingerprint,
            device: dev,
        })
    }

    /// A randomly initialised model (tests, LoRA experiments).
    pub fn random(cfg: LlamaConfig, seed: u64) -> Result<Self> {
        let dev = Device::Cpu;
        let mut rng = SplitMix(seed);
        let (d, hd, nh, nkv, ff) = (
            cfg.hidden_size,
            cfg.head_dim,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.intermediate_size,
        );
        let mut r = |shape: (usize, usize)| -> Result<Tensor> {
            let std = (1.0 / shape.1 as f64).sqrt() as f32;
            rng.normal_tensor(shape, std)
        };
        let ones = || Tensor::ones(d, DType::F32, &dev);
        let mut blocks = Vec::new();
        for _ in 0..cfg.num_layers {
            blocks.push(Block::plain(
                ones()?,
                Linear::dense(r((nh * hd, d))?),
                Linear::dense(r((nkv * hd, d))?),
                Linear::dense(r((nkv * hd, d))?),
                Linear::dense(r((d, nh * hd))?),
                ones()?,
                Linear::dense(r((ff, d))?),
                Linear::dense(r((ff, d))?),
                Linear::dense(r((d, ff))?),
            ));
        }
        if !cfg.gemma.is_off() {
            // Gemma's q/k norms and post norms, around 1 so that they matter.
            let mut rn = SplitMix(seed ^ 0x9e);
            let mut around_one = |n: usize| -> Result<Tensor> {
                Ok((rn.normal_tensor((1, n), 0.3)?.reshape(n)? + 1.0)?)
            };
            for b in &mut blocks {
                b.q_norm = Some(around_one(hd)?);
                b.k_norm = Some(around_one(hd)?);
                b.post_attn_norm = Some(around_one(d)?);
                b.post_ffn_norm = Some(around_one(d)?);
            }
        }
        let embed = SplitMix(seed ^ 0xe).normal_tensor((cfg.vocab_size, d), 1.0)?;
        let norm = ones()?;
        Self::from_parts(cfg, embed, blocks, norm, None, seed ^ 0x5eed)
    }

    /// A copy with every weight dequantized to dense f32 (candle matmuls over f32 tensors). Slower
    /// and ~8x larger than a Q4 model, but free of activation quantization: the reference for
    /// comparisons with f32 checkpoints. The fingerprint differs from the quantized model's.
    pub fn dequantized(&self) -> Result<LlamaModel> {
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for b in &self.blocks {
            let mut nb = b.clone();
            for w in [
                &mut nb.wq,
                &mut nb.wk,
                &mut nb.wv,
                &mut nb.wo,
                &mut nb.gate,
                &mut nb.up,
                &mut nb.down,
            ] {
                *w = Linear::dense(dense_weight(w)?);
            }
            blocks.push(nb);
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.fingerprint.hash(&mut h);
        "dequantized-f32".hash(&mut h);
        Ok(Self {
            cfg: self.cfg.clone(),
            embed: Embedding::Dense(self.embed_dense()?),
            blocks,
            norm: self.norm.clone(),
            output: Linear::dense(self.output_dense()?),
            cos: self.cos.clone(),
            sin: self.sin.clone(),
            local_rope: self.local_rope.clone(),
            fingerprint: h.finish(),
            device: self.device.clone(),
        })
    }

    /// A new model with a LoRA adapter applied: each targeted projection computes
    /// `x W^T + (alpha / r) (x A^T) B^T`, its base weight kept as it was (quantized weights keep
    /// their fast kernels) and shared with `self`, as are untouched weights. Numerically this is
    /// the merged `W + (alpha / r) B A` up to f32 rounding. The fingerprint depends on the
    /// adapter's values, so prefix caches never mix adapted and base models.
    ///
    /// Errors: a layer index outside the model, or an A / B whose shape does not fit the
    /// projection (`TensorShape`, naming the PEFT tensor).
    pub fn with_adapter(&self, adapter: &crate::lora::PeftAdapter) -> Result<LlamaModel> {
        use crate::lora::LoraTarget;
        let cfg = &self.cfg;
        let r = adapter.config.r;
        if r == 0 {
            return Err(LlamaError::State("LoRA adapter has r = 0".into()));
        }
        let scale = adapter.config.alpha / r as f64;
        let mut blocks = self.blocks.clone();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.fingerprint.hash(&mut h);
        "lora-merge".hash(&mut h);
        scale.to_bits().hash(&mut h);
        for ((li, t), (a, b)) in &adapter.weights {
            let name = |m: &str| format!("{}.{m}.weight", t.peft_prefix(*li));
            let shape_err =
                |m: &str, found: &Tensor, expected: Vec<usize>| LlamaError::TensorShape {
                    path: adapter.path.clone(),
                    tensor: name(m),
                    found: found.dims().to_vec(),
                    expected,
                };
            let Some(block) = blocks.get_mut(*li) else {
                return Err(LlamaError::TensorShape {
                    path: adapter.path.clone(),
                    tensor: name("lora_A"),
                    found: vec![*li],
                    expected: vec![cfg.num_layers],
                });
            };
            let (out, inp) = t.shape(cfg);
            if a.dims() != [r, inp] {
                return Err(shape_err("lora_A", a, vec![r, inp]));
            }
            if b.dims() != [out, r] {
                return Err(shape_err("lora_B", b, vec![out, r]));
            }
            let w = match t {
                LoraTarget::Q => &mut block.wq,
                LoraTarget::K => &mut block.wk,
                LoraTarget::V => &mut block.wv,
                LoraTarget::O => &mut block.wo,
                LoraTarget::Gate => &mut block.gate,
                LoraTarget::Up => &mut block.up,
                LoraTarget::Down => &mut block.down,
            };
            let a = a.to_dtype(DType::F32)?;
            let b = b.to_dtype(DType::F32)?;
            (*li, *t).hash(&mut h);
            hash_tensor(&a, &mut h)?;
            hash_tensor(&b, &mut h)?;
            *w = Linear::low_rank(w.clone(), &a, &b, scale)?;
        }
        Ok(Self {
            cfg: self.cfg.clone(),
            embed: self.embed.clone(),
            blocks,
            norm: self.norm.clone(),
            output: self.output.clone(),
            cos: self.cos.clone(),
            sin: self.sin.clone(),
            local_rope: self.local_rope.clone(),
            fingerprint: h.finish(),
            device: self.device.clone(),
        })
    }

    /// Model configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// A stable-within-process identity of the weights (used to key prefix caches and to
    /// refuse snapshots taken from another model).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    pub(crate) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    pub(crate) fn embed_dense(&self) -> Result<Tensor> {
        Ok(match &self.embed {
            Embedding::Dense(t) => t.clone(),
            Embedding::Quantized(q) => q.dequantize(&self.device)?,
            Embedding::Packed(q) => {
                Tensor::from_vec(q.dequantize(), (q.rows(), q.cols()), &self.device)?
            }
        })
    }

    pub(crate) fn norm_weight(&self) -> &Tensor {
        &self.norm
    }

    pub(crate) fn output_dense(&self) -> Result<Tensor> {
        dense_weight(&self.output)
    }

    /// Start a decoding session with an empty KV cache.
    pub fn session(self: &Arc<Self>) -> Session {
        Session {
            model: self.clone(),
            kv: KvState::new(self.cfg.num_layers),
            tokens: Vec::new(),
        }
    }

    /// Run `tokens` at positions `kv.len..`, appending to the cache. Returns logits `[n, vocab]`
    /// for the last `n` positions where `n = 1` unless `all_logits`.
    fn forward(&self, kv: &mut KvState, tokens: &[u32], all_logits: bool) -> Result<Tensor> {
        let cfg = &self.cfg;
        let l = tokens.len();
        let p0 = kv.len;
        if p0 + l > cfg.max_position {
            return Err(LlamaError::ContextOverflow {
                needed: p0 + l,
                max: cfg.max_position,
            });
        }
        for &t in tokens {
            if t as usize >= cfg.vocab_size {
                return Err(LlamaError::TokenOutOfRange {
                    id: t,
                    vocab: cfg.vocab_size,
                });
            }
        }
        kv.ensure_capacity(cfg, p0 + l, &self.device)?;
        let (nh, nkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
        let t_all = p0 + l;
        let eps = cfg.rms_eps as f32;
        let mut x = self.embed.lookup(tokens, &self.device)?; // [l, d]
        if cfg.gemma.scale_embeddings {
            // In f32, as llama.cpp scales them.
            x = (x * f64::from((cfg.hidden_size as f32).sqrt()))?;
        }
        let cos = self.cos.narrow(0, p0, l)?;
        let sin = self.sin.narrow(0, p0, l)?;
        let local = match &self.local_rope {
            Some((c, s)) => Some((c.narrow(0, p0, l)?, s.narrow(0, p0, l)?)),
            None => None,
        };
        let scale = 1.0 / (hd as f64).sqrt();
        let post_norm = |y: Tensor, w: &Option<Tensor>| -> Result<Tensor> {
            Ok(match w {
                Some(w) => candle_nn::ops::rms_norm(&y, w, eps)?,
                None => y,
            })
        };
        for (li, b) in self.blocks.iter().enumerate() {
            let window = cfg.layer_window(li);
            let (cos, sin) = match (&local, window) {
                (Some((c, s)), Some(_)) => (c, s),
                _ => (&cos, &sin),
            };
            let h = candle_nn::ops::rms_norm(&x, &b.attn_norm, eps)?;
            let add_bias = |y: Tensor, bias: &Option<Tensor>| -> Result<Tensor> {
                Ok(match bias {
                    Some(bias) => y.broadcast_add(bias)?,
                    None => y,
                })
            };
            let q = add_bias(b.wq.forward(&h)?, &b.bq)?;
            let k = add_bias(b.wk.forward(&h)?, &b.bk)?;
            let v = add_bias(b.wv.forward(&h)?, &b.bv)?;
            // [l, heads*hd] -> [1, heads, l, hd]
            let q = q.reshape((1, l, nh, hd))?.transpose(1, 2)?.contiguous()?;
            let k = k.reshape((1, l, nkv, hd))?.transpose(1, 2)?.contiguous()?;
            let q = match &b.q_norm {
                Some(w) => candle_nn::ops::rms_norm(&q, w, eps)?,
                None => q,
            };
            let k = match &b.k_norm {
                Some(w) => candle_nn::ops::rms_norm(&k, w, eps)?,
                None => k,
            };
            let v = v.reshape((l, nkv, hd))?.transpose(0, 1)?.contiguous()?;
            let q = candle_nn::rotary_emb::rope_i(&q, cos, sin)?;
            let k = candle_nn::rotary_emb::rope_i(&k, cos, sin)?;
            let k = k.reshape((nkv, l, hd))?;
            kv.k[li].slice_set(&k, 1, p0)?;
            kv.v[li].slice_set(&v, 1, p0)?;
            let shape = AttnShape {
                nh,
                nkv,
                hd,
                p0,
                l,
                cap: kv.cap,
                window,
            };
            let y = cached_attention(&q, &kv.k[li], &kv.v[li], shape, scale as f32)?;
            let y = post_norm(b.wo.forward(&y)?, &b.post_attn_norm)?;
            x = (x + y)?;
            let h = candle_nn::ops::rms_norm(&x, &b.ffn_norm, eps)?;
            let g = b.gate.forward(&h)?;
            let u = b.up.forward(&h)?;
            let g = if cfg.gemma.gelu_gate {
                g.gelu()? // tanh approximation, as Gemma's `gelu_pytorch_tanh`
            } else {
                candle_nn::ops::silu(&g)?
            };
            let f = b.down.forward(&(g * u)?)?;
            x = (x + post_norm(f, &b.post_ffn_norm)?)?;
        }
        kv.len = t_all;
        let x = if all_logits {
            x
        } else {
            x.narrow(0, l - 1, 1)?
        };
        let x = candle_nn::ops::rms_norm(&x, &self.norm, eps)?;
        self.output.forward(&x)
    }
}

/// Per-layer K/V buffers `[n_kv_heads, capacity, head_dim]`, filled up to `len`.
#[derive(Debug)]
struct KvState {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    len: usize,
    cap: usize,
    layers: usize,
}

const KV_CHUNK: usize = 256;

impl KvState {
    fn new(layers: usize) -> Self {
        Self {
            k: Vec::new(),
            v: Vec::new(),
            len: 0,
            cap: 0,
            layers,
        }
    }

    fn ensure_capacity(&mut self, cfg: &LlamaConfig, needed: usize, dev: &Device) -> Result<()> {
        if needed <= self.cap && self.k.len() == self.layers {
            return Ok(());
        }
        let new_cap = needed
            .max(self.cap * 3 / 2)
            .div_ceil(KV_CHUNK)
            .saturating_mul(KV_CHUNK)
            .min(cfg.max_position.max(needed));
        let mut nk = Vec::with_capacity(self.layers);
        let mut nv = Vec::with_capacity(self.layers);
        for li in 0..self.layers {
            let k = Tensor::zeros((cfg.num_kv_heads, new_cap, cfg.head_dim), DType::F32, dev)?;
            let v = Tensor::zeros((cfg.num_kv_heads, new_cap, cfg.head_dim), DType::F32, dev)?;
            if self.len > 0 {
                k.slice_set(&self.k[li].narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
                v.slice_set(&self.v[li].narrow(1, 0, self.len)?.contiguous()?, 1, 0)?;
            }
            nk.push(k);
            nv.push(v);
        }
        self.k = nk;
        self.v = nv;
        self.cap = new_cap;
        Ok(())
    }
}

/// A copy of a session's KV cache and the tokens that produced it.
#[derive(Debug, Clone)]
pub struct KvSnapshot {
    model: u64,
    tokens: Vec<u32>,
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    /// Logits after the last token (so a restored session can sample without recomputing).
    last_logits: Option<Vec<f32>>,
}

impl KvSnapshot {
    /// Tokens covered by the snapshot.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Memory held by the snapshot in bytes.
    pub fn bytes(&self) -> usize {
        let kv: usize = self
            .k
            .iter()
            .chain(&self.v)
            .map(|t| t.elem_count() * 4)
            .sum();
        kv + self.tokens.len() * 4 + self.last_logits.as_ref().map_or(0, |l| l.len() * 4)
    }

    /// Logits after the last covered token, if recorded.
    pub fn last_logits(&self) -> Option<&[f32]> {
        self.last_logits.as_deref()
    }
}

/// A decoding session: a KV cache over a shared model.
#[derive(Debug)]
pub struct Session {
    model: Arc<LlamaModel>,
    kv: KvState,
    tokens: Vec<u32>,
}

/// Tokens per prefill forward pass (bounds the attention score memory).
const PREFILL_CHUNK: usize = 512;

impl Session {
    /// The model.
    pub fn model(&self) -> &Arc<LlamaModel> {
        &self.model
    }

    /// Tokens in the cache.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Drop cached positions after `len` (cheap: rewinds the cache).
    pub fn truncate(&mut self, len: usize) {
        if len < self.tokens.len() {
            self.tokens.truncate(len);
            self.kv.len = len;
        }
    }

    /// Clear the cache.
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Append `tokens` (in chunks) and return the next-token logits after the last one.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(LlamaError::State("prefill needs at least one token".into()));
        }
        let mut last = None;
        for chunk in tokens.chunks(PREFILL_CHUNK) {
            let before = self.kv.len;
            match self.model.forward(&mut self.kv, chunk, false) {
                Ok(l) => last = Some(l),
                Err(e) => {
                    self.kv.len = before;
                    return Err(e);
                }
            }
            self.tokens.extend_from_slice(chunk);
        }
        let logits = last.ok_or_else(|| LlamaError::State("no logits".into()))?;
        Ok(logits.flatten_all()?.to_vec1::<f32>()?)
    }

    /// Logits for every position of `tokens` (appended to the cache): `[len, vocab]` row-major.
    pub fn prefill_all_logits(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        let mut rows = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(PREFILL_CHUNK) {
            let before = self.kv.len;
            let l = self
                .model
                .forward(&mut self.kv, chunk, true)
                .inspect_err(|_| {
                    self.kv.len = before;
                })?;
            rows.extend(l.to_vec2::<f32>()?);
            self.tokens.extend_from_slice(chunk);
        }
        Ok(rows)
    }

    /// Append one token and return the next-token logits.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        self.prefill(&[token])
    }

    /// Copy the cache (tokens, K/V) so it can be restored later or into another session.
    pub fn snapshot(&self) -> Result<KvSnapshot> {
        let n = self.kv.len;
        let copy = |ts: &[Tensor]| -> Result<Vec<Tensor>> {
            ts.iter()
                .map(|t| Ok(t.narrow(1, 0, n)?.contiguous()?.copy()?))
                .collect()
        };
        let (k, v) = if n == 0 {
            (Vec::new(), Vec::new())
        } else {
            (copy(&self.kv.k)?, copy(&self.kv.v)?)
        };
        Ok(KvSnapshot {
            model: self.model.fingerprint,
            tokens: self.tokens.clone(),
            k,
            v,
            last_logits: None,
        })
    }

    /// Copy the cache and remember the given next-token logits with it.
    pub fn snapshot_with_logits(&self, logits: Vec<f32>) -> Result<KvSnapshot> {
        let mut s = self.snapshot()?;
        s.last_logits = Some(logits);
        Ok(s)
    }

    /// Replace the cache with a snapshot. When this session already holds the snapshot's
    /// tokens as a prefix, it only rewinds (no copy).
    pub fn restore(&mut self, snap: &KvSnapshot) -> Result<()> {
        if snap.model != self.model.fingerprint {
            return Err(LlamaError::State(
                "snapshot was taken from a different model".into(),
            ));
        }
        let n = snap.tokens.len();
        if self.tokens.len() >= n && self.tokens[..n] == snap.tokens[..] {
            self.truncate(n);
            return Ok(());
        }
        self.kv.len = 0;
        self.tokens.clear();
        if n == 0 {
            return Ok(());
        }
        let cfg = self.model.cfg.clone();
        self.kv.ensure_capacity(&cfg, n, &self.model.device)?;
        for li in 0..self.kv.layers {
            self.kv.k[li].slice_set(&snap.k[li], 1, 0)?;
            self.kv.v[li].slice_set(&snap.v[li], 1, 0)?;
        }
        self.kv.len = n;
        self.tokens.extend_from_slice(&snap.tokens);
        Ok(())
    }
}

/// Small deterministic RNG (candle's CPU device cannot be seeded).
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn normal_tensor(&mut self, shape: (usize, usize), std: f32) -> Result<Tensor> {
        let n = shape.0 * shape.1;
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            let (u1, u2) = (self.uniform().max(1e-12), self.uniform());
            let r = (-2.0 * u1.ln()).sqrt();
            v.push((r * (2.0 * std::f64::consts::PI * u2).cos()) as f32 * std);
            v.push((r * (2.0 * std::f64::consts::PI * u2).sin()) as f32 * std);
        }
        v.truncate(n);
        Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
    }

    pub fn uniform_tensor(&mut self, shape: (usize, usize), bound: f32) -> Result<Tensor> {
        let v: Vec<f32> = (0..shape.0 * shape.1)
            .map(|_| ((self.uniform() * 2.0 - 1.0) as f32) * bound)
            .collect();
        Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
    }
}

/// Index of the largest logit.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[allow(dead_code)]
pub(crate) fn last_dim_softmax(t: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::ops::softmax(t, D::Minus1)?)
}
