//! Causal attention over a [`Pack`](super::pack::Pack), forward and backward, without storing
//! score matrices: both passes walk the queries of each segment in blocks of [`BLOCK`] rows,
//! build the block's scores against the keys it may see (the segment's shared prefix, then its
//! own rows up to the block's last), and drop them. The backward recomputes the probabilities.
//! Heads run in parallel; a head's key / value gradients go to its own buffer and the heads of
//! one key/value group are summed afterwards, so no two threads write one element.

use rayon::prelude::*;

use super::bf16::{product, Lhs, PackedB};
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
    /// Products in bf16 (inputs rounded, sums in f32), as the frozen base's are.
    pub bf16: bool,
    /// A sliding-window layer's window: a query sees only the last `w` positions, its own
    /// included (Gemma 3's local layers).
    pub window: Option<usize>,
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

/// One head's keys and values and the four products attention makes with them, in f32 or
/// bf16. Key ranges are `(first row, count)` and always begin a segment, so in bf16 each
/// segment's K and V are packed once per head (as `K^T`, `K`, `V^T`, `V`) and every query
/// block takes the leading rows it may see.
struct HeadKv<'a> {
    k: &'a [f32],
    v: &'a [f32],
    hd: usize,
    /// bf16 only: per segment (in `starts` order) its packs, and scratch for the operands.
    starts: Vec<usize>,
    packs: Vec<[PackedB; 4]>,
    lhs: Lhs,
    rhs: PackedB,
}

/// Which pack of a segment: `B = K^T` (scores), `B = V` (outputs), `B = V^T` (dP), `B = K` (dQ).
const KT: usize = 0;
const V: usize = 1;
const VT: usize = 2;
const K: usize = 3;

impl<'a> HeadKv<'a> {
    fn new(pack: &Pack, g: &Heads, k: &'a [f32], v: &'a [f32], backward: bool) -> Self {
        let mut kv = Self {
            k,
            v,
            hd: g.hd,
            starts: Vec::new(),
            packs: Vec::new(),
            lhs: Lhs::new(),
            rhs: PackedB::empty(),
        };
        if g.bf16 {
            let hd = g.hd;
            for s in &pack.segments {
                let (ks, vs) = (&k[s.start * hd..], &v[s.start * hd..]);
                let mut p = [(); 4].map(|_| PackedB::empty());
                p[KT].refill(hd, s.len, |d, j| ks[j * hd + d]);
                p[V].refill(s.len, hd, |j, d| vs[j * hd + d]);
                if backward {
                    p[VT].refill(hd, s.len, |d, j| vs[j * hd + d]);
                    p[K].refill(s.len, hd, |j, d| ks[j * hd + d]);
                }
                kv.starts.push(s.start);
                kv.packs.push(p);
            }
        }
        kv
    }

    fn packed(&self, start: usize, which: usize) -> &PackedB {
        let i = self
            .starts
            .binary_search(&start)
            .expect("attention key ranges begin a segment");
        &self.packs[i][which]
    }

