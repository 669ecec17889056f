//! Loss and LoRA gradients of one [`Pack`]: a forward over all blocks that keeps only each
//! block's input (the per-layer checkpoint), the loss on the target rows, and a backward that
//! recomputes one block's activations at a time from its checkpoint — or, when the activations
//! of every block fit the memory budget, keeps them from the forward and skips the recompute.

use rayon::prelude::*;

use super::attention::{self, Heads};
use super::kernels::{
    exp_shifted, glu_bwd, glu_fwd, max8, mm, rms_apply, rms_bwd, rms_fwd, rope, rope_back, Gate,
    Par,
};
use super::pack::Pack;
use super::weights::{FrozenBase, LoraParams, Slot};
use crate::lora::LoraTarget;

/// Rows of the output head computed at once (bounds the `rows x vocab` logits buffer).
const HEAD_ROWS: usize = 256;

/// LoRA dropout: a keep mask drawn from a hash of (step seed, layer, target, element), so the
/// backward (and a resumed run) regenerates it instead of storing it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dropout {
    pub p: f32,
    pub seed: u64,
}

impl Dropout {
    /// The 32-bit key of one (layer, target) mask, mixed from the step's seed (splitmix64).
    fn key(&self, layer: usize, target: LoraTarget) -> u32 {
        let mut z = self.seed ^ ((layer as u64) << 56) ^ ((target as u64) << 48);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as u32
    }

    /// Whether element `i` of the mask with `key` is kept: a 32-bit integer hash (lowbias32)
    /// of the index, so the mask loop vectorizes and the backward regenerates the mask for
    /// about what storing it would cost in memory traffic.
    #[inline(always)]
    fn keep(key: u32, threshold: u32, i: u32) -> bool {
        let mut h = i.wrapping_mul(0x9E37_79B9) ^ key;
        h ^= h >> 16;
        h = h.wrapping_mul(0x7FEB_352D);
        h ^= h >> 15;
        h = h.wrapping_mul(0x846C_A68B);
        h ^= h >> 16;
        (h >> 8) >= threshold
    }
}

/// `out = x * keep / (1 - p)` for the mask of (layer, target), in parallel chunks.
fn dropped(d: &Dropout, layer: usize, t: LoraTarget, x: &[f32], out: &mut [f32]) {
    const CHUNK: usize = 1 << 14;
    let scale = 1.0 / (1.0 - d.p);
    let key = d.key(layer, t);
    let threshold = (d.p * (1u32 << 24) as f32) as u32;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| {
        let at = (c * CHUNK) as u32;
        for (i, (o, &v)) in o.iter_mut().zip(&x[at as usize..]).enumerate() {
            let kept = Dropout::keep(key, threshold, at.wrapping_add(i as u32));
            *o = if kept { v * scale } else { 0.0 };
        }
    });
}

/// Buffers one block uses while it runs and no block needs afterwards (shared by all blocks):
/// an adapter's dropped input, the SwiGLU product (recomputed in the backward), q / k before
/// RoPE when the model has no q/k norm.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The normed block input (of attention, then of the MLP): cheap to rebuild from `x`, `r1`
    /// / `x_mid`, `r2`, so the backward does rather than keep `2 d` floats per row.
    h: Vec<f32>,
    xd: Vec<f32>,
    a: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
}

/// One block's activations.
#[derive(Default)]
pub(crate) struct Saved {
    r1: Vec<f32>,
    /// q / k / v before the q/k norm (row-major) and the norms' per-head factors.
    q: Vec<f32>,
    k: Vec<f32>,
    qr: Vec<f32>,
    kr: Vec<f32>,
    /// After norm and RoPE, head-major.
    qh: Vec<f32>,
    kh: Vec<f32>,
    vh: Vec<f32>,
    /// Attention output, row-major (the o projection's input).
    y: Vec<f32>,
    x_mid: Vec<f32>,
    r2: Vec<f32>,
    g: Vec<f32>,
    u: Vec<f32>,
    /// Gemma 3: the attention's and the MLP's outputs before their post norms, and the norms'
    /// per-row factors.
    o: Vec<f32>,
    ro: Vec<f32>,
    f: Vec<f32>,
    rf: Vec<f32>,
    /// Per target: `scale * x_d A^T` (`[n, r]`).
    t: [Vec<f32>; 7],
}

