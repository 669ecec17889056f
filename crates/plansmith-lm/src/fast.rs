//! Hand-written forward and backward pass of a whole [`TinyGpt`] training step on the CPU.
//!
//! candle's autograd builds a graph of many small ops per step, each allocating its result; for a
//! model this small that overhead dominates. [`FastTrainer`] computes the same loss and the same
//! gradients (checked against candle autograd in `tests/fast_grad.rs`) on flat `f32` buffers:
//!
//! - parameters, gradients and the AdamW moments are each one contiguous vector, laid out in the
//!   order of [`TinyGpt::vars`];
//! - activations live in per-shard workspaces that are sized on first use and reused by every
//!   later step (no allocation in the steady state);
//! - matrix products go through the `gemm` crate (the kernels candle itself uses); softmax, GELU
//!   and LayerNorm are fused loops with branch-free `exp`/`erf` approximations the compiler can
//!   vectorise;
//! - a batch is split into one shard of sequences per rayon thread (data parallel); the shards'
//!   gradients are summed in a fixed order, so a run is deterministic for a given thread count.
//!
//! The candle model stays the source of truth for everything but the optimizer loop: a trainer is
//! built from a model ([`FastTrainer::from_model`]) and writes its parameters back
//! ([`FastTrainer::write_to`]) for checkpoints, decoding and saving.
//!
//! Two pieces of work whose results cannot reach the loss are skipped: scores above the causal
//! diagonal, and, in the last block, everything but keys and values at positions that carry no
//! loss.

// Kernels index several slices with one loop variable on purpose (it keeps them readable and
// vectorisable).
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use rayon::prelude::*;

use crate::error::{LmError, Result};
use crate::kernels::*;
use crate::tiny_gpt::{BlockParams, PosEncoding, TinyGpt, TinyGptConfig};

// ---------------------------------------------------------------------------------------------
// parameter layout

/// Where one named parameter lives in the flat vectors.
#[derive(Debug, Clone)]
struct Slot {
    name: String,
    shape: Vec<usize>,
    off: usize,
    len: usize,
    /// Matrices get weight decay (as in [`crate::optim::AdamW`]).
    decay: bool,
}

/// Offsets of one block's parameters.
type LayerOffs = BlockParams<usize>;

#[derive(Debug, Clone)]
struct Offs {
    tok: usize,
    pos: Option<usize>,
    layers: Vec<LayerOffs>,
    lnf_w: usize,
    lnf_b: usize,
}

/// Static shape numbers used by the kernels.
#[derive(Debug, Clone, Copy)]
struct Dims {
    d: usize,
    h: usize,
    hd: usize,
    vocab: usize,
    n_layer: usize,
    eps: f32,
    rope: bool,
}

// ---------------------------------------------------------------------------------------------
// batch

/// One right-padded batch for [`FastTrainer::loss_and_grads`].
#[derive(Debug, Clone, Default)]
pub struct FastBatch {
    /// Sequences in the batch.
    pub b: usize,
    /// Padded length of every sequence.
    pub t: usize,
    /// `b * t` input ids, row-major (padding is any valid id, usually 0).
    pub ids: Vec<u32>,
    /// Positions that carry loss, as `(row * t + position, target id)`, in any order.
    pub targets: Vec<(u32, u32)>,
}

// ---------------------------------------------------------------------------------------------
// per-shard workspace

#[derive(Default)]
struct LayerAct {
    x_in: Vec<f32>,
    ln1: Vec<f32>,
    ln1_st: Vec<f32>,
    /// Queries, keys, values after RoPE, `(b, h, t, hd)`.
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// Attention probabilities `(b, h, t, t)` (zero above the diagonal).
    att: Vec<f32>,
    /// Attention output before the projection, `(rows, d)`.
    y: Vec<f32>,
    x_mid: Vec<f32>,
    ln2: Vec<f32>,
    ln2_st: Vec<f32>,
    hpre: Vec<f32>,
    gact: Vec<f32>,
}

#[derive(Default)]
struct Shard {
    b: usize,
    t: usize,
    ids: Vec<u32>,
    /// Loss rows (row index inside the shard) and targets.
    sel: Vec<(usize, u32)>,
    /// Last-block rows: the loss rows, sorted and deduplicated.
    last_rows: Vec<usize>,
    /// `last_rows` as runs of consecutive positions (see [`row_runs`]).
    runs: Vec<(usize, usize, usize, usize)>,
    layers: Vec<LayerAct>,
    /// Residual stream entering the final LayerNorm (loss rows only, compacted).
    x_fin: Vec<f32>,
    lnf: Vec<f32>,
    lnf_st: Vec<f32>,
    logits: Vec<f32>,
    qkv: Vec<f32>,
    // backward scratch
    dlog: Vec<f32>,
    dhf: Vec<f32>,
    dxc: Vec<f32>,
    dmid: Vec<f32>,
    dx: Vec<f32>,
    dt: Vec<f32>,
    dbig: Vec<f32>,
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
    dqkv: Vec<f32>,
    dp: Vec<f32>,
    grads: Vec<f32>,
    loss: f64,
}

/// Size a workspace buffer. Contents are not cleared: every buffer is either fully written before
/// it is read, or zeroed explicitly where the step accumulates into it.
fn fit(v: &mut Vec<f32>, n: usize) {
    v.resize(n, 0.0);
}

impl Shard {
    fn rows(&self) -> usize {
        self.b * self.t
    }

