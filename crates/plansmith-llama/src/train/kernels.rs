//! f32 kernels of the LoRA training step: matrix products through the `gemm` crate (the same
//! crate candle's CPU matmul uses; it picks AVX-512 / AVX2 / NEON micro-kernels at run time),
//! RMSNorm, interleaved RoPE and the SiLU gate, each with its backward.

// Kernels index several slices with one loop variable on purpose (readable and vectorisable).
#![allow(clippy::needless_range_loop)]

use rayon::prelude::*;

/// How a product may use threads: `Threads` for the large projections of a whole pack, `One`
/// inside loops that are already parallel (attention heads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Par {
    One,
    Threads,
}

/// `C (m x n, row stride ldc) = [C +] op(A) op(B)`, `op(A)` m x k and `op(B)` k x n. `A` is
/// stored row-major as m x k (k x m when `ta`) with row stride `lda`; likewise `B`.
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
    (m, n, k): (usize, usize, usize),
    acc: bool,
    par: Par,
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
    let threads = rayon::current_num_threads();
    let parallelism = match par {
        Par::Threads if threads > 1 && m * n * k >= 1 << 18 => gemm::Parallelism::Rayon(threads),
        _ => gemm::Parallelism::None,
    };
    // SAFETY: the asserts above keep every address the product touches inside the slices; `c`
    // is exclusively borrowed and cannot alias `a` or `b`.
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
            parallelism,
        );
    }
}

/// `y = x W^T` for `rows` rows, `w` stored `(out, inp)` as every checkpoint stores it.
pub(crate) fn linear(y: &mut [f32], x: &[f32], w: &[f32], rows: usize, inp: usize, out: usize) {
    mm(
        y,
        out,
        x,
        inp,
        false,
        w,
        inp,
        true,
        (rows, out, inp),
        false,
        Par::Threads,
    );
}

/// `dx [+]= dy W` (the input gradient of [`linear`]).
pub(crate) fn linear_back(
    dx: &mut [f32],
    dy: &[f32],
    w: &[f32],
    rows: usize,
    inp: usize,
    out: usize,
    acc: bool,
) {
    mm(
        dx,
        inp,
        dy,
        out,
        false,
        w,
        inp,
        false,
        (rows, inp, out),
        acc,
        Par::Threads,
    );
}

/// RMSNorm over rows of width `d`: `out = x * r * w` with `r = 1/sqrt(mean(x^2) + eps)`; `r`
/// per row goes to `rs` for the backward.
pub(crate) fn rms_fwd(x: &[f32], w: &[f32], out: &mut [f32], rs: &mut [f32], d: usize, eps: f32) {
    for (xr, r) in x.chunks_exact(d).zip(rs.iter_mut()) {
        let ss: f32 = xr.iter().map(|v| v * v).sum();
        *r = 1.0 / (ss / d as f32 + eps).sqrt();
    }
    rms_apply(x, w, rs, out, d);
}

/// `out = x * r * w` per row with the factors `rs` a forward already found: the normed input
/// rebuilt in the backward instead of kept.
pub(crate) fn rms_apply(x: &[f32], w: &[f32], rs: &[f32], out: &mut [f32], d: usize) {
    for ((xr, or), &rr) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)).zip(rs) {
        for ((o, &v), &g) in or.iter_mut().zip(xr).zip(w) {
            *o = v * rr * g;
        }
    }
}

/// Sum with eight independent lanes, so the loop vectorizes (a single f32 accumulator may
/// not be reordered by the compiler).
#[inline]
pub(crate) fn sum8(xs: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

/// Dot product with eight independent lanes (see [`sum8`]).
#[inline]
pub(crate) fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + ra.iter().zip(rb).map(|(x, y)| x * y).sum::<f32>()
}