impl Saved {
    pub fn bytes(&self) -> usize {
        let v = [
            &self.r1,
            &self.q,
            &self.k,
            &self.qr,
            &self.kr,
            &self.qh,
            &self.kh,
            &self.vh,
            &self.y,
            &self.x_mid,
            &self.r2,
            &self.g,
            &self.u,
            &self.o,
            &self.ro,
            &self.f,
            &self.rf,
        ];
        4 * (v.iter().map(|x| x.capacity()).sum::<usize>()
            + self.t.iter().map(Vec::capacity).sum::<usize>())
    }
}

/// Backward scratch, reused across blocks and steps.
#[derive(Default)]
pub(crate) struct Grads {
    dh: Vec<f32>,
    /// A normed block input rebuilt for the projections' LoRA gradients.
    h: Vec<f32>,
    dy: Vec<f32>,
    dyh: Vec<f32>,
    da: Vec<f32>,
    dg: Vec<f32>,
    du: Vec<f32>,
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    dqh: Vec<f32>,
    dkh: Vec<f32>,
    dvh: Vec<f32>,
    attn: Vec<f32>,
    lora_g: Vec<f32>,
    tmp: Vec<f32>,
    xd: Vec<f32>,
    a: Vec<f32>,
    /// The gradient at a post-normed branch's output, before its norm (Gemma 3).
    dpost: Vec<f32>,
}

impl Grads {
    pub fn bytes(&self) -> usize {
        let v = [
            &self.dh,
            &self.h,
            &self.dy,
            &self.dyh,
            &self.da,
            &self.dg,
            &self.du,
            &self.dq,
            &self.dk,
            &self.dv,
            &self.dqh,
            &self.dkh,
            &self.dvh,
            &self.attn,
            &self.lora_g,
            &self.tmp,
            &self.dpost,
        ];
        4 * v.iter().map(|x| x.capacity()).sum::<usize>()
    }
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    v.resize(n, 0.0);
    &mut v[..n]
}

/// Everything a block's forward and backward read.
pub(crate) struct Ctx<'a> {
    pub base: &'a FrozenBase,
    pub lora: &'a LoraParams,
    pub params: &'a [f32],
    pub pack: &'a Pack,
    pub dropout: Option<Dropout>,
}