    fn prepare(&mut self, dims: &Dims, nparams: usize) {
        let r = self.rows();
        let (d, t, h) = (dims.d, self.t, dims.h);
        let nl = self.last_rows.len();
        self.layers.resize_with(dims.n_layer, LayerAct::default);
        for (li, l) in self.layers.iter_mut().enumerate() {
            let last = li + 1 == dims.n_layer;
            // the last block computes everything after K/V on the loss rows only
            let rr = if last { nl } else { r };
            fit(&mut l.x_in, r * d);
            fit(&mut l.ln1, r * d);
            fit(&mut l.ln1_st, r * 2);
            fit(&mut l.q, if last { nl * d } else { r * d });
            fit(&mut l.k, r * d);
            fit(&mut l.v, r * d);
            fit(
                &mut l.att,
                if last { nl * h * t } else { self.b * h * t * t },
            );
            fit(&mut l.y, rr * d);
            fit(&mut l.x_mid, rr * d);
            fit(&mut l.ln2, rr * d);
            fit(&mut l.ln2_st, rr * 2);
            fit(&mut l.hpre, rr * 4 * d);
            fit(&mut l.gact, rr * 4 * d);
        }
        fit(&mut self.x_fin, nl * d);
        fit(&mut self.lnf, nl * d);
        fit(&mut self.lnf_st, nl * 2);
        fit(&mut self.logits, nl.max(self.sel.len()) * dims.vocab);
        fit(&mut self.qkv, r * 3 * d);
        fit(&mut self.dlog, nl * dims.vocab);
        fit(&mut self.dhf, nl * d);
        fit(&mut self.dxc, nl * d);
        fit(&mut self.dmid, r * d);
        fit(&mut self.dx, r * d);
        fit(&mut self.dt, r * d);
        fit(&mut self.dbig, r * 4 * d);
        fit(&mut self.dq, r * d);
        fit(&mut self.dk, r * d);
        fit(&mut self.dv, r * d);
        fit(&mut self.dqkv, r * 3 * d);
        fit(&mut self.dp, t * t);
        fit(&mut self.grads, nparams);
    }
}

/// Read-only context shared by the shards of one step.
struct Ctx<'a> {
    dims: Dims,
    offs: &'a Offs,
    p: &'a [f32],
    cos: &'a [f32],
    sin: &'a [f32],
    /// Loss normaliser: loss positions of the whole batch.
    n_loss: f32,
}

impl Ctx<'_> {
    fn w(&self, off: usize, len: usize) -> &[f32] {
        &self.p[off..off + len]
    }
}

fn g_mut(g: &mut [f32], off: usize, len: usize) -> &mut [f32] {
    &mut g[off..off + len]
}

impl Shard {
    /// The sizes every phase of a step reads.
    fn shape(&self, cx: &Ctx<'_>) -> Shape {
        let Dims {
            d,
            h,
            hd,
            vocab,
            n_layer,
            eps,
            rope,
        } = cx.dims;
        let (b, t) = (self.b, self.t);
        Shape {
            d,
            h,
            hd,
            vocab,
            n_layer,
            eps,
            rope,
            b,
            t,
            r: b * t,
            half: hd / 2,
            scale: 1.0 / (hd as f32).sqrt(),
            nl: self.last_rows.len(),
        }
    }

    /// Forward and backward of this shard; gradients land in `self.grads`, the loss (already
    /// divided by the batch's loss count) in `self.loss`.
    fn step(&mut self, cx: &Ctx<'_>) {
        let n_layer = cx.dims.n_layer;
        self.grads.fill(0.0);
        self.loss = 0.0;
        if self.last_rows.is_empty() {
            return;
        }
        self.embed_forward(cx);
        for li in 0..n_layer {
            self.block_forward(cx, li);
        }
        self.head_forward(cx);
        let mut grads = std::mem::take(&mut self.grads);
        self.head_backward(cx, &mut grads);
        for li in (0..n_layer).rev() {
            self.block_backward(cx, li, &mut grads);
        }
        self.embed_backward(cx, &mut grads);
        self.grads = grads;
    }

    /// Token (and learned position) embeddings into the first block's input.
    fn embed_forward(&mut self, cx: &Ctx<'_>) {
        let Shape { d, vocab, t, r, .. } = self.shape(cx);
        {
            let tok = cx.w(cx.offs.tok, vocab * d);
            let x = &mut self.layers[0].x_in;
            for (row, &id) in self.ids.iter().enumerate() {
                let id = id as usize;
                x[row * d..(row + 1) * d].copy_from_slice(&tok[id * d..(id + 1) * d]);
            }
            if let Some(po) = cx.offs.pos {
                let pos = cx.w(po, t * d);
                for row in 0..r {
                    let p = row % t;
                    for (xv, &pv) in x[row * d..(row + 1) * d]
                        .iter_mut()
                        .zip(&pos[p * d..(p + 1) * d])
                    {
                        *xv += pv;
                    }
                }
            }
        }
    }