/// Largest value, eight lanes at a time (scores are finite: NaN order does not matter).
#[inline]
pub(crate) fn max8(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for i in 0..8 {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    chunks
        .remainder()
        .iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

/// `xs[j] = e^(xs[j] - max)` in place, returning their sum: the softmax numerators, with the
/// runtime's vectorizable `exp` (libm's `expf` is a call per element).
#[inline]
pub(crate) fn exp_shifted(xs: &mut [f32], max: f32) -> f32 {
    for v in xs.iter_mut() {
        *v = crate::attention::exp_nonpos(*v - max);
    }
    sum8(xs)
}

/// RMSNorm backward: `dx [+]= r * (w dy) - x r^3 mean((w dy) x)`.
pub(crate) fn rms_bwd(x: &[f32], w: &[f32], rs: &[f32], dy: &[f32], dx: &mut [f32], d: usize) {
    for (((xr, dyr), dxr), &r) in x
        .chunks_exact(d)
        .zip(dy.chunks_exact(d))
        .zip(dx.chunks_exact_mut(d))
        .zip(rs)
    {
        let mut dot = 0f32;
        for i in 0..d {
            dot += w[i] * dyr[i] * xr[i];
        }
        let c = r * r * r * dot / d as f32;
        for i in 0..d {
            dxr[i] += r * w[i] * dyr[i] - xr[i] * c;
        }
    }
}

/// Interleaved RoPE in place on one head vector of width `2 * cos.len()` at one position:
/// pairs `(x[2i], x[2i+1])` rotate by the angle whose cosine / sine are `cos[i]` / `sin[i]`.
#[inline]
pub(crate) fn rope(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    for i in 0..cos.len() {
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        x[2 * i] = a * cos[i] - b * sin[i];
        x[2 * i + 1] = a * sin[i] + b * cos[i];
    }
}

/// The backward of [`rope`]: the inverse rotation.
#[inline]
pub(crate) fn rope_back(d: &mut [f32], cos: &[f32], sin: &[f32]) {
    for i in 0..cos.len() {
        let (a, b) = (d[2 * i], d[2 * i + 1]);
        d[2 * i] = a * cos[i] + b * sin[i];
        d[2 * i + 1] = -a * sin[i] + b * cos[i];
    }
}

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Elements per parallel chunk of the element-wise kernels.
const CHUNK: usize = 1 << 14;

/// The MLP's gate activation: SiLU (SwiGLU: Llama, Qwen) or GELU with the tanh approximation
/// (GeGLU: Gemma's `gelu_pytorch_tanh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    Silu,
    Gelu,
}

/// `sqrt(2 / pi)`, of GELU's tanh approximation.
const GELU_C: f32 = 0.797_884_6;

impl Gate {
    /// The activation and its derivative at `x`.
    #[inline(always)]
    fn value_and_slope(self, x: f32) -> (f32, f32) {
        match self {
            Gate::Silu => {
                let s = sigmoid(x);
                (x * s, s * (1.0 + x * (1.0 - s)))
            }
            Gate::Gelu => {
                let t = (GELU_C * (x + 0.044_715 * x * x * x)).tanh();
                let slope = 0.5 * (1.0 + t)
                    + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044_715 * x * x);
                (0.5 * x * (1.0 + t), slope)
            }
        }
    }
}

/// `a = act(g) * u`, in parallel chunks.
pub(crate) fn glu_fwd(gate: Gate, g: &[f32], u: &[f32], a: &mut [f32]) {
    a.par_chunks_mut(CHUNK).enumerate().for_each(|(c, a)| {
        let at = c * CHUNK;
        for ((o, &gv), &uv) in a.iter_mut().zip(&g[at..]).zip(&u[at..]) {
            *o = gate.value_and_slope(gv).0 * uv;
        }
    });
}

/// From `da` and the saved `g`, `u`: `dg = da u act'(g)` and `du = da act(g)`, in parallel
/// chunks.
pub(crate) fn glu_bwd(
    gate: Gate,
    g: &[f32],
    u: &[f32],
    da: &[f32],
    dg: &mut [f32],
    du: &mut [f32],
) {
    dg.par_chunks_mut(CHUNK)
        .zip(du.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (dg, du))| {
            let at = c * CHUNK;
            for i in 0..dg.len() {
                let (gv, uv, d) = (g[at + i], u[at + i], da[at + i]);
                let (y, slope) = gate.value_and_slope(gv);
                du[i] = d * y;
                dg[i] = d * uv * slope;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_a_naive_loop_in_every_transpose() {
        let (m, n, k) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.91).cos()).collect();
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (aa, lda) = if ta { (&at, m) } else { (&a, k) };
            let (bb, ldb) = if tb { (&bt, k) } else { (&b, n) };
            let mut c = vec![0f32; m * n];
            mm(
                &mut c,
                n,
                aa,
                lda,
                ta,
                bb,
                ldb,
                tb,
                (m, n, k),
                false,
                Par::One,
            );
            for (x, y) in c.iter().zip(&want) {
                assert!((x - y).abs() < 1e-5, "{ta} {tb}");
            }
        }
    }

    #[test]
    fn rope_back_inverts_rope() {
        let mut x = vec![0.3f32, -1.2, 0.5, 2.0];
        let (c, s) = ([0.6f32, 0.8], [0.8f32, -0.6]);
        let orig = x.clone();
        rope(&mut x, &c, &s);
        rope_back(&mut x, &c, &s);
        for (a, b) in x.iter().zip(&orig) {
            assert!((a - b).abs() < 1e-6);
        }
    }
}
