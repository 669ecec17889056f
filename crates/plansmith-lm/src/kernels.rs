//! The f32 kernels the hand-written training step ([`crate::fast`]) and inference forward
//! ([`crate::infer`]) share: matrix products through the `gemm` crate, LayerNorm, GELU, RoPE,
//! softmax, and branch-free `exp`/`erf` approximations the compiler can vectorise.

// Kernels index several slices with one loop variable on purpose (it keeps them readable and
// vectorisable).
#![allow(clippy::needless_range_loop)]

use crate::tiny_gpt::{PosEncoding, TinyGptConfig};

/// RoPE `(cos, sin)` tables, `block x head_dim/2` each, computed in f64 and stored as f32; empty
/// for learned positions. The candle model, the training step and inference all use this one.
pub(crate) fn rope_tables(cfg: &TinyGptConfig) -> (Vec<f32>, Vec<f32>) {
    let (mut cos, mut sin) = (Vec::new(), Vec::new());
    if cfg.pos == PosEncoding::Rope {
        let hd = cfg.d_model / cfg.n_head;
        for p in 0..cfg.block {
            for i in 0..hd / 2 {
                let inv = 1.0 / (cfg.rope_theta as f64).powf(2.0 * i as f64 / hd as f64);
                let a = p as f64 * inv;
                cos.push(a.cos() as f32);
                sin.push(a.sin() as f32);
            }
        }
    }
    (cos, sin)
}

/// `exp` for `x <= 88`, relative error ~2e-7, branch-free so loops over it vectorise.
#[inline(always)]
pub(crate) fn exp_fast(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let k = (x * LOG2E + 0.5).floor();
    let r = x - k * LN2_HI - k * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    // 2^k from the integer-valued float k in [-126, 127] without a float->int conversion (Rust's
    // saturating `as` does not vectorise): adding 1.5 * 2^23 leaves k in the low mantissa bits
    let ki = (k + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    e * f32::from_bits(ki.wrapping_add(127) << 23)
}

/// `erf`, absolute error below 2e-7 (Abramowitz & Stegun 7.1.26 with [`exp_fast`]).
#[inline(always)]
pub(crate) fn erf_fast(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    let y = 1.0 - poly * exp_fast(-a * a);
    y.copysign(x)
}

pub(crate) const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// 1 / sqrt(2 pi)
pub(crate) const INV_SQRT_2PI: f32 = 0.398_942_3;

/// `out = gelu(x)` (erf form, as candle's `gelu_erf` and PyTorch's default `GELU`).
#[inline(never)]
pub(crate) fn gelu_fwd(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = 0.5 * v * (1.0 + erf_fast(v * FRAC_1_SQRT_2));
    }
}

/// `d *= gelu'(x)` in place.
#[inline(never)]
pub(crate) fn gelu_bwd(x: &[f32], d: &mut [f32]) {
    for (g, &v) in d.iter_mut().zip(x) {
        let cdf = 0.5 * (1.0 + erf_fast(v * FRAC_1_SQRT_2));
        let pdf = exp_fast(-0.5 * v * v) * INV_SQRT_2PI;
        *g *= cdf + v * pdf;
    }
}

/// `C (m x n, row stride ldc) = [C +] op(A) op(B)`, with `op(A)` m x k and `op(B)` k x n. `A` is
/// stored row-major as m x k (or k x m when `ta`), with row stride `lda`; likewise `B`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn mm(
    c: &mut [f32],
    ldc: usize,
    a: &[f32],
    lda: usize,
    ta: bool,
    b: &[f32],
    ldb: usize,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    acc: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            for i in 0..m {
                c[i * ldc..i * ldc + n].fill(0.0);
            }
        }
        return;
    }
    let a_need = if ta {
        (k - 1) * lda + m
    } else {
        (m - 1) * lda + k
    };
    let b_need = if tb {
        (n - 1) * ldb + k
    } else {
        (k - 1) * ldb + n
    };
    assert!(a.len() >= a_need, "mm: lhs too short");
    assert!(b.len() >= b_need, "mm: rhs too short");
    assert!(c.len() >= (m - 1) * ldc + n, "mm: dst too short");
    let (a_rs, a_cs) = if ta { (1, lda) } else { (lda, 1) };
    let (b_rs, b_cs) = if tb { (1, ldb) } else { (ldb, 1) };
    // SAFETY: the asserts above keep every address the product touches inside the slices;
    // `c` is exclusively borrowed and cannot alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            acc,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// `y = x W^T + b` for `rows` rows; `w` is `(out, inp)`.
pub(crate) fn linear_fwd(
    y: &mut [f32],
    x: &[f32],
    w: &[f32],
    b: &[f32],
    rows: usize,
    inp: usize,
    out: usize,
) {
    mm(y, out, x, inp, false, w, inp, true, rows, out, inp, false);
    for r in y[..rows * out].chunks_exact_mut(out) {
        for (v, &bb) in r.iter_mut().zip(b) {
            *v += bb;
        }
    }
}

/// `db += colsum(dy)`.
pub(crate) fn bias_grad(db: &mut [f32], dy: &[f32], cols: usize) {
    for r in dy.chunks_exact(cols) {
        for (g, &v) in db.iter_mut().zip(r) {
            *g += v;
        }
    }
}