    /// Block `li` forward; the last block keeps only the loss rows (compacted).
    fn block_forward(&mut self, cx: &Ctx<'_>, li: usize) {
        let Shape {
            d,
            h,
            hd,
            n_layer,
            eps,
            rope,
            b,
            t,
            r,
            half,
            scale,
            nl,
            ..
        } = self.shape(cx);
        let lo = cx.offs.layers[li];
        let last = li + 1 == n_layer;
        let (cur, rest) = self.layers.split_at_mut(li + 1);
        let l = &mut cur[li];
        ln_fwd(
            &l.x_in,
            cx.w(lo.ln1_w, d),
            cx.w(lo.ln1_b, d),
            &mut l.ln1,
            &mut l.ln1_st,
            d,
            eps,
        );
        linear_fwd(
            &mut self.qkv,
            &l.ln1,
            cx.w(lo.qkv_w, 3 * d * d),
            cx.w(lo.qkv_b, 3 * d),
            r,
            d,
            3 * d,
        );
        // split into heads (+ RoPE); the last block keeps queries of loss rows only
        for row in 0..r {
            let (bi, p) = (row / t, row % t);
            let src = &self.qkv[row * 3 * d..(row + 1) * 3 * d];
            for hi in 0..h {
                let dst = ((bi * h + hi) * t + p) * hd;
                l.k[dst..dst + hd].copy_from_slice(&src[d + hi * hd..d + (hi + 1) * hd]);
                l.v[dst..dst + hd].copy_from_slice(&src[2 * d + hi * hd..2 * d + (hi + 1) * hd]);
                if rope {
                    let (c, s) = (
                        &cx.cos[p * half..(p + 1) * half],
                        &cx.sin[p * half..(p + 1) * half],
                    );
                    rope_apply(&mut l.k[dst..dst + hd], c, s);
                }
                if !last {
                    l.q[dst..dst + hd].copy_from_slice(&src[hi * hd..(hi + 1) * hd]);
                    if rope {
                        let (c, s) = (
                            &cx.cos[p * half..(p + 1) * half],
                            &cx.sin[p * half..(p + 1) * half],
                        );
                        rope_apply(&mut l.q[dst..dst + hd], c, s);
                    }
                }
            }
        }
        if last {
            // q of loss rows, (nl, h, hd) row-major = (nl, d)
            for (i, &row) in self.last_rows.iter().enumerate() {
                let p = row % t;
                let src = &self.qkv[row * 3 * d..row * 3 * d + d];
                let dst = &mut l.q[i * d..(i + 1) * d];
                dst.copy_from_slice(src);
                if rope {
                    for hi in 0..h {
                        rope_apply(
                            &mut dst[hi * hd..(hi + 1) * hd],
                            &cx.cos[p * half..(p + 1) * half],
                            &cx.sin[p * half..(p + 1) * half],
                        );
                    }
                }
            }
        }

        // attention
        if !last {
            attn_full_fwd(l, b, t, &cx.dims, scale);
        } else {
            attn_rows_fwd(l, &self.runs, t, &cx.dims, scale);
        }
        let rr = if last { nl } else { r };
        // x_mid = x_in + y Wp^T + bp (compacted to loss rows in the last block)
        linear_fwd(
            &mut l.x_mid,
            &l.y,
            cx.w(lo.proj_w, d * d),
            cx.w(lo.proj_b, d),
            rr,
            d,
            d,
        );
        if last {
            for (i, &row) in self.last_rows.iter().enumerate() {
                for (o, &x) in l.x_mid[i * d..(i + 1) * d]
                    .iter_mut()
                    .zip(&l.x_in[row * d..(row + 1) * d])
                {
                    *o += x;
                }
            }
        } else {
            for (o, &x) in l.x_mid.iter_mut().zip(&l.x_in) {
                *o += x;
            }
        }
        ln_fwd(
            &l.x_mid,
            cx.w(lo.ln2_w, d),
            cx.w(lo.ln2_b, d),
            &mut l.ln2,
            &mut l.ln2_st,
            d,
            eps,
        );
        linear_fwd(
            &mut l.hpre,
            &l.ln2,
            cx.w(lo.fc_w, 4 * d * d),
            cx.w(lo.fc_b, 4 * d),
            rr,
            d,
            4 * d,
        );
        gelu_fwd(&l.hpre, &mut l.gact);
        let out: &mut Vec<f32> = if last {
            &mut self.x_fin
        } else {
            &mut rest[0].x_in
        };
        linear_fwd(
            out,
            &l.gact,
            cx.w(lo.out_w, 4 * d * d),
            cx.w(lo.out_b, d),
            rr,
            4 * d,
            d,
        );
        for (o, &x) in out.iter_mut().zip(&l.x_mid) {
            *o += x;
        }
    }

    /// Final LayerNorm, tied head and masked cross-entropy over the loss rows; sets `self.loss`.
    fn head_forward(&mut self, cx: &Ctx<'_>) {
        let Shape {
            d, vocab, eps, nl, ..
        } = self.shape(cx);
        // ---- final LayerNorm, tied head, masked cross-entropy (loss rows only)
        let offs = cx.offs;
        ln_fwd(
            &self.x_fin,
            cx.w(offs.lnf_w, d),
            cx.w(offs.lnf_b, d),
            &mut self.lnf,
            &mut self.lnf_st,
            d,
            eps,
        );
        let tok = cx.w(offs.tok, vocab * d);
        mm(
            &mut self.logits,
            vocab,
            &self.lnf,
            d,
            false,
            tok,
            d,
            true,
            nl,
            vocab,
            d,
            false,
        );
        self.dlog.fill(0.0);
        let mut loss = 0f64;
        let inv_n = 1.0 / cx.n_loss;
        for &(row, tgt) in &self.sel {
            let i = self
                .last_rows
                .binary_search(&row)
                .expect("loss rows are in last_rows");
            let lrow = &self.logits[i * vocab..(i + 1) * vocab];
            let mx = lrow.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut s = 0f32;
            for &z in lrow {
                s += exp_fast(z - mx);
            }
            let lse = mx + s.ln();
            loss += (lse - lrow[tgt as usize]) as f64;
            let dr = &mut self.dlog[i * vocab..(i + 1) * vocab];
            let k = inv_n / s;
            for (g, &z) in dr.iter_mut().zip(lrow) {
                *g += exp_fast(z - mx) * k;
            }
            dr[tgt as usize] -= inv_n;
        }
        self.loss = loss / cx.n_loss as f64;
    }