    /// `out[.., 0..len] = a keys[range]^T` (`a`: rows x hd): the scores with `keys = K`, or dP
    /// with `a = dY` and `keys = V`.
    fn against(
        &mut self,
        out: &mut [f32],
        ldo: usize,
        a: &[f32],
        rows: usize,
        range: (usize, usize),
        values: bool,
    ) {
        let (start, len) = range;
        if self.starts.is_empty() {
            let keys = if values { self.v } else { self.k };
            let hd = self.hd;
            mm(
                out,
                ldo,
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
            return;
        }
        self.lhs.rows(a, self.hd, rows, self.hd);
        let b = self.packed(start, if values { VT } else { KT });
        product(out, ldo, &self.lhs, b, len, false);
    }

    /// `out (rows x hd) [+]= p[.., 0..len] rows[range]` (`p` with row stride `ldp`): outputs
    /// with `P` and `V`, or dQ with dS and `K`.
    #[allow(clippy::too_many_arguments)]
    fn times(
        &mut self,
        out: &mut [f32],
        p: &[f32],
        ldp: usize,
        rows: usize,
        range: (usize, usize),
        keys: bool,
        acc: bool,
    ) {
        let (start, len) = range;
        let hd = self.hd;
        if self.starts.is_empty() {
            let m = if keys { self.k } else { self.v };
            mm(
                out,
                hd,
                p,
                ldp,
                false,
                &m[start * hd..],
                hd,
                false,
                (rows, hd, len),
                acc,
                Par::One,
            );
            return;
        }
        self.lhs.rows(p, ldp, rows, len);
        let b = self.packed(start, if keys { K } else { V });
        product(out, hd, &self.lhs, b, hd, acc);
    }

    /// `out[range] (len x hd) += p[.., 0..len]^T x` (`x`: rows x hd): dK with dS and Q, dV with
    /// P and dY.
    fn transposed_times(
        &mut self,
        out: &mut [f32],
        p: &[f32],
        ldp: usize,
        x: &[f32],
        rows: usize,
        len: usize,
    ) {
        let hd = self.hd;
        if self.starts.is_empty() {
            mm(
                out,
                hd,
                p,
                ldp,
                true,
                x,
                hd,
                false,
                (len, hd, rows),
                true,
                Par::One,
            );
            return;
        }
        self.lhs.columns(p, ldp, len, rows);
        self.rhs.refill(rows, hd, |r, d| x[r * hd + d]);
        product(out, hd, &self.lhs, &self.rhs, hd, true);
    }
}

/// Scores of a query block against its keys, masked and turned into probabilities in place.
/// `p` is `rows x nk` with `nk = parent + i1`.
fn probabilities(
    p: &mut [f32],
    q: &[f32],
    kv: &mut HeadKv,
    g: &Heads,
    ranges: &[(usize, usize); 2],
    i0: usize,
    rows: usize,
) {
    let nk = ranges[0].1 + ranges[1].1;
    let mut col = 0;
    for &range in ranges {
        if range.1 > 0 {
            kv.against(&mut p[col..], nk, q, rows, range, false);
        }
        col += range.1;
    }
    let own0 = ranges[0].1;
    for r in 0..rows {
        let row = &mut p[r * nk..(r + 1) * nk];
        // own key j is visible to query i0 + r iff j <= i0 + r; a key's column is its
        // position (the parent prefix holds positions 0..own0, the segment's rows follow), so
        // a window keeps the columns from `visible - w` on
        let visible = own0 + i0 + r + 1;
        let first = g.window.map_or(0, |w| visible.saturating_sub(w));
        row[..first].fill(0.0);
        let seen = &mut row[first..visible];
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
        let qh = &q[h * plane..];
        let (kh, vh) = (
            &k[kv * plane..(kv + 1) * plane],
            &v[kv * plane..(kv + 1) * plane],
        );
        let mut kv = HeadKv::new(pack, g, kh, vh, false);
        let mut p = Vec::new();
        for s in &pack.segments {
            // a key's column is its position: the parent holds positions 0..len, then ours
            debug_assert_eq!(s.pos0, s.parent.map_or(0, |(_, len)| len));
            for i0 in (0..s.len).step_by(BLOCK) {
                let rows = BLOCK.min(s.len - i0);
                let ranges = key_ranges(s, i0 + rows);
                let nk = ranges[0].1 + ranges[1].1;
                p.resize(rows * nk, 0.0);
                let qb = &qh[(s.start + i0) * g.hd..];
                probabilities(&mut p, qb, &mut kv, g, &ranges, i0, rows);
                let out = &mut yh[(s.start + i0) * g.hd..(s.start + i0 + rows) * g.hd];
                out.fill(0.0);
                let mut col = 0;
                for &range in &ranges {
                    if range.1 > 0 {
                        kv.times(out, &p[col..], nk, rows, range, false, true);
                    }
                    col += range.1;
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
            let qh = &q[h * plane..(h + 1) * plane];
            let (kh, vh) = (
                &k[kv * plane..(kv + 1) * plane],
                &v[kv * plane..(kv + 1) * plane],
            );
            let mut kv = HeadKv::new(pack, g, kh, vh, true);
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
                    probabilities(&mut p, qb, &mut kv, g, &ranges, i0, rows);
                    // dP = dY V^T
                    let mut col = 0;
                    for &range in &ranges {
                        if range.1 > 0 {
                            kv.against(&mut dp[col..], nk, dyb, rows, range, true);
                        }
                        col += range.1;
                    }
                    // dS = P (dP - rowsum(P dP)) * scale, in dp
                    for r in 0..rows {
                        let (pr, dr) = (&p[r * nk..(r + 1) * nk], &mut dp[r * nk..(r + 1) * nk]);
                        let dot = dot8(pr, dr);
                        for (d, &pv) in dr.iter_mut().zip(pr) {
                            *d = pv * (*d - dot) * g.scale;
                        }
                    }
                    let mut col = 0;
                    for &range in &ranges {
                        let (start, len) = range;
                        if len > 0 {
                            let span = start * g.hd..(start + len) * g.hd;
                            // dQ += dS K ; dK += dS^T Q ; dV += P^T dY
                            let dqb = &mut dqh[r0..r0 + rows * g.hd];
                            kv.times(dqb, &dp[col..], nk, rows, range, true, true);
                            kv.transposed_times(
                                &mut dkh[span.clone()],
                                &dp[col..],
                                nk,
                                qb,
                                rows,
                                len,
                            );
                            kv.transposed_times(&mut dvh[span], &p[col..], nk, dyb, rows, len);
                        }
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