impl Ctx<'_> {
    /// Layer `li`'s attention geometry (its window, on a sliding-window layer).
    fn heads(&self, li: usize) -> Heads {
        let c = &self.base.cfg;
        Heads {
            n: self.pack.rows(),
            nh: c.num_heads,
            nkv: c.num_kv_heads,
            hd: c.head_dim,
            scale: 1.0 / (c.head_dim as f32).sqrt(),
            bf16: self.base.precision == super::BasePrecision::Bf16,
            window: c.layer_window(li),
        }
    }

    /// `y = x W^T (+ b) + scale (x_d A^T) B^T`, saving what the backward needs.
    #[allow(clippy::too_many_arguments)]
    fn proj(
        &self,
        li: usize,
        t: LoraTarget,
        x: &[f32],
        y: &mut [f32],
        bias: Option<&[f32]>,
        tsave: &mut Vec<f32>,
        xdsave: &mut Vec<f32>,
    ) {
        let n = self.pack.rows();
        let (out, inp) = t.shape(&self.base.cfg);
        self.base.layers[li].w[t as usize].linear(y, x, n, inp, out);
        if let Some(b) = bias {
            for row in y.chunks_exact_mut(out) {
                for (v, bb) in row.iter_mut().zip(b) {
                    *v += bb;
                }
            }
        }
        let Some(s) = self.lora.slot(li, t) else {
            return;
        };
        let r = self.lora.r;
        let xd: &[f32] = match &self.dropout {
            Some(d) => {
                let buf = sized(xdsave, n * inp);
                dropped(d, li, t, x, buf);
                buf
            }
            None => x,
        };
        let ts = sized(tsave, n * r);
        mm(
            ts,
            r,
            xd,
            inp,
            false,
            self.lora.a(&s, self.params),
            inp,
            true,
            (n, r, inp),
            false,
            Par::Threads,
        );
        for v in ts.iter_mut() {
            *v *= self.lora.scale;
        }
        mm(
            y,
            out,
            ts,
            r,
            false,
            self.lora.b(&s, self.params),
            r,
            true,
            (n, out, r),
            true,
            Par::Threads,
        );
    }

    /// Backward of [`Self::proj`]: `dx [+]= dy W + (scale dy B A) * mask`, LoRA grads into `grad`.
    #[allow(clippy::too_many_arguments)]
    fn proj_back(
        &self,
        li: usize,
        t: LoraTarget,
        x: &[f32],
        dy: &[f32],
        dx: &mut [f32],
        acc: bool,
        saved: &Saved,
        gs: &mut Grads,
        grad: &mut [f32],
    ) {
        let n = self.pack.rows();
        let (out, inp) = t.shape(&self.base.cfg);
        self.base.layers[li].w[t as usize].linear_back(dx, dy, n, inp, out, acc);
        let Some(s) = self.lora.slot(li, t) else {
            return;
        };
        lora_back(self, &s, x, dy, dx, saved, gs, grad);
    }
}

#[allow(clippy::too_many_arguments)]
fn lora_back(
    cx: &Ctx,
    s: &Slot,
    x: &[f32],
    dy: &[f32],
    dx: &mut [f32],
    saved: &Saved,
    gs: &mut Grads,
    grad: &mut [f32],
) {
    let (n, r, (out, inp)) = (cx.pack.rows(), cx.lora.r, (s.out, s.inp));
    let t = s.target as usize;
    let mut xd_buf = std::mem::take(&mut gs.xd);
    let xd: &[f32] = match &cx.dropout {
        Some(d) => {
            let buf = sized(&mut xd_buf, n * inp);
            dropped(d, s.layer, s.target, x, buf);
            buf
        }
        None => x,
    };
    // dB += dy^T (scale x_d A^T)
    mm(
        &mut grad[s.b..s.b + out * r],
        r,
        dy,
        out,
        true,
        &saved.t[t],
        r,
        false,
        (out, r, n),
        true,
        Par::Threads,
    );
    // G = scale dy B
    let gbuf = sized(&mut gs.lora_g, n * r);
    mm(
        gbuf,
        r,
        dy,
        out,
        false,
        cx.lora.b(s, cx.params),
        r,
        false,
        (n, r, out),
        false,
        Par::Threads,
    );
    for v in gbuf.iter_mut() {
        *v *= cx.lora.scale;
    }
    // dA += G^T x_d
    mm(
        &mut grad[s.a..s.a + r * inp],
        inp,
        gbuf,
        r,
        true,
        xd,
        inp,
        false,
        (r, inp, n),
        true,
        Par::Threads,
    );
    // dx += (G A) * mask / (1 - p)
    match cx.dropout {
        None => mm(
            dx,
            inp,
            gbuf,
            r,
            false,
            cx.lora.a(s, cx.params),
            inp,
            false,
            (n, inp, r),
            true,
            Par::Threads,
        ),
        Some(d) => {
            let tmp = sized(&mut gs.tmp, n * inp);
            mm(
                tmp,
                inp,
                gbuf,
                r,
                false,
                cx.lora.a(s, cx.params),
                inp,
                false,
                (n, inp, r),
                false,
                Par::Threads,
            );
            let masked = sized(&mut xd_buf, n * inp);
            dropped(&d, s.layer, s.target, tmp, masked);
            for (o, v) in dx.iter_mut().zip(masked.iter()) {
                *o += v;
            }
        }
    }
    gs.xd = xd_buf;
}