    /// Backward through the head and the final LayerNorm, into `self.dxc`.
    fn head_backward(&mut self, cx: &Ctx<'_>, grads: &mut [f32]) {
        let Shape { d, vocab, nl, .. } = self.shape(cx);
        let offs = cx.offs;
        let tok = cx.w(offs.tok, vocab * d);
        // ---- backward: head and final LayerNorm
        // d tok += dlog^T lnf ; d lnf = dlog tok
        mm(
            g_mut(grads, offs.tok, vocab * d),
            d,
            &self.dlog,
            vocab,
            true,
            &self.lnf,
            d,
            false,
            vocab,
            d,
            nl,
            true,
        );
        mm(
            &mut self.dhf,
            d,
            &self.dlog,
            vocab,
            false,
            tok,
            d,
            false,
            nl,
            d,
            vocab,
            false,
        );
        self.dxc.fill(0.0);
        {
            let (gw, gb) = two_mut(grads, offs.lnf_w, offs.lnf_b, d);
            ln_bwd(
                &self.dhf,
                &self.x_fin,
                &self.lnf_st,
                cx.w(offs.lnf_w, d),
                &mut self.dxc,
                gw,
                gb,
                d,
            );
        }
    }

    /// Block `li` backward. Entering it, the gradient w.r.t. its output is in `dxc` (compacted
    /// loss rows) for the last block and in `dx` (all rows) otherwise.
    fn block_backward(&mut self, cx: &Ctx<'_>, li: usize, grads: &mut [f32]) {
        let Shape {
            d,
            h,
            hd,
            n_layer,
            rope,
            b,
            t,
            r,
            half,
            scale,
            nl,
            ..
        } = self.shape(cx);
        let offs = cx.offs;
        let lo = offs.layers[li];
        let last = li + 1 == n_layer;
        let l = &self.layers[li];
        let rr = if last { nl } else { r };
        let dxo: &[f32] = if last { &self.dxc } else { &self.dx };
        // MLP output layer
        mm(
            g_mut(grads, lo.out_w, 4 * d * d),
            4 * d,
            dxo,
            d,
            true,
            &l.gact,
            4 * d,
            false,
            d,
            4 * d,
            rr,
            true,
        );
        bias_grad(g_mut(grads, lo.out_b, d), &dxo[..rr * d], d);
        let dg = &mut self.dbig[..rr * 4 * d];
        mm(
            dg,
            4 * d,
            dxo,
            d,
            false,
            cx.w(lo.out_w, 4 * d * d),
            4 * d,
            false,
            rr,
            4 * d,
            d,
            false,
        );
        gelu_bwd(&l.hpre, dg);
        // MLP input layer
        mm(
            g_mut(grads, lo.fc_w, 4 * d * d),
            d,
            dg,
            4 * d,
            true,
            &l.ln2,
            d,
            false,
            4 * d,
            d,
            rr,
            true,
        );
        bias_grad(g_mut(grads, lo.fc_b, 4 * d), dg, 4 * d);
        let dm = &mut self.dt[..rr * d];
        mm(
            dm,
            d,
            dg,
            4 * d,
            false,
            cx.w(lo.fc_w, 4 * d * d),
            d,
            false,
            rr,
            d,
            4 * d,
            false,
        );
        // dx_mid = dxo + ln2_bwd(dm)
        let dmid = &mut self.dmid[..rr * d];
        dmid.copy_from_slice(&dxo[..rr * d]);
        {
            let (gw, gb) = two_mut(grads, lo.ln2_w, lo.ln2_b, d);
            ln_bwd(dm, &l.x_mid, &l.ln2_st, cx.w(lo.ln2_w, d), dmid, gw, gb, d);
        }
        // attention output projection
        mm(
            g_mut(grads, lo.proj_w, d * d),
            d,
            dmid,
            d,
            true,
            &l.y,
            d,
            false,
            d,
            d,
            rr,
            true,
        );
        bias_grad(g_mut(grads, lo.proj_b, d), dmid, d);
        let dy = &mut self.dt[..rr * d];
        mm(
            dy,
            d,
            dmid,
            d,
            false,
            cx.w(lo.proj_w, d * d),
            d,
            false,
            rr,
            d,
            d,
            false,
        );
        let dy: &[f32] = dy;
        // attention core -> dq (head layout; (nl, d) in the last block), dk, dv
        let (dq, dk, dv) = (&mut self.dq, &mut self.dk, &mut self.dv);
        if !last {
            attn_full_bwd(l, dy, dq, dk, dv, &mut self.dp, b, t, &cx.dims, scale);
        } else {
            attn_rows_bwd(
                l,
                dy,
                dq,
                dk,
                dv,
                &mut self.dp,
                &self.runs,
                t,
                &cx.dims,
                scale,
            );
        }
        // back to (rows, 3d), RoPE transposed
        let dqkv = &mut self.dqkv;
        if last {
            dqkv.fill(0.0);
        }
        for row in 0..r {
            let (bi, p) = (row / t, row % t);
            let dst = &mut dqkv[row * 3 * d..(row + 1) * 3 * d];
            for hi in 0..h {
                let src = ((bi * h + hi) * t + p) * hd;
                dst[d + hi * hd..d + (hi + 1) * hd].copy_from_slice(&dk[src..src + hd]);
                dst[2 * d + hi * hd..2 * d + (hi + 1) * hd].copy_from_slice(&dv[src..src + hd]);
                if !last {
                    dst[hi * hd..(hi + 1) * hd].copy_from_slice(&dq[src..src + hd]);
                }
                if rope {
                    let c = &cx.cos[p * half..(p + 1) * half];
                    let s = &cx.sin[p * half..(p + 1) * half];
                    rope_apply_t(&mut dst[d + hi * hd..d + (hi + 1) * hd], c, s);
                    if !last {
                        rope_apply_t(&mut dst[hi * hd..(hi + 1) * hd], c, s);
                    }
                }
            }
        }
        if last {
            for (i, &row) in self.last_rows.iter().enumerate() {
                let p = row % t;
                let dst = &mut dqkv[row * 3 * d..row * 3 * d + d];
                dst.copy_from_slice(&dq[i * d..(i + 1) * d]);
                if rope {
                    for hi in 0..h {
                        rope_apply_t(
                            &mut dst[hi * hd..(hi + 1) * hd],
                            &cx.cos[p * half..(p + 1) * half],
                            &cx.sin[p * half..(p + 1) * half],
                        );
                    }
                }
            }
        }
        let dqkv: &[f32] = dqkv;
        mm(
            g_mut(grads, lo.qkv_w, 3 * d * d),
            d,
            dqkv,
            3 * d,
            true,
            &l.ln1,
            d,
            false,
            3 * d,
            d,
            r,
            true,
        );
        bias_grad(g_mut(grads, lo.qkv_b, 3 * d), dqkv, 3 * d);
        // da = dqkv W_qkv ; dx_in = dx_mid (scattered back to all rows) + ln1_bwd(da)
        let da = &mut self.dt[..r * d];
        mm(
            da,
            d,
            dqkv,
            3 * d,
            false,
            cx.w(lo.qkv_w, 3 * d * d),
            d,
            false,
            r,
            d,
            3 * d,
            false,
        );
        let dxi = &mut self.dx;
        if last {
            dxi.fill(0.0);
            for (i, &row) in self.last_rows.iter().enumerate() {
                dxi[row * d..(row + 1) * d].copy_from_slice(&self.dmid[i * d..(i + 1) * d]);
            }
        } else {
            dxi.copy_from_slice(&self.dmid[..r * d]);
        }
        {
            let (gw, gb) = two_mut(grads, lo.ln1_w, lo.ln1_b, d);
            ln_bwd(da, &l.x_in, &l.ln1_st, cx.w(lo.ln1_w, d), dxi, gw, gb, d);
        }
    }

