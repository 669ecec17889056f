//! What the training step reads: the frozen base as flat f32 buffers (dequantized once) and the
//! LoRA matrices as one flat parameter vector, so the optimizer, gradient clipping and
//! checkpoints treat all adapters as a single slice.

use candle_core::Tensor;

use crate::config::LlamaConfig;
use crate::error::{LlamaError, Result};
use crate::lora::LoraTarget;
use crate::model::LlamaModel;

fn flat(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

/// One decoder block, frozen. `w` is indexed by [`LoraTarget`] (`Q K V O Gate Up Down`), each
/// `[out, in]` row-major; q/k rows in the interleaved-RoPE layout the runtime uses.
pub(crate) struct FrozenLayer {
    pub attn_norm: Vec<f32>,
    pub ffn_norm: Vec<f32>,
    pub w: [Vec<f32>; 7],
    /// q / k / v biases (Qwen2).
    pub bias: [Option<Vec<f32>>; 3],
    /// Per-head q / k RMSNorm weights (Qwen3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
}

/// The frozen base model.
pub(crate) struct FrozenBase {
    pub cfg: LlamaConfig,
    pub embed: Vec<f32>,
    pub norm: Vec<f32>,
    /// `None` when the output head is the (tied) embedding.
    pub output: Option<Vec<f32>>,
    pub layers: Vec<FrozenLayer>,
    /// RoPE tables `[max_position, head_dim / 2]`.
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
}

impl FrozenBase {
    pub fn from_model(model: &LlamaModel) -> Result<Self> {
        let cfg = model.config().clone();
        cfg.gemma.refuse("LoRA training")?;
        if !cfg.head_dim.is_multiple_of(2)
            || cfg.num_kv_heads == 0
            || !cfg.num_heads.is_multiple_of(cfg.num_kv_heads)
        {
            return Err(LlamaError::Unsupported(format!(
                "training needs an even head_dim and num_heads divisible by num_kv_heads \
                 (head_dim {}, heads {}, kv heads {})",
                cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
            )));
        }
        let opt = |t: &Option<Tensor>| t.as_ref().map(flat).transpose();
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for b in model.blocks() {
            let d = |w: &crate::linear::Linear| -> Result<Vec<f32>> { flat(&w.to_dense()?) };
            layers.push(FrozenLayer {
                attn_norm: flat(&b.attn_norm)?,
                ffn_norm: flat(&b.ffn_norm)?,
                w: [
                    d(&b.wq)?,
                    d(&b.wk)?,
                    d(&b.wv)?,
                    d(&b.wo)?,
                    d(&b.gate)?,
                    d(&b.up)?,
                    d(&b.down)?,
                ],
                bias: [opt(&b.bq)?, opt(&b.bk)?, opt(&b.bv)?],
                q_norm: opt(&b.q_norm)?,
                k_norm: opt(&b.k_norm)?,
            });
        }
        let embed = flat(&model.embed_dense()?)?;
        let output = if cfg.tie_embeddings {
            None
        } else {
            Some(flat(&model.output_dense()?)?)
        };
        let (cos, sin) = crate::model::rope_tables(&cfg, &candle_core::Device::Cpu)?;
        Ok(Self {
            embed,
            norm: flat(model.norm_weight())?,
            output,
            layers,
            cos: flat(&cos)?,
            sin: flat(&sin)?,
            cfg,
        })
    }

    pub fn output(&self) -> &[f32] {
        self.output.as_deref().unwrap_or(&self.embed)
    }

    /// Bytes held by the frozen weights.
    pub fn bytes(&self) -> usize {
        let l: usize = self
            .layers
            .iter()
            .map(|l| l.w.iter().map(Vec::len).sum::<usize>() + 2 * l.attn_norm.len())
            .sum();
        4 * (l + self.embed.len() + self.output.as_ref().map_or(0, Vec::len))
    }
}

/// Where one adapter's A `[r, in]` and B `[out, r]` live in the flat parameter vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub layer: usize,
    pub target: LoraTarget,
    pub a: usize,
    pub b: usize,
    pub out: usize,
    pub inp: usize,
}

/// All LoRA matrices of a model, stored flat.
#[derive(Debug, Clone)]
pub(crate) struct LoraParams {
    pub r: usize,
    pub scale: f32,
    pub slots: Vec<Slot>,
    /// `[layer][target as usize]` -> index into `slots`.
    by_layer: Vec<[Option<usize>; 7]>,
    pub data: Vec<f32>,
}

impl LoraParams {
    /// A random / B zero, as PEFT initialises (A ~ U(-1/sqrt(in), 1/sqrt(in)), the bound of
    /// PyTorch's `kaiming_uniform_(a = sqrt(5))`).
    pub fn new(cfg: &LlamaConfig, r: usize, alpha: f64, targets: &[LoraTarget], seed: u64) -> Self {
        let mut slots = Vec::new();
        let mut by_layer = vec![[None; 7]; cfg.num_layers];
        let mut len = 0;
        for (layer, row) in by_layer.iter_mut().enumerate() {
            for &target in LoraTarget::ALL.iter().filter(|t| targets.contains(t)) {
                let (out, inp) = target.shape(cfg);
                row[target as usize] = Some(slots.len());
                slots.push(Slot {
                    layer,
                    target,
                    a: len,
                    b: len + r * inp,
                    out,
                    inp,
                });
                len += r * inp + out * r;
            }
        }
        let mut data = vec![0f32; len];
        let mut rng = crate::model::SplitMix(seed);
        for s in &slots {
            let bound = 1.0 / (s.inp as f64).sqrt();
            for v in &mut data[s.a..s.a + r * s.inp] {
                *v = ((rng.uniform() * 2.0 - 1.0) * bound) as f32;
            }
        }
        Self {
            r,
            scale: (alpha / r as f64) as f32,
            slots,
            by_layer,
            data,
        }
    }

    pub fn slot(&self, layer: usize, target: LoraTarget) -> Option<Slot> {
        self.by_layer[layer][target as usize].map(|i| self.slots[i])
    }

    pub fn a<'a>(&self, s: &Slot, data: &'a [f32]) -> &'a [f32] {
        &data[s.a..s.a + self.r * s.inp]
    }

    pub fn b<'a>(&self, s: &Slot, data: &'a [f32]) -> &'a [f32] {
        &data[s.b..s.b + s.out * self.r]
    }
}