/// Per-head RMSNorm (optional), then RoPE at each row's position; row-major `src`
/// `[n][heads*hd]` to head-major `dst` `[heads][n][hd]`.
fn norm_rope(
    cx: &Ctx,
    li: usize,
    src: &[f32],
    heads: usize,
    norm: Option<&[f32]>,
    rs: &mut Vec<f32>,
    dst: &mut [f32],
) {
    let (n, hd) = (cx.pack.rows(), cx.base.cfg.head_dim);
    let half = hd / 2;
    let eps = cx.base.cfg.rms_eps as f32;
    let rs = sized(rs, n * heads);
    let (cos, sin) = cx.base.rope(li);
    for row in 0..n {
        let pos = cx.pack.pos[row];
        let (c, s) = (
            &cos[pos * half..(pos + 1) * half],
            &sin[pos * half..(pos + 1) * half],
        );
        for h in 0..heads {
            let x = &src[row * heads * hd + h * hd..][..hd];
            let o = &mut dst[(h * n + row) * hd..][..hd];
            match norm {
                Some(w) => rms_fwd(x, w, o, &mut rs[row * heads + h..][..1], hd, eps),
                None => o.copy_from_slice(x),
            }
            rope(o, c, s);
        }
    }
}

/// Backward of [`norm_rope`]: head-major `d` (consumed) to row-major `dsrc`.
#[allow(clippy::too_many_arguments)]
fn norm_rope_back(
    cx: &Ctx,
    li: usize,
    src: &[f32],
    heads: usize,
    norm: Option<&[f32]>,
    rs: &[f32],
    d: &mut [f32],
    dsrc: &mut [f32],
) {
    let (n, hd) = (cx.pack.rows(), cx.base.cfg.head_dim);
    let half = hd / 2;
    let (cos, sin) = cx.base.rope(li);
    for row in 0..n {
        let pos = cx.pack.pos[row];
        let (c, s) = (
            &cos[pos * half..(pos + 1) * half],
            &sin[pos * half..(pos + 1) * half],
        );
        for h in 0..heads {
            let g = &mut d[(h * n + row) * hd..][..hd];
            rope_back(g, c, s);
            let out = &mut dsrc[row * heads * hd + h * hd..][..hd];
            match norm {
                Some(w) => {
                    out.fill(0.0);
                    rms_bwd(
                        &src[row * heads * hd + h * hd..][..hd],
                        w,
                        &rs[row * heads + h..][..1],
                        g,
                        out,
                        hd,
                    );
                }
                None => out.copy_from_slice(g),
            }
        }
    }
}

/// Head-major `[heads][n][hd]` to row-major `[n][heads*hd]`, or back.
fn transpose_heads(src: &[f32], dst: &mut [f32], n: usize, heads: usize, hd: usize, to_rows: bool) {
    for h in 0..heads {
        for row in 0..n {
            let (hm, rm) = ((h * n + row) * hd, row * heads * hd + h * hd);
            if to_rows {
                dst[rm..rm + hd].copy_from_slice(&src[hm..hm + hd]);
            } else {
                dst[hm..hm + hd].copy_from_slice(&src[rm..rm + hd]);
            }
        }
    }
}

/// The model's MLP gate: GELU for Gemma 3 (GeGLU), else SiLU (SwiGLU).
fn gate(c: &crate::LlamaConfig) -> Gate {
    if c.gemma.gelu_gate {
        Gate::Gelu
    } else {
        Gate::Silu
    }
}