    /// Embedding gradients from the first block's input gradient.
    fn embed_backward(&mut self, cx: &Ctx<'_>, grads: &mut [f32]) {
        let Shape { d, vocab, t, r, .. } = self.shape(cx);
        let offs = cx.offs;
        // ---- embeddings backward
        {
            let gt = g_mut(grads, offs.tok, vocab * d);
            for (row, &id) in self.ids.iter().enumerate() {
                let id = id as usize;
                axpy(
                    &mut gt[id * d..(id + 1) * d],
                    1.0,
                    &self.dx[row * d..(row + 1) * d],
                );
            }
        }
        if let Some(po) = offs.pos {
            let gp = g_mut(grads, po, t * d);
            for row in 0..r {
                let p = row % t;
                axpy(
                    &mut gp[p * d..(p + 1) * d],
                    1.0,
                    &self.dx[row * d..(row + 1) * d],
                );
            }
        }
    }
}

/// The sizes of one shard's step.
#[derive(Clone, Copy)]
struct Shape {
    d: usize,
    h: usize,
    hd: usize,
    vocab: usize,
    n_layer: usize,
    eps: f32,
    rope: bool,
    b: usize,
    t: usize,
    r: usize,
    half: usize,
    scale: f32,
    nl: usize,
}

/// Query rows per block of the causal attention products: a block only meets the keys up to
/// its last row, which skips most of the masked upper triangle.
const QBLOCK: usize = 32;

/// Causal self-attention of all rows of a full block: probabilities into `l.att`, outputs
/// (heads side by side) into `l.y`.
#[inline(never)]
fn attn_full_fwd(l: &mut LayerAct, b: usize, t: usize, dims: &Dims, scale: f32) {
    let (d, h, hd) = (dims.d, dims.h, dims.hd);
    for bi in 0..b {
        for hi in 0..h {
            let base = ((bi * h + hi) * t) * hd;
            let q = &l.q[base..base + t * hd];
            let k = &l.k[base..base + t * hd];
            let v = &l.v[base..base + t * hd];
            let pa = (bi * h + hi) * t * t;
            let att = &mut l.att[pa..pa + t * t];
            for i0 in (0..t).step_by(QBLOCK) {
                let i1 = (i0 + QBLOCK).min(t);
                let (nq, nk) = (i1 - i0, i1);
                let ab = &mut att[i0 * t..];
                mm(
                    ab,
                    t,
                    &q[i0 * hd..],
                    hd,
                    false,
                    k,
                    hd,
                    true,
                    nq,
                    nk,
                    hd,
                    false,
                );
                for i in i0..i1 {
                    softmax_causal(&mut ab[(i - i0) * t..(i - i0 + 1) * t], i + 1, scale);
                }
                mm(
                    &mut l.y[(bi * t + i0) * d + hi * hd..],
                    d,
                    ab,
                    t,
                    false,
                    v,
                    hd,
                    false,
                    nq,
                    hd,
                    nk,
                    false,
                );
            }
        }
    }
}

