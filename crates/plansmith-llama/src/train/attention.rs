//! Causal attention over a [`Pack`](super::pack::Pack), forward and backward, without storing
//! score matrices: both passes walk the queries of each segment in blocks of [`BLOCK`] rows,
//! build the block's scores against the keys it may see (the segment's shared prefix, then its
//! own rows up to the block's last), and drop them. The backward recomputes the probabilities.
//! Heads run in parallel; a head's key / value gradients go to its own buffer and the heads of
//! one key/value group are summed afterwards, so no two threads write one element.

use rayon::prelude::*;

use super::kernels::{dot8, exp_shifted, max8, mm, Par};
use super::pack::{Pack, Segment};

/// Query rows per block: bounds the score buffer to `BLOCK x keys` per thread.
const BLOCK: usize = 128;

/// Head-major geometry: q is `[nh][n][hd]`, k and v `[nkv][n][hd]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub n: usize,
    pub nh: usize,
    pub nkv: usize,
    pub hd: usize,
    pub scale: f32,
}

impl Heads {
    fn kv_of(&self, h: usize) -> usize {
        h / (self.nh / self.nkv)
    }
}

/// The key ranges a block of queries `[i0, i1)` of a segment sees: `(first row, count)` of the
/// parent prefix (all of it) and of the segment's own rows `0..i1`.
fn key_ranges(s: &Segment, i1: usize) -> [(usize, usize); 2] {
    [s.parent.unwrap_or((0, 0)), (s.start, i1)]
}

/// `out (rows x nk) = a keys^T` over the key ranges, laid side by side in `out`'s columns
/// (`nk` = the ranges' total length): the scores `q k^T`, or `dY v^T` in the backward.
fn against_keys(
    out: &mut [f32],
    a: &[f32],
    keys: &[f32],
    hd: usize,
    ranges: &[(usize, usize); 2],
    rows: usize,
) {
    let nk = ranges[0].1 + ranges[1].1;
    let mut col = 0;
    for &(start, len) in ranges {
        mm(
            &mut out[col..],
            nk,
            a,
            hd,
            false,
            &keys[start * hd..],
            hd,
            true,
            (rows, len, hd),
            false,
            Par::One,
        );
        col += len;
    }
}

/// Scores of a query block against its keys, masked and turned into probabilities in place.
/// `p` is `rows x nk` with `nk = parent + i1`.
fn probabilities(
    p: &mut [f32],
    q: &[f32],
    k: &[f32],
    g: &Heads,
    ranges: &[(usize, usize); 2],
    i0: usize,
    rows: usize,
) {
    let nk = ranges[0].1 + ranges[1].1;
    against_keys(p, q, k, g.hd, ranges, rows);
    let own0 = ranges[0].1;
    for r in 0..rows {
        let row = &mut p[r * nk..(r + 1) * nk];
        // own key j is visible to query i0 + r iff j <= i0 + r
        let visible = own0 + i0 + r + 1;
        let seen = &mut row[..visible];
        for v in seen.iter_mut() {
            *v *= g.scale;
        }
        let max = max8(seen);
        let inv = 1.0 / exp_shifted(seen, max);
        for v in seen.iter_mut() {
            *v *= inv;
        }
        row[visible..].fill(0.0);
    }
}

/// `y` (head-major, `[nh][n][hd]`) = softmax(scale q k^T + mask) v.
pub(crate) fn forward(pack: &Pack, g: &Heads, q: &[f32], k: &[f32], v: &[f32], y: &mut [f32]) {
    let plane = g.n * g.hd;
    y.par_chunks_mut(plane).enumerate().for_each(|(h, yh)| {
        let kv = g.kv_of(h);
        let (qh, kh, vh) = (
            &q[h * plane..],
            &k[kv * plane..(kv + 1) * plane],
            &v[kv * plane..(kv + 1) * plane],
        );
        let mut p = Vec::new();
        for s in &pack.segments {
            for i0 in (0..s.len).step_by(BLOCK) {
                let rows = BLOCK.min(s.len - i0);
                let ranges = key_ranges(s, i0 + rows);
                let nk = ranges[0].1 + ranges[1].1;
                p.resize(rows * nk, 0.0);
                let qb = &qh[(s.start + i0) * g.hd..];
                probabilities(&mut p, qb, kh, g, &ranges, i0, rows);
                let out = &mut yh[(s.start + i0) * g.hd..(s.start + i0 + rows) * g.hd];
                let mut col = 0;
                for (i, &(start, len)) in ranges.iter().enumerate() {
                    mm(
                        out,
                        g.hd,
                        &p[col..],
                        nk,
                        false,
                        &vh[start * g.hd..],
                        g.hd,
                        false,
                        (rows, g.hd, len),
                        i > 0,
                        Par::One,
                    );
                    col += len;
                }
            }
        }
    });
}

