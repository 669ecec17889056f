//! What the training step reads: the frozen base as flat f32 buffers (dequantized once) and the
//! LoRA matrices as one flat parameter vector, so the optimizer, gradient clipping and
//! checkpoints treat all adapters as a single slice.

use candle_core::Tensor;

use super::bf16::{self, PackedB};
use super::kernels::{linear, linear_back};
use super::BasePrecision;
use crate::config::LlamaConfig;
use crate::error::{LlamaError, Result};
use crate::lora::LoraTarget;
use crate::model::LlamaModel;

fn flat(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_vec1::<f32>()?)
}

/// A frozen projection `[out, in]` and its two products, in the precision the run chose.
pub(crate) enum FrozenMatrix {
    /// Row-major `[out, in]`.
    F32(Vec<f32>),
    /// Packed once for each product (see [`super::bf16`]).
    Bf16 { fwd: PackedB, back: PackedB },
}

impl FrozenMatrix {
    fn new(w: Vec<f32>, inp: usize, out: usize, precision: BasePrecision) -> Self {
        match precision {
            BasePrecision::F32 => Self::F32(w),
            BasePrecision::Bf16 => Self::Bf16 {
                fwd: PackedB::for_linear(&w, inp, out),
                back: PackedB::for_linear_back(&w, inp, out),
            },
        }
    }

    /// `y = x W^T` for `rows` rows.
    pub fn linear(&self, y: &mut [f32], x: &[f32], rows: usize, inp: usize, out: usize) {
        match self {
            Self::F32(w) => linear(y, x, w, rows, inp, out),
            Self::Bf16 { fwd, .. } => bf16::matmul(y, x, rows, fwd, false),
        }
    }

    /// `dx [+]= dy W`.
    #[allow(clippy::too_many_arguments)]
    pub fn linear_back(
        &self,
        dx: &mut [f32],
        dy: &[f32],
        rows: usize,
        inp: usize,
        out: usize,
        acc: bool,
    ) {
        match self {
            Self::F32(w) => linear_back(dx, dy, w, rows, inp, out, acc),
            Self::Bf16 { back, .. } => bf16::matmul(dx, dy, rows, back, acc),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Self::F32(w) => 4 * w.len(),
            Self::Bf16 { fwd, back } => fwd.bytes() + back.bytes(),
        }
    }
}

/// The output head: its own matrix or the tied f32 embedding.
pub(crate) enum HeadRef<'a> {
    Own(&'a FrozenMatrix),
    Tied(&'a [f32]),
}

impl HeadRef<'_> {
    pub fn linear(&self, y: &mut [f32], x: &[f32], rows: usize, d: usize, vocab: usize) {
        match self {
            Self::Own(m) => m.linear(y, x, rows, d, vocab),
            Self::Tied(w) => linear(y, x, w, rows, d, vocab),
        }
    }

    pub fn linear_back(&self, dx: &mut [f32], dy: &[f32], rows: usize, d: usize, vocab: usize) {
        match self {
            Self::Own(m) => m.linear_back(dx, dy, rows, d, vocab, false),
            Self::Tied(w) => linear_back(dx, dy, w, rows, d, vocab, false),
        }
    }
}