/// Block `li` forward from `x` into `out`, filling `s`.
pub(crate) fn block_forward(
    cx: &Ctx,
    li: usize,
    x: &[f32],
    out: &mut [f32],
    s: &mut Saved,
    sc: &mut Scratch,
) {
    let c = &cx.base.cfg;
    let l = &cx.base.layers[li];
    let n = cx.pack.rows();
    let (d, ff, hd) = (c.hidden_size, c.intermediate_size, c.head_dim);
    let (qd, kvd) = (c.num_heads * hd, c.num_kv_heads * hd);
    let eps = c.rms_eps as f32;
    rms_fwd(
        x,
        &l.attn_norm,
        sized(&mut sc.h, n * d),
        sized(&mut s.r1, n),
        d,
        eps,
    );
    let [tq, tk, tv, to, tg, tu, tdn] = &mut s.t;
    let xd = &mut sc.xd;
    // q / k before RoPE are kept only when the backward needs them (for the q/k norms)
    let qbuf = if l.q_norm.is_some() {
        &mut s.q
    } else {
        &mut sc.q
    };
    let kbuf = if l.k_norm.is_some() {
        &mut s.k
    } else {
        &mut sc.k
    };
    cx.proj(
        li,
        LoraTarget::Q,
        &sc.h,
        sized(qbuf, n * qd),
        l.bias[0].as_deref(),
        tq,
        xd,
    );
    cx.proj(
        li,
        LoraTarget::K,
        &sc.h,
        sized(kbuf, n * kvd),
        l.bias[1].as_deref(),
        tk,
        xd,
    );
    // v goes straight to head-major through `y` as scratch
    cx.proj(
        li,
        LoraTarget::V,
        &sc.h,
        sized(&mut s.y, n * kvd),
        l.bias[2].as_deref(),
        tv,
        xd,
    );
    norm_rope(
        cx,
        li,
        qbuf,
        c.num_heads,
        l.q_norm.as_deref(),
        &mut s.qr,
        sized(&mut s.qh, n * qd),
    );
    norm_rope(
        cx,
        li,
        kbuf,
        c.num_kv_heads,
        l.k_norm.as_deref(),
        &mut s.kr,
        sized(&mut s.kh, n * kvd),
    );
    transpose_heads(
        &s.y,
        sized(&mut s.vh, n * kvd),
        n,
        c.num_kv_heads,
        hd,
        false,
    );
    // attention output head-major in `g` as scratch, then row-major in `y`
    let yh = sized(&mut s.g, n * qd.max(ff));
    attention::forward(
        cx.pack,
        &cx.heads(li),
        &s.qh,
        &s.kh,
        &s.vh,
        &mut yh[..n * qd],
    );
    transpose_heads(
        &s.g[..n * qd],
        sized(&mut s.y, n * qd),
        n,
        c.num_heads,
        hd,
        true,
    );
    let xm = sized(&mut s.x_mid, n * d);
    match &l.post_attn_norm {
        Some(w) => {
            let o = sized(&mut s.o, n * d);
            cx.proj(li, LoraTarget::O, &s.y, o, None, to, xd);
            rms_fwd(o, w, xm, sized(&mut s.ro, n), d, eps);
        }
        None => cx.proj(li, LoraTarget::O, &s.y, xm, None, to, xd),
    }
    for (m, &v) in xm.iter_mut().zip(x) {
        *m += v;
    }
    rms_fwd(
        &s.x_mid,
        &l.ffn_norm,
        sized(&mut sc.h, n * d),
        sized(&mut s.r2, n),
        d,
        eps,
    );
    cx.proj(
        li,
        LoraTarget::Gate,
        &sc.h,
        sized(&mut s.g, n * ff),
        None,
        tg,
        xd,
    );
    cx.proj(
        li,
        LoraTarget::Up,
        &sc.h,
        sized(&mut s.u, n * ff),
        None,
        tu,
        xd,
    );
    // the gated product is recomputed in the backward rather than kept
    let a = sized(&mut sc.a, n * ff);
    glu_fwd(gate(c), &s.g, &s.u, a);
    match &l.post_ffn_norm {
        Some(w) => {
            let f = sized(&mut s.f, n * d);
            cx.proj(li, LoraTarget::Down, a, f, None, tdn, xd);
            rms_fwd(f, w, out, sized(&mut s.rf, n), d, eps);
        }
        None => cx.proj(li, LoraTarget::Down, a, out, None, tdn, xd),
    }
    for (o, &v) in out.iter_mut().zip(&s.x_mid) {
        *o += v;
    }
}

