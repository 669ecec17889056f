//! A model projection `y = x W^T`: the own Q4_1 kernel ([`crate::qkernel`]) where the GGUF
//! stores Q4_1 weights, candle's `QMatMul` for every other quantization and for dense f32.

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::error::Result;
use crate::qkernel::Q41Matrix;

#[derive(Debug, Clone)]
pub(crate) enum Linear {
    Candle(QMatMul),
    Q4_1(Arc<Q41Matrix>),
}

impl Linear {
    /// Take over a quantized tensor `[out, in]`: Q4_1 is repacked for the own kernel (the
    /// GGUF copy is dropped), anything else goes to candle.
    pub(crate) fn from_qtensor(q: QTensor) -> Result<Self> {
        Ok(match Q41Matrix::from_qtensor(&q)? {
            Some(m) => Self::Q4_1(Arc::new(m)),
            None => Self::Candle(QMatMul::from_qtensor(q)?),
        })
    }

    /// Like [`Self::from_qtensor`] for a tensor shared with another user (a tied embedding).
    pub(crate) fn from_arc(q: Arc<QTensor>) -> Result<Self> {
        Ok(match Q41Matrix::from_qtensor(&q)? {
            Some(m) => Self::Q4_1(Arc::new(m)),
            None => Self::Candle(QMatMul::from_arc(q)?),
        })
    }

    /// A dense f32 weight `[out, in]`.
    pub(crate) fn dense(w: Tensor) -> Self {
        Self::Candle(QMatMul::Tensor(w))
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Candle(w) => w.forward(x)?,
            Self::Q4_1(w) => x.contiguous()?.apply_op1_no_bwd(w.as_ref())?,
        })
    }

    /// Dense f32 copy of the weight `[out, in]` (LoRA training, merging, export).
    pub(crate) fn to_dense(&self) -> Result<Tensor> {
        Ok(match self {
            Self::Candle(QMatMul::QTensor(q)) => q.dequantize(&Device::Cpu)?,
            Self::Candle(QMatMul::Tensor(t)) => t.clone(),
            Self::Candle(QMatMul::TensorF16(t)) => t.to_dtype(DType::F32)?,
            Self::Q4_1(m) => Tensor::from_vec(m.dequantize(), (m.rows(), m.cols()), &Device::Cpu)?,
        })
    }
}