/// One decoder block, frozen. `w` is indexed by [`LoraTarget`] (`Q K V O Gate Up Down`), each
/// `[out, in]`; q/k rows in the interleaved-RoPE layout the runtime uses.
pub(crate) struct FrozenLayer {
    pub attn_norm: Vec<f32>,
    pub ffn_norm: Vec<f32>,
    pub w: [FrozenMatrix; 7],
    /// q / k / v biases (Qwen2).
    pub bias: [Option<Vec<f32>>; 3],
    /// Per-head q / k RMSNorm weights (Qwen3, Gemma 3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// RMSNorms of the attention's and the MLP's outputs before each residual add (Gemma 3).
    pub post_attn_norm: Option<Vec<f32>>,
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// The frozen base model.
pub(crate) struct FrozenBase {
    pub cfg: LlamaConfig,
    pub precision: BasePrecision,
    pub embed: Vec<f32>,
    pub norm: Vec<f32>,
    /// The output head `[vocab, hidden]`; `None` when it is the tied embedding in f32 (no
    /// second copy).
    output: Option<FrozenMatrix>,
    pub layers: Vec<FrozenLayer>,
    /// RoPE tables `[max_position, head_dim / 2]`.
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
    /// The same for the sliding-window layers when their RoPE base differs (Gemma 3).
    local_rope: Option<(Vec<f32>, Vec<f32>)>,
}

impl FrozenBase {
    pub fn from_model(model: &LlamaModel, precision: BasePrecision) -> Result<Self> {
        let cfg = model.config().clone();
        if precision == BasePrecision::Bf16 && !bf16::supported() {
            return Err(LlamaError::Unsupported(
                "a bf16 frozen base needs a CPU with AVX-512 BF16; train with an f32 base".into(),
            ));
        }
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
            let d = |w: &crate::linear::Linear, t: LoraTarget| -> Result<FrozenMatrix> {
                let (out, inp) = t.shape(&cfg);
                Ok(FrozenMatrix::new(
                    flat(&w.to_dense()?)?,
                    inp,
                    out,
                    precision,
                ))
            };
            layers.push(FrozenLayer {
                attn_norm: flat(&b.attn_norm)?,
                ffn_norm: flat(&b.ffn_norm)?,
                w: [
                    d(&b.wq, LoraTarget::Q)?,
                    d(&b.wk, LoraTarget::K)?,
                    d(&b.wv, LoraTarget::V)?,
                    d(&b.wo, LoraTarget::O)?,
                    d(&b.gate, LoraTarget::Gate)?,
                    d(&b.up, LoraTarget::Up)?,
                    d(&b.down, LoraTarget::Down)?,
                ],
                bias: [opt(&b.bq)?, opt(&b.bk)?, opt(&b.bv)?],
                q_norm: opt(&b.q_norm)?,
                k_norm: opt(&b.k_norm)?,
                post_attn_norm: opt(&b.post_attn_norm)?,
                post_ffn_norm: opt(&b.post_ffn_norm)?,
            });
        }
        let embed = flat(&model.embed_dense()?)?;
        let head = |w| FrozenMatrix::new(w, cfg.hidden_size, cfg.vocab_size, precision);
        let output = match (cfg.tie_embeddings, precision) {
            (true, BasePrecision::F32) => None,
            (true, BasePrecision::Bf16) => Some(head(embed.clone())),
            (false, _) => Some(head(flat(&model.output_dense()?)?)),
        };
        let (cos, sin) = crate::model::rope_tables(&cfg, &candle_core::Device::Cpu)?;
        let local_rope = match crate::model::local_rope_tables(&cfg, &candle_core::Device::Cpu)? {
            Some((c, s)) => Some((flat(&c)?, flat(&s)?)),
            None => None,
        };
        Ok(Self {
            embed,
            norm: flat(model.norm_weight())?,
            output,
            layers,
            cos: flat(&cos)?,
            sin: flat(&sin)?,
            local_rope,
            cfg,
            precision,
        })
    }

    /// Layer `li`'s RoPE tables: the local ones on a sliding-window layer that has them.
    pub fn rope(&self, li: usize) -> (&[f32], &[f32]) {
        match (&self.local_rope, self.cfg.layer_window(li)) {
            (Some((c, s)), Some(_)) => (c, s),
            _ => (&self.cos, &self.sin),
        }
    }

    /// The output head as a frozen matrix, borrowed.
    pub fn head(&self) -> HeadRef<'_> {
        match &self.output {
            Some(m) => HeadRef::Own(m),
            None => HeadRef::Tied(&self.embed),
        }
    }

    /// Bytes held by the frozen weights.
    pub fn bytes(&self) -> usize {
        let l: usize = self
            .layers
            .iter()
            .map(|l| l.w.iter().map(FrozenMatrix::bytes).sum::<usize>() + 8 * l.attn_norm.len())
            .sum();
        l + 4 * self.embed.len() + self.output.as_ref().map_or(0, FrozenMatrix::bytes)
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