/// Block `li` backward: `dx` holds the gradient at the block's output and leaves holding the
/// gradient at its input `x`.
pub(crate) fn block_backward(
    cx: &Ctx,
    li: usize,
    x: &[f32],
    dx: &mut [f32],
    s: &Saved,
    gs: &mut Grads,
    grad: &mut [f32],
) {
    let c = &cx.base.cfg;
    let l = &cx.base.layers[li];
    let n = cx.pack.rows();
    let (d, ff, hd) = (c.hidden_size, c.intermediate_size, c.head_dim);
    let (qd, kvd) = (c.num_heads * hd, c.num_kv_heads * hd);
    // MLP: dx is the gradient at x_mid's residual and at the down projection's output.
    let mut da = std::mem::take(&mut gs.da);
    sized(&mut da, n * ff);
    let mut a = std::mem::take(&mut gs.a);
    glu_fwd(gate(c), &s.g, &s.u, sized(&mut a, n * ff));
    let mut dpost = std::mem::take(&mut gs.dpost);
    // through the MLP's post norm (Gemma 3) to the down projection's output
    let dbranch: &[f32] = match &l.post_ffn_norm {
        Some(w) => {
            let df = sized(&mut dpost, n * d);
            df.fill(0.0);
            rms_bwd(&s.f, w, &s.rf, dx, df, d);
            df
        }
        None => dx,
    };
    cx.proj_back(
        li,
        LoraTarget::Down,
        &a,
        dbranch,
        &mut da,
        false,
        s,
        gs,
        grad,
    );
    gs.a = a;
    let (mut dg, mut du) = (std::mem::take(&mut gs.dg), std::mem::take(&mut gs.du));
    glu_bwd(
        gate(c),
        &s.g,
        &s.u,
        &da,
        sized(&mut dg, n * ff),
        sized(&mut du, n * ff),
    );
    let mut dh = std::mem::take(&mut gs.dh);
    sized(&mut dh, n * d);
    let mut h = std::mem::take(&mut gs.h);
    rms_apply(&s.x_mid, &l.ffn_norm, &s.r2, sized(&mut h, n * d), d);
    cx.proj_back(li, LoraTarget::Gate, &h, &dg, &mut dh, false, s, gs, grad);
    cx.proj_back(li, LoraTarget::Up, &h, &du, &mut dh, true, s, gs, grad);
    rms_bwd(&s.x_mid, &l.ffn_norm, &s.r2, &dh, dx, d);
    // attention
    let mut dy = std::mem::take(&mut gs.dy);
    sized(&mut dy, n * qd);
    let dbranch: &[f32] = match &l.post_attn_norm {
        Some(w) => {
            let dout = sized(&mut dpost, n * d);
            dout.fill(0.0);
            rms_bwd(&s.o, w, &s.ro, dx, dout, d);
            dout
        }
        None => dx,
    };
    cx.proj_back(
        li,
        LoraTarget::O,
        &s.y,
        dbranch,
        &mut dy,
        false,
        s,
        gs,
        grad,
    );
    gs.dpost = dpost;
    let mut dyh = std::mem::take(&mut gs.dyh);
    transpose_heads(&dy, sized(&mut dyh, n * qd), n, c.num_heads, hd, false);
    let (mut dqh, mut dkh, mut dvh) = (
        std::mem::take(&mut gs.dqh),
        std::mem::take(&mut gs.dkh),
        std::mem::take(&mut gs.dvh),
    );
    attention::backward(
        cx.pack,
        &cx.heads(li),
        &s.qh,
        &s.kh,
        &s.vh,
        &dyh,
        sized(&mut dqh, n * qd),
        sized(&mut dkh, n * kvd),
        sized(&mut dvh, n * kvd),
        &mut gs.attn,
    );
    let (mut dq, mut dk, mut dv) = (
        std::mem::take(&mut gs.dq),
        std::mem::take(&mut gs.dk),
        std::mem::take(&mut gs.dv),
    );
    norm_rope_back(
        cx,
        li,
        &s.q,
        c.num_heads,
        l.q_norm.as_deref(),
        &s.qr,
        &mut dqh,
        sized(&mut dq, n * qd),
    );
    norm_rope_back(
        cx,
        li,
        &s.k,
        c.num_kv_heads,
        l.k_norm.as_deref(),
        &s.kr,
        &mut dkh,
        sized(&mut dk, n * kvd),
    );
    transpose_heads(&dvh, sized(&mut dv, n * kvd), n, c.num_kv_heads, hd, true);
    rms_apply(x, &l.attn_norm, &s.r1, &mut h, d);
    cx.proj_back(li, LoraTarget::Q, &h, &dq, &mut dh, false, s, gs, grad);
    cx.proj_back(li, LoraTarget::K, &h, &dk, &mut dh, true, s, gs, grad);
    cx.proj_back(li, LoraTarget::V, &h, &dv, &mut dh, true, s, gs, grad);
    rms_bwd(x, &l.attn_norm, &s.r1, &dh, dx, d);
    (gs.da, gs.dg, gs.du, gs.dh, gs.h, gs.dy, gs.dyh) = (da, dg, du, dh, h, dy, dyh);
    (gs.dqh, gs.dkh, gs.dvh, gs.dq, gs.dk, gs.dv) = (dqh, dkh, dvh, dq, dk, dv);
}