/// Backward of [`attn_full_fwd`]: `dy` (rows, d) -> `dq`, `dk`, `dv` in head layout.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn attn_full_bwd(
    l: &LayerAct,
    dy: &[f32],
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    dp: &mut [f32],
    b: usize,
    t: usize,
    dims: &Dims,
    scale: f32,
) {
    let (d, h, hd) = (dims.d, dims.h, dims.hd);
    for bi in 0..b {
        for hi in 0..h {
            let base = ((bi * h + hi) * t) * hd;
            let pa = (bi * h + hi) * t * t;
            let att = &l.att[pa..pa + t * t];
            let (q, k, v) = (
                &l.q[base..base + t * hd],
                &l.k[base..base + t * hd],
                &l.v[base..base + t * hd],
            );
            let dkh = &mut dk[base..base + t * hd];
            let dvh = &mut dv[base..base + t * hd];
            dkh.fill(0.0);
            dvh.fill(0.0);
            for i0 in (0..t).step_by(QBLOCK) {
                let i1 = (i0 + QBLOCK).min(t);
                let (nq, nk) = (i1 - i0, i1);
                let dyb = &dy[(bi * t + i0) * d + hi * hd..];
                let pb = &att[i0 * t..];
                // dV[..nk] += P_b^T dY_b
                mm(dvh, hd, pb, t, true, dyb, d, false, nk, hd, nq, true);
                // dP_b = dY_b V[..nk]^T, then dS = P (dP - rowsum(P dP)) * scale
                mm(dp, t, dyb, d, false, v, hd, true, nq, nk, hd, false);
                for i in i0..i1 {
                    let pr = &pb[(i - i0) * t..(i - i0) * t + i + 1];
                    let dr = &mut dp[(i - i0) * t..(i - i0) * t + nk];
                    let s = dot(pr, &dr[..i + 1]);
                    for j in 0..=i {
                        dr[j] = pr[j] * (dr[j] - s) * scale;
                    }
                    dr[i + 1..].fill(0.0);
                }
                // dQ_b = dS K[..nk], dK[..nk] += dS^T Q_b
                mm(
                    &mut dq[base + i0 * hd..],
                    hd,
                    dp,
                    t,
                    false,
                    k,
                    hd,
                    false,
                    nq,
                    hd,
                    nk,
                    false,
                );
                mm(
                    dkh,
                    hd,
                    dp,
                    t,
                    true,
                    &q[i0 * hd..],
                    hd,
                    false,
                    nk,
                    hd,
                    nq,
                    true,
                );
            }
        }
    }
}

/// Runs of consecutive positions of one sequence in the sorted loss rows:
/// `(first compacted index, sequence, first position, length)`.
fn row_runs(rows: &[usize], t: usize, out: &mut Vec<(usize, usize, usize, usize)>) {
    out.clear();
    for (i, &row) in rows.iter().enumerate() {
        let (bi, p) = (row / t, row % t);
        match out.last_mut() {
            Some((_, rb, p0, n)) if *rb == bi && *p0 + *n == p => *n += 1,
            _ => out.push((i, bi, p, 1)),
        }
    }
}

/// Last-block attention for the loss rows only: queries `l.q` (nl, d), probabilities
/// `l.att` (nl, h, t), outputs `l.y` (nl, d). Each run of consecutive loss positions (a
/// completion) is one pair of matrix products per head.
#[inline(never)]
fn attn_rows_fwd(
    l: &mut LayerAct,
    runs: &[(usize, usize, usize, usize)],
    t: usize,
    dims: &Dims,
    scale: f32,
) {
    let (d, h, hd) = (dims.d, dims.h, dims.hd);
    for &(i0, bi, p0, nq) in runs {
        let nk = p0 + nq;
        for hi in 0..h {
            let base = ((bi * h + hi) * t) * hd;
            let ab = &mut l.att[(i0 * h + hi) * t..];
            mm(
                ab,
                h * t,
                &l.q[i0 * d + hi * hd..],
                d,
                false,
                &l.k[base..base + nk * hd],
                hd,
                true,
                nq,
                nk,
                hd,
                false,
            );
            for r in 0..nq {
                softmax_causal(&mut ab[r * h * t..r * h * t + t], p0 + r + 1, scale);
            }
            mm(
                &mut l.y[i0 * d + hi * hd..],
                d,
                ab,
                h * t,
                false,
                &l.v[base..base + nk * hd],
                hd,
                false,
                nq,
                hd,
                nk,
                false,
            );
        }
    }
}

/// Backward of [`attn_rows_fwd`]: `dy` (nl, d) -> `dq` (nl, d), `dk`, `dv` (head layout, all
/// rows).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn attn_rows_bwd(
    l: &LayerAct,
    dy: &[f32],
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    dp: &mut [f32],
    runs: &[(usize, usize, usize, usize)],
    t: usize,
    dims: &Dims,
    scale: f32,
) {
    let (d, h, hd) = (dims.d, dims.h, dims.hd);
    dk.fill(0.0);
    dv.fill(0.0);
    for &(i0, bi, p0, nq) in runs {
        let nk = p0 + nq;
        for hi in 0..h {
            let base = ((bi * h + hi) * t) * hd;
            let ab = &l.att[(i0 * h + hi) * t..];
            let dyb = &dy[i0 * d + hi * hd..];
            let (k, v) = (&l.k[base..base + nk * hd], &l.v[base..base + nk * hd]);
            // dV[..nk] += P^T dY ; dP = dY V^T
            mm(
                &mut dv[base..],
                hd,
                ab,
                h * t,
                true,
                dyb,
                d,
                false,
                nk,
                hd,
                nq,
                true,
            );
            mm(dp, t, dyb, d, false, v, hd, true, nq, nk, hd, false);
            for r in 0..nq {
                let n = p0 + r + 1;
                let pr = &ab[r * h * t..r * h * t + n];
                let dr = &mut dp[r * t..r * t + nk];
                let s = dot(pr, &dr[..n]);
                for j in 0..n {
                    dr[j] = pr[j] * (dr[j] - s) * scale;
                }
                dr[n..].fill(0.0);
            }
            // dQ = dS K ; dK[..nk] += dS^T Q
            mm(
                &mut dq[i0 * d + hi * hd..],
                d,
                dp,
                t,
                false,
                k,
                hd,
                false,
                nq,
                hd,
                nk,
                false,
            );
            mm(
                &mut dk[base..],
                hd,
                dp,
                t,
                true,
                &l.q[i0 * d + hi * hd..],
                d,
                false,
                nk,
                hd,
                nq,
                true,
            );
        }
    }
}

/// Two disjoint `len`-long mutable windows of `g`.
fn two_mut(g: &mut [f32], a: usize, b: usize, len: usize) -> (&mut [f32], &mut [f32]) {
    assert!(
        a + len <= b || b + len <= a,
        "overlapping parameter windows"
    );
    if a < b {
        let (lo, hi) = g.split_at_mut(b);
        (&mut lo[a..a + len], &mut hi[..len])
    } else {
        let (lo, hi) = g.split_at_mut(a);
        (&mut hi[..len], &mut lo[b..b + len])
    }
}

