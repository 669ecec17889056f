//! AdamW with inspectable state.
//!
//! The update is the same as `candle_nn::AdamW` (decoupled weight decay, bias-corrected moments),
//! but the moments and step count are reachable so a checkpoint can store them and a resumed run
//! continues bit-for-bit; candle's optimizer keeps them private. Weight decay applies only to
//! matrices (not to biases, LayerNorm gains or the 1-d parameters), as is customary.

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};

use crate::error::{LmError, Result};

/// Hyper-parameters of [`AdamW`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWParams {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

struct Slot {
    name: String,
    var: Var,
    m: Tensor,
    v: Tensor,
    decay: bool,
}

/// AdamW over named variables.
pub struct AdamW {
    slots: Vec<Slot>,
    step_t: usize,
    params: AdamWParams,
}

impl AdamW {
    /// Optimizer over `vars` (name, variable). Matrices (rank >= 2) get weight decay.
    pub fn new(vars: &[(String, Var)], params: AdamWParams) -> Result<Self> {
        let slots = vars
            .iter()
            .map(|(name, var)| {
                Ok(Slot {
                    name: name.clone(),
                    var: var.clone(),
                    m: var.zeros_like()?,
                    v: var.zeros_like()?,
                    decay: var.rank() >= 2,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            slots,
            step_t: 0,
            params,
        })
    }

    /// Set the learning rate for the next step.
    pub fn set_lr(&mut self, lr: f64) {
        self.params.lr = lr;
    }
    /// Steps taken so far.
    pub fn step_count(&self) -> usize {
        self.step_t
    }

    /// One update from the gradients in `grads` (variables without a gradient are left alone).
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.step_t += 1;
        let p = self.params;
        let scale_m = 1.0 / (1.0 - p.beta1.powi(self.step_t as i32));
        let scale_v = 1.0 / (1.0 - p.beta2.powi(self.step_t as i32));
        for s in &mut self.slots {
            let Some(g) = grads.get(s.var.as_tensor()) else {
                continue;
            };
            let m = ((&s.m * p.beta1)? + (g * (1.0 - p.beta1))?)?;
            let v = ((&s.v * p.beta2)? + (g.sqr()? * (1.0 - p.beta2))?)?;
            let upd = ((&m * scale_m)? / ((&v * scale_v)?.sqrt()? + p.eps)?)?;
            let theta = s.var.as_tensor().detach();
            let theta = if s.decay {
                (theta * (1.0 - p.lr * p.weight_decay))?
            } else {
                theta
            };
            let next = (theta - (upd * p.lr)?)?;
            s.var.set(&next)?;
            s.m = m;
            s.v = v;
        }
        Ok(())
    }

    /// Moments by name (`m.<var>` and `v.<var>`) for checkpointing.
    pub fn state_tensors(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for s in &self.slots {
            out.insert(format!("m.{}", s.name), s.m.clone());
            out.insert(format!("v.{}", s.name), s.v.clone());
        }
        out
    }

    /// Restore moments written by [`Self::state_tensors`] and the step count.
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>, step_t: usize) -> Result<()> {
        for s in &mut self.slots {
            for (key, dst) in [("m", &mut s.m), ("v", &mut s.v)] {
                let name = format!("{key}.{}", s.name);
                let t = tensors.get(&name).ok_or_else(|| {
                    LmError::Config(format!("checkpoint lacks optimizer tensor {name}"))
                })?;
                if t.dims() != s.var.dims() {
                    return Err(LmError::Config(format!(
                        "optimizer tensor {name} has shape {:?}, expected {:?}",
                        t.dims(),
                        s.var.dims()
                    )));
                }
                *dst = t.clone();
            }
        }
        self.step_t = step_t;
        Ok(())
    }
}

/// Global L2 norm of all gradients in `grads` for `vars`.
pub fn grad_global_norm(vars: &[(String, Var)], grads: &GradStore) -> Result<f64> {
    let mut sq = 0f64;
    for (_, v) in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            sq += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
    }
    Ok(sq.sqrt())
}

/// Scale every gradient so the global norm is at most `max_norm`; returns the norm before clipping.
pub fn clip_grad_norm(vars: &[(String, Var)], grads: &mut GradStore, max_norm: f64) -> Result<f64> {
    let norm = grad_global_norm(vars, grads)?;
    if max_norm > 0.0 && norm.is_finite() && norm > max_norm {
        let k = max_norm / (norm + 1e-6);
        for (_, v) in vars {
            if let Some(g) = grads.remove(v.as_tensor()) {
                grads.insert(v.as_tensor(), (g * k)?);
            }
        }
    }
    Ok(norm)
}