/// Gradients of [`forward`]: from `dy` (head-major) to `dq` (`[nh][n][hd]`, overwritten) and
/// `dk`, `dv` (`[nkv][n][hd]`, overwritten). `scratch` holds `2 * nh * n * hd` floats.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward(
    pack: &Pack,
    g: &Heads,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dy: &[f32],
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let plane = g.n * g.hd;
    scratch.clear();
    scratch.resize(2 * g.nh * plane, 0.0);
    let (dk_h, dv_h) = scratch.split_at_mut(g.nh * plane);
    dq.par_chunks_mut(plane)
        .zip(dk_h.par_chunks_mut(plane))
        .zip(dv_h.par_chunks_mut(plane))
        .enumerate()
        .for_each(|(h, ((dqh, dkh), dvh))| {
            dqh.fill(0.0);
            let kv = g.kv_of(h);
            let (qh, kh, vh) = (
                &q[h * plane..(h + 1) * plane],
                &k[kv * plane..(kv + 1) * plane],
                &v[kv * plane..(kv + 1) * plane],
            );
            let dyh = &dy[h * plane..(h + 1) * plane];
            let (mut p, mut dp) = (Vec::new(), Vec::new());
            for s in &pack.segments {
                for i0 in (0..s.len).step_by(BLOCK) {
                    let rows = BLOCK.min(s.len - i0);
                    let ranges = key_ranges(s, i0 + rows);
                    let nk = ranges[0].1 + ranges[1].1;
                    p.resize(rows * nk, 0.0);
                    dp.resize(rows * nk, 0.0);
                    let r0 = (s.start + i0) * g.hd;
                    let (qb, dyb) = (&qh[r0..r0 + rows * g.hd], &dyh[r0..r0 + rows * g.hd]);
                    probabilities(&mut p, qb, kh, g, &ranges, i0, rows);
                    // dP = dY V^T
                    against_keys(&mut dp, dyb, vh, g.hd, &ranges, rows);
                    // dS = P (dP - rowsum(P dP)) * scale, in dp
                    for r in 0..rows {
                        let (pr, dr) = (&p[r * nk..(r + 1) * nk], &mut dp[r * nk..(r + 1) * nk]);
                        let dot = dot8(pr, dr);
                        for (d, &pv) in dr.iter_mut().zip(pr) {
                            *d = pv * (*d - dot) * g.scale;
                        }
                    }
                    let mut col = 0;
                    for &(start, len) in &ranges {
                        let span = start * g.hd..(start + len) * g.hd;
                        // dQ += dS K ; dK += dS^T Q ; dV += P^T dY
                        mm(
                            &mut dqh[r0..r0 + rows * g.hd],
                            g.hd,
                            &dp[col..],
                            nk,
                            false,
                            &kh[span.clone()],
                            g.hd,
                            false,
                            (rows, g.hd, len),
                            true,
                            Par::One,
                        );
                        mm(
                            &mut dkh[span.clone()],
                            g.hd,
                            &dp[col..],
                            nk,
                            true,
                            qb,
                            g.hd,
                            false,
                            (len, g.hd, rows),
                            true,
                            Par::One,
                        );
                        mm(
                            &mut dvh[span],
                            g.hd,
                            &p[col..],
                            nk,
                            true,
                            dyb,
                            g.hd,
                            false,
                            (len, g.hd, rows),
                            true,
                            Par::One,
                        );
                        col += len;
                    }
                }
            }
        });
    let group = g.nh / g.nkv;
    dk.par_chunks_mut(plane)
        .zip(dv.par_chunks_mut(plane))
        .enumerate()
        .for_each(|(kv, (dkg, dvg))| {
            dkg.fill(0.0);
            dvg.fill(0.0);
            for h in kv * group..(kv + 1) * group {
                for (a, b) in dkg.iter_mut().zip(&dk_h[h * plane..(h + 1) * plane]) {
                    *a += b;
                }
                for (a, b) in dvg.iter_mut().zip(&dv_h[h * plane..(h + 1) * plane]) {
                    *a += b;
                }
            }
        });
}