// ---------------------------------------------------------------------------------------------
// the trainer

/// Flat-buffer forward/backward and AdamW for a [`TinyGpt`]; see the module docs.
pub struct FastTrainer {
    cfg: TinyGptConfig,
    dims: Dims,
    slots: Vec<Slot>,
    offs: Offs,
    params: Vec<f32>,
    grads: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    step_t: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
    shards: Vec<Shard>,
    max_shards: Option<usize>,
}

impl std::fmt::Debug for FastTrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastTrainer")
            .field("cfg", &self.cfg)
            .field("params", &self.params.len())
            .field("step_t", &self.step_t)
            .finish()
    }
}

impl FastTrainer {
    /// Whether the fast path can train `model` (CPU weights; every valid shape is supported).
    pub fn supports(model: &TinyGpt) -> bool {
        matches!(model.device(), Device::Cpu)
    }

    /// A trainer holding a copy of `model`'s current weights and fresh (zero) AdamW moments.
    pub fn from_model(model: &TinyGpt) -> Result<Self> {
        if !Self::supports(model) {
            return Err(LmError::Config(
                "the fast training path runs on the CPU only".into(),
            ));
        }
        let cfg = model.config().clone();
        cfg.validate()?;
        let mut slots = Vec::new();
        let mut params = Vec::with_capacity(model.num_params());
        for (name, var) in model.vars() {
            let data = var.as_tensor().flatten_all()?.to_vec1::<f32>()?;
            slots.push(Slot {
                name: name.clone(),
                shape: var.dims().to_vec(),
                off: params.len(),
                len: data.len(),
                decay: var.rank() >= 2,
            });
            params.extend_from_slice(&data);
        }
        let by_name: HashMap<&str, usize> =
            slots.iter().map(|s| (s.name.as_str(), s.off)).collect();
        let get = |n: &str| -> Result<usize> {
            by_name
                .get(n)
                .copied()
                .ok_or_else(|| LmError::Config(format!("fast path: model lacks {n}")))
        };
        let layers = (0..cfg.n_layer)
            .map(|i| LayerOffs::by_name(i, &get))
            .collect::<Result<Vec<_>>>()?;
        let offs = Offs {
            tok: get("tok.weight")?,
            pos: if cfg.pos == PosEncoding::Learned {
                Some(get("pos.weight")?)
            } else {
                None
            },
            layers,
            lnf_w: get("ln.weight")?,
            lnf_b: get("ln.bias")?,
        };
        let hd = cfg.d_model / cfg.n_head;
        let (cos, sin) = rope_tables(&cfg);
        let n = params.len();
        Ok(Self {
            dims: Dims {
                d: cfg.d_model,
                h: cfg.n_head,
                hd,
                vocab: cfg.vocab,
                n_layer: cfg.n_layer,
                eps: cfg.ln_eps as f32,
                rope: cfg.pos == PosEncoding::Rope,
            },
            cfg,
            slots,
            offs,
            params,
            grads: vec![0.0; n],
            m: vec![0.0; n],
            v: vec![0.0; n],
            step_t: 0,
            cos,
            sin,
            shards: Vec::new(),
            max_shards: None,
        })
    }

    /// Cap the number of data-parallel shards (default: one per rayon thread). Results depend on
    /// the shard count only through the order of floating-point sums.
    pub fn set_max_shards(&mut self, n: usize) {
        self.max_shards = Some(n.max(1));
    }

    /// The model shape this trainer was built for.
    pub fn config(&self) -> &TinyGptConfig {
        &self.cfg
    }

    /// Copy the trainer's parameters into `model`'s variables (same shape required).
    pub fn write_to(&self, model: &TinyGpt) -> Result<()> {
        if model.config() != &self.cfg {
            return Err(LmError::Config(
                "fast path: writing weights into a model of a different shape".into(),
            ));
        }
        for ((name, var), s) in model.vars().iter().zip(&self.slots) {
            debug_assert_eq!(name, &s.name);
            let t = Tensor::from_slice(
                &self.params[s.off..s.off + s.len],
                s.shape.as_slice(),
                model.device(),
            )?;
            var.set(&t)?;
        }
        Ok(())
    }

    /// Gradients of the last [`Self::loss_and_grads`] call, by parameter name, in
    /// [`TinyGpt::vars`] order.
    pub fn named_grads(&self) -> Vec<(String, Vec<f32>)> {
        self.slots
            .iter()
            .map(|s| (s.name.clone(), self.grads[s.off..s.off + s.len].to_vec()))
            .collect()
    }