/// LayerNorm forward over rows of width `d`; `stats` gets (mean, 1/std) per row.
pub(crate) fn ln_fwd(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    out: &mut [f32],
    stats: &mut [f32],
    d: usize,
    eps: f32,
) {
    for ((xr, or), st) in x
        .chunks_exact(d)
        .zip(out.chunks_exact_mut(d))
        .zip(stats.chunks_exact_mut(2))
    {
        let mean = sum8(xr) / d as f32;
        let mut acc = [0f32; 8];
        let (xc, xt) = xr.split_at(d / 8 * 8);
        for ch in xc.chunks_exact(8) {
            for i in 0..8 {
                acc[i] += (ch[i] - mean) * (ch[i] - mean);
            }
        }
        let var = (acc.iter().sum::<f32>()
            + xt.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>())
            / d as f32;
        let rstd = 1.0 / (var + eps).sqrt();
        for i in 0..d {
            or[i] = (xr[i] - mean) * rstd * w[i] + b[i];
        }
        st[0] = mean;
        st[1] = rstd;
    }
}

/// LayerNorm backward: `dx += dL/dx`, `dw += ..`, `db += ..` for upstream `dy`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ln_bwd(
    dy: &[f32],
    x: &[f32],
    stats: &[f32],
    w: &[f32],
    dx: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    d: usize,
) {
    let mut xhat = vec![0f32; d];
    let mut dxhat = vec![0f32; d];
    for (((dyr, xr), st), dxr) in dy
        .chunks_exact(d)
        .zip(x.chunks_exact(d))
        .zip(stats.chunks_exact(2))
        .zip(dx.chunks_exact_mut(d))
    {
        let (mean, rstd) = (st[0], st[1]);
        for i in 0..d {
            xhat[i] = (xr[i] - mean) * rstd;
            dxhat[i] = dyr[i] * w[i];
            dw[i] += dyr[i] * xhat[i];
            db[i] += dyr[i];
        }
        let (m1, m2) = (sum8(&dxhat) / d as f32, dot(&dxhat, &xhat) / d as f32);
        for i in 0..d {
            dxr[i] += rstd * (dxhat[i] - m1 - xhat[i] * m2);
        }
    }
}

/// RoPE on one head vector in place (`rotate_half` convention of candle's `rope_slow`).
#[inline]
pub(crate) fn rope_apply(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = cos.len();
    for i in 0..half {
        let (a, b) = (x[i], x[i + half]);
        x[i] = a * cos[i] - b * sin[i];
        x[i + half] = b * cos[i] + a * sin[i];
    }
}

/// Transpose of [`rope_apply`] (the backward pass).
#[inline]
pub(crate) fn rope_apply_t(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = cos.len();
    for i in 0..half {
        let (a, b) = (x[i], x[i + half]);
        x[i] = a * cos[i] + b * sin[i];
        x[i + half] = b * cos[i] - a * sin[i];
    }
}

#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    // eight partial sums so the compiler can keep them in one vector register
    let mut acc = [0f32; 8];
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    let (bc, br) = b[..a.len()].split_at(ac.len());
    for (x, y) in ac.chunks_exact(8).zip(bc.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

/// Sum with eight partial sums (vectorisable; the order differs from a sequential sum).
#[inline]
pub(crate) fn sum8(a: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    for x in ac.chunks_exact(8) {
        for i in 0..8 {
            acc[i] += x[i];
        }
    }
    acc.iter().sum::<f32>() + ar.iter().sum::<f32>()
}

/// Maximum with eight partial maxima.
#[inline]
pub(crate) fn max8(a: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    for x in ac.chunks_exact(8) {
        for i in 0..8 {
            acc[i] = if x[i] > acc[i] { x[i] } else { acc[i] };
        }
    }
    let m = acc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    ar.iter().copied().fold(m, f32::max)
}

#[inline]
pub(crate) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o += a * v;
    }
}

/// Scaled causal softmax of one score row in place: entries `..n` are scores, the rest become 0.
#[inline(never)]
pub(crate) fn softmax_causal(row: &mut [f32], n: usize, scale: f32) {
    let (live, dead) = row.split_at_mut(n);
    let mx = max8(live) * scale;
    // separate passes: the map vectorises, the sum uses lane-wise partial sums
    for v in live.iter_mut() {
        *v = exp_fast(*v * scale - mx);
    }
    let inv = 1.0 / sum8(live);
    for v in live.iter_mut() {
        *v *= inv;
    }
    dead.fill(0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_approximations_are_accurate() {
        let mut worst_exp = 0f64;
        let mut worst_erf = 0f64;
        for i in 0..=20_000 {
            let x = -80.0 + i as f32 * 0.0085; // -80 .. 90 (clamped above 88)
            let x = x.min(88.0);
            let rel = ((exp_fast(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
            worst_exp = worst_exp.max(rel);
            let y = -6.0 + i as f32 * 0.0006;
            let e = (erf_fast(y) as f64 - libm_erf(y as f64)).abs();
            worst_erf = worst_erf.max(e);
        }
        assert!(worst_exp < 1e-6, "exp relative error {worst_exp:e}");
        assert!(worst_erf < 1e-6, "erf absolute error {worst_erf:e}");
        assert_eq!(exp_fast(0.0), 1.0);
        assert!(exp_fast(-1e30) >= 0.0 && exp_fast(-1e30) < 1e-37);
    }

    /// erf in f64 by its Taylor series / continued fraction (reference for the test only).
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 3.0 {
            // Taylor series converges quickly here
            let mut sum = 0f64;
            let mut term = x;
            let mut n = 0f64;
            while term.abs() > 1e-17 {
                sum += term / (2.0 * n + 1.0);
                n += 1.0;
                term *= -x * x / n;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // |erf| within 2e-5 of 1 and erfc(3) = 2.2e-5: asymptotic expansion
            let t = x.abs();
            let erfc = (-t * t).exp() / (t * std::f64::consts::PI.sqrt())
                * (1.0 - 1.0 / (2.0 * t * t) + 3.0 / (4.0 * t.powi(4)));
            (1.0 - erfc).copysign(x)
        }
    }
}
