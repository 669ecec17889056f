//! A model projection `y = x W^T`: the own kernels ([`crate::qkernel`]) where the GGUF stores
//! Q4_1, Q8_0, Q4_K, Q5_K or Q6_K weights (and Q4_0 / Q5_0, widened to Q8_0), candle's
//! `QMatMul` for every other quantization and for dense f32, and a LoRA adapter kept beside
//! its base as a low-rank side path.

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::error::Result;
use crate::qkernel::{Kernel, QFormat, QMatrix};

/// `q` repacked for the own kernels when they beat candle on this CPU: Q4_1 always (candle's
/// Q4_1 dot product is scalar everywhere), the others (Q8_0, Q4_0 / Q5_0, the K-quants) only
/// with a SIMD kernel (candle has AVX2 and NEON paths for those that the portable kernel
/// would not beat).
pub(crate) fn packed(q: &QTensor) -> Result<Option<QMatrix>> {
    let own = match QFormat::from_ggml(q.dtype()) {
        Some(QFormat::Q4_1) => true,
        Some(_) => Kernel::best() != Kernel::Scalar,
        // Q4_0 / Q5_0 widen to Q8_0 without loss (see `QMatrix::takes`).
        None => QMatrix::takes(q.dtype()) && Kernel::best() != Kernel::Scalar,
    };
    if own {
        QMatrix::from_qtensor(q)
    } else {
        Ok(None)
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Linear {
    Candle(QMatMul),
    Packed(Arc<QMatrix>),
    /// `x W^T + (x A^T) (s B)^T`: the base keeps its (quantized) kernel and the adapter adds
    /// two rank-r products. Why not merge `W + s B A` into one weight: the merged weight is
    /// dense f32, which decodes through candle's f32 gemm several times slower than the
    /// quantized kernels (and requantizing it would add error the trained adapter never saw).
    LowRank(Arc<LowRank>),
}

/// A base projection with a LoRA adapter beside it.
#[derive(Debug)]
pub(crate) struct LowRank {
    base: Linear,
    /// `A^T`, `[in, r]`, contiguous.
    a_t: Tensor,
    /// `(s B)^T`, `[r, out]`, contiguous, the scale `alpha / r` folded in.
    b_t: Tensor,
}

impl Linear {
    /// Take over a quantized tensor `[out, in]`: formats the own kernels serve best (see
    /// [`packed`]) are repacked for them (the GGUF copy is dropped), the rest goes to candle.
    pub(crate) fn from_qtensor(q: QTensor) -> Result<Self> {
        Ok(match packed(&q)? {
            Some(m) => Self::Packed(Arc::new(m)),
            None => Self::Candle(QMatMul::from_qtensor(q)?),
        })
    }

    /// A tensor shared with another user (a tied embedding that has no own kernel).
    pub(crate) fn from_arc(q: Arc<QTensor>) -> Result<Self> {
        Ok(Self::Candle(QMatMul::from_arc(q)?))
    }

    /// A dense f32 weight `[out, in]`.
    pub(crate) fn dense(w: Tensor) -> Self {
        Self::Candle(QMatMul::Tensor(w))
    }

    /// `base` with the adapter `A` `[r, in]`, `B` `[out, r]` scaled by `scale` beside it (shapes
    /// checked by the caller).
    pub(crate) fn low_rank(base: Linear, a: &Tensor, b: &Tensor, scale: f64) -> Result<Self> {
        let a_t = a.to_dtype(DType::F32)?.t()?.contiguous()?;
        let b_t = (b.to_dtype(DType::F32)? * scale)?.t()?.contiguous()?;
        Ok(Self::LowRank(Arc::new(LowRank { base, a_t, b_t })))
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Candle(w) => w.forward(x)?,
            Self::Packed(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
            Self::LowRank(lr) => {
                let y = lr.base.forward(x)?;
                let side = x.broadcast_matmul(&lr.a_t)?.broadcast_matmul(&lr.b_t)?;
                (y + side)?
            }
        })
    }

    /// Dense f32 copy of the weight `[out, in]` (LoRA training, merging, export).
    pub(crate) fn to_dense(&self) -> Result<Tensor> {
        Ok(match self {
            Self::Candle(QMatMul::QTensor(q)) => q.dequantize(&Device::Cpu)?,
            Self::Candle(QMatMul::Tensor(t)) => t.clone(),
            Self::Candle(QMatMul::TensorF16(t)) => t.to_dtype(DType::F32)?,
            Self::Packed(m) => {
                Tensor::from_vec(m.dequantize(), (m.rows(), m.cols()), &Device::Cpu)?
            }
            Self::LowRank(lr) => (lr.base.to_dense()? + lr.a_t.matmul(&lr.b_t)?.t()?)?,
        })
    }
}