    /// Mean masked cross-entropy of `batch` (as [`crate::train::loss_and_grads`] defines it) and
    /// its gradients, which stay in the trainer for [`Self::clip_grad_norm`] / [`Self::adamw_step`].
    pub fn loss_and_grads(&mut self, batch: &FastBatch) -> Result<f32> {
        let (b, t) = (batch.b, batch.t);
        if b == 0 || t == 0 || batch.ids.len() != b * t {
            return Err(LmError::Data(format!(
                "fast batch: {} ids for {b} sequences of {t}",
                batch.ids.len()
            )));
        }
        if t > self.cfg.block {
            return Err(LmError::ContextOverflow {
                needed: t,
                block: self.cfg.block,
            });
        }
        if let Some(&id) = batch.ids.iter().find(|&&i| i as usize >= self.cfg.vocab) {
            return Err(LmError::TokenOutOfRange {
                place: "fast batch ids",
                id,
                vocab: self.cfg.vocab,
            });
        }
        if batch.targets.is_empty() {
            return Err(LmError::Data("fast batch: no loss positions".into()));
        }
        for &(row, tgt) in &batch.targets {
            if row as usize >= b * t {
                return Err(LmError::Data(format!(
                    "fast batch: loss position {row} outside {b} x {t}"
                )));
            }
            if tgt as usize >= self.cfg.vocab {
                return Err(LmError::TokenOutOfRange {
                    place: "fast batch targets",
                    id: tgt,
                    vocab: self.cfg.vocab,
                });
            }
        }
        let threads = rayon::current_num_threads().max(1);
        let ns = self.max_shards.unwrap_or(threads).min(b).max(1);
        self.shards.resize_with(ns, Shard::default);
        let nparams = self.params.len();
        for (si, sh) in self.shards.iter_mut().enumerate() {
            let (s0, s1) = (si * b / ns, (si + 1) * b / ns);
            sh.b = s1 - s0;
            sh.t = t;
            sh.ids.clear();
            sh.ids.extend_from_slice(&batch.ids[s0 * t..s1 * t]);
            sh.sel.clear();
            for &(row, tgt) in &batch.targets {
                let row = row as usize;
                if row >= s0 * t && row < s1 * t {
                    sh.sel.push((row - s0 * t, tgt));
                }
            }
            sh.last_rows.clear();
            sh.last_rows.extend(sh.sel.iter().map(|&(r, _)| r));
            sh.last_rows.sort_unstable();
            sh.last_rows.dedup();
            row_runs(&sh.last_rows, t, &mut sh.runs);
            sh.prepare(&self.dims, nparams);
        }
        let cx = Ctx {
            dims: self.dims,
            offs: &self.offs,
            p: &self.params,
            cos: &self.cos,
            sin: &self.sin,
            n_loss: batch.targets.len() as f32,
        };
        if self.shards.len() == 1 {
            self.shards[0].step(&cx);
        } else {
            self.shards.par_iter_mut().for_each(|s| s.step(&cx));
        }
        let mut loss = 0f64;
        self.grads.copy_from_slice(&self.shards[0].grads);
        loss += self.shards[0].loss;
        for sh in &self.shards[1..] {
            for (g, &x) in self.grads.iter_mut().zip(&sh.grads) {
                *g += x;
            }
            loss += sh.loss;
        }
        Ok(loss as f32)
    }

    /// Global L2 norm of the gradients; scales them so it is at most `max_norm` (0 disables).
    /// Returns the norm before clipping (the rule of [`crate::optim::clip_grad_norm`]).
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let mut sq = 0f64;
        for s in &self.slots {
            let part: f32 = self.grads[s.off..s.off + s.len].iter().map(|g| g * g).sum();
            sq += part as f64;
        }
        let norm = sq.sqrt();
        if max_norm > 0.0 && norm.is_finite() && norm > max_norm {
            let k = (max_norm / (norm + 1e-6)) as f32;
            self.grads.iter_mut().for_each(|g| *g *= k);
        }
        norm
    }

    /// One AdamW update from the current gradients (the rule of [`crate::optim::AdamW`]).
    pub fn adamw_step(&mut self, p: &crate::optim::AdamWParams) {
        self.step_t += 1;
        let b1 = p.beta1 as f32;
        let b2 = p.beta2 as f32;
        let sm = (1.0 / (1.0 - p.beta1.powi(self.step_t as i32))) as f32;
        let sv = (1.0 / (1.0 - p.beta2.powi(self.step_t as i32))) as f32;
        let eps = p.eps as f32;
        let lr = p.lr as f32;
        let keep = (1.0 - p.lr * p.weight_decay) as f32;
        for s in &self.slots {
            let r = s.off..s.off + s.len;
            let keep = if s.decay { keep } else { 1.0 };
            for (((th, g), m), v) in self.params[r.clone()]
                .iter_mut()
                .zip(&self.grads[r.clone()])
                .zip(&mut self.m[r.clone()])
                .zip(&mut self.v[r])
            {
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                let upd = (*m * sm) / ((*v * sv).sqrt() + eps);
                *th = *th * keep - lr * upd;
            }
        }
    }

    /// Optimizer steps taken (or restored).
    pub fn step_count(&self) -> usize {
        self.step_t
    }

    /// AdamW moments as tensors named like [`crate::optim::AdamW::state_tensors`].
    pub fn opt_state_tensors(&self) -> Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        for s in &self.slots {
            for (key, buf) in [("m", &self.m), ("v", &self.v)] {
                out.insert(
                    format!("{key}.{}", s.name),
                    Tensor::from_slice(
                        &buf[s.off..s.off + s.len],
                        s.shape.as_slice(),
                        &Device::Cpu,
                    )?,
                );
            }
        }
        Ok(out)
    }

    /// Restore moments written by [`Self::opt_state_tensors`] (or the reference optimizer) and
    /// the step count.
    pub fn load_opt_state(
        &mut self,
        tensors: &HashMap<String, Tensor>,
        step_t: usize,
    ) -> Result<()> {
        for s in &self.slots {
            for (key, buf) in [("m", &mut self.m), ("v", &mut self.v)] {
                let name = format!("{key}.{}", s.name);
                let t = tensors.get(&name).ok_or_else(|| {
                    LmError::Config(format!("checkpoint lacks optimizer tensor {name}"))
                })?;
                if t.dims() != s.shape.as_slice() {
                    return Err(LmError::Config(format!(
                        "optimizer tensor {name} has shape {:?}, expected {:?}",
                        t.dims(),
                        s.shape
                    )));
                }
                let data = t
                    .to_dtype(candle_core::DType::F32)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                buf[s.off..s.off + s.len].copy_from_slice(&data);
            }
        }
        self.step_t = step_t;
        Ok(())
    }
}
