//! AdamW over the flat LoRA parameter vector, the warm-up + cosine schedule and the global
//! gradient norm (Hugging Face's defaults: betas 0.9 / 0.999, eps 1e-8, decoupled weight decay,
//! cosine to zero).

/// First and second moments, f32.
#[derive(Debug, Clone, PartialEq)]
pub struct AdamW {
    pub m: Vec<f32>,
    pub v: Vec<f32>,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

impl AdamW {
    pub fn new(n: usize) -> Self {
        Self {
            m: vec![0.0; n],
            v: vec![0.0; n],
        }
    }

    /// One update at step `t >= 1` with the gradient scaled by `clip`.
    pub fn update(
        &mut self,
        params: &mut [f32],
        grad: &[f32],
        clip: f32,
        lr: f64,
        weight_decay: f64,
        t: u64,
    ) {
        let bc1 = 1.0 - BETA1.powi(t as i32);
        let bc2 = 1.0 - BETA2.powi(t as i32);
        let step = (lr / bc1) as f32;
        let inv_bc2 = (1.0 / bc2) as f32;
        let decay = (1.0 - lr * weight_decay) as f32;
        let (b1, b2) = (BETA1 as f32, BETA2 as f32);
        for i in 0..params.len() {
            let g = grad[i] * clip;
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g;
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g * g;
            params[i] =
                params[i] * decay - step * self.m[i] / ((self.v[i] * inv_bc2).sqrt() + EPS as f32);
        }
    }
}

/// Learning rate at step `t` (1-based): linear warm-up reaching `peak` at step `warmup`, then
/// cosine decay from `peak` at step `warmup + 1` towards 0 at step `total + 1` (so no step that
/// runs has a zero rate).
pub fn warmup_cosine(peak: f64, t: u64, warmup: usize, total: usize) -> f64 {
    let t = t as f64;
    if warmup > 0 && t <= warmup as f64 {
        return peak * t / warmup as f64;
    }
    let span = (total.saturating_sub(warmup)).max(1) as f64;
    let progress = ((t - warmup as f64 - 1.0) / span).clamp(0.0, 1.0);
    peak * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// L2 norm, accumulated in f64.
pub fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| (x as f64) * (x as f64))
        .sum::<f64>()
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_zero() {
        assert_eq!(warmup_cosine(1.0, 1, 4, 10), 0.25);
        assert_eq!(warmup_cosine(1.0, 4, 4, 10), 1.0);
        assert_eq!(warmup_cosine(1.0, 5, 4, 10), 1.0);
        assert!((warmup_cosine(1.0, 7, 4, 10) - 0.75).abs() < 1e-12);
        let last = warmup_cosine(1.0, 10, 4, 10);
        assert!(last > 0.0 && last < 0.1);
        assert_eq!(warmup_cosine(2.0, 1, 0, 1), 2.0);
    }

    #[test]
    fn first_adam_step_moves_each_parameter_by_lr_against_its_gradient() {
        let mut p = vec![1.0f32, -1.0, 0.5];
        let g = [0.3f32, -2.0, 0.0];
        let mut o = AdamW::new(3);
        o.update(&mut p, &g, 1.0, 0.1, 0.0, 1);
        assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6 && p[2] == 0.5);
    }
}