/// Final norm, output head and cross-entropy on the target rows of `hidden`; adds
/// `d(loss_sum * inv_total)/d hidden` into `dh` (zeroed by the caller). Returns the loss sum.
pub(crate) fn head_loss(cx: &Ctx, hidden: &[f32], inv_total: f32, dh: &mut [f32]) -> f64 {
    let c = &cx.base.cfg;
    let (d, vocab) = (c.hidden_size, c.vocab_size);
    let eps = c.rms_eps as f32;
    let head = cx.base.head();
    let mut total = 0f64;
    let (mut xs, mut hn, mut rs, mut logits, mut dhn, mut dx) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for chunk in cx.pack.targets.chunks(HEAD_ROWS) {
        let m = chunk.len();
        let xs = sized(&mut xs, m * d);
        for (i, &(row, _)) in chunk.iter().enumerate() {
            xs[i * d..(i + 1) * d].copy_from_slice(&hidden[row * d..(row + 1) * d]);
        }
        rms_fwd(
            xs,
            &cx.base.norm,
            sized(&mut hn, m * d),
            sized(&mut rs, m),
            d,
            eps,
        );
        let lg = sized(&mut logits, m * vocab);
        head.linear(lg, &hn, m, d, vocab);
        for (i, &(_, target)) in chunk.iter().enumerate() {
            let row = &mut lg[i * vocab..(i + 1) * vocab];
            let max = max8(row);
            let t = target as usize;
            let lt = (row[t] - max) as f64;
            let sum = exp_shifted(row, max) as f64;
            total += sum.ln() - lt;
            let inv = (1.0 / sum) as f32 * inv_total;
            for v in row.iter_mut() {
                *v *= inv;
            }
            row[t] -= inv_total;
        }
        let g = sized(&mut dhn, m * d);
        head.linear_back(g, lg, m, d, vocab);
        let gx = sized(&mut dx, m * d);
        gx.fill(0.0);
        rms_bwd(xs, &cx.base.norm, &rs, g, gx, d);
        for (i, &(row, _)) in chunk.iter().enumerate() {
            for (o, v) in dh[row * d..(row + 1) * d]
                .iter_mut()
                .zip(&gx[i * d..(i + 1) * d])
            {
                *o += v;
            }
        }
    }
    total
}
