//! The frozen base in bfloat16 for the LoRA training step, on CPUs with AVX-512 BF16.
//!
//! The frozen projections are ~60% of a training step, all of it in f32 matrix products. AVX-512
//! BF16's `vdpbf16ps` multiplies pairs of bf16 values and accumulates in f32 at twice the
//! multiply-adds per instruction of an f32 FMA, and the weights take half the memory. So each
//! frozen matrix is stored twice in bf16 (laid out for `x W^T` and for `dy W`, the same bytes as
//! one f32 copy), the activations are rounded to bf16 on the way in, and every sum is kept in
//! f32 — the mixed precision PyTorch's bf16 autocast uses. The LoRA matrices, their gradients
//! and AdamW stay f32. The f32 path stays for CPUs without BF16 and for the exact checks against
//! PEFT.
//!
//! Layout: `B` (k x n) is cut into panels of [`NR`] columns; within a panel, k runs in pairs and
//! each pair holds, per column, `(B[2q][c], B[2q+1][c])` — one `vdpbf16ps` operand per 16
//! columns. `A` (rows x k) becomes rows of u32 pairs `(A[r][2q], A[r][2q+1])`, broadcast one at
//! a time against the panel.

use rayon::prelude::*;
use std::cell::RefCell;

/// Columns per panel (two 16-lane registers).
const NR: usize = 32;
/// Rows per micro-kernel call (16 accumulator registers with `NR`).
const MR: usize = 8;
/// Rows per task: the task's bf16 rows of `A` (`ROWS x k/2 x 4` bytes) stay in L2 while it
/// walks its panels.
const ROWS: usize = 96;

/// Whether this CPU runs the bf16 path.
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Round to the nearest bf16, ties to even (what `vcvtne2ps2bf16` does; NaN stays NaN).
pub(crate) fn to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7fc0;
    }
    let b = x.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// A frozen `k x n` right-hand side in panels (see the module docs).
pub(crate) struct PackedB {
    k: usize,
    n: usize,
    data: Vec<u16>,
}

impl PackedB {
    /// Pack `B[kk][c] = b(kk, c)`.
    pub fn new(k: usize, n: usize, b: impl Fn(usize, usize) -> f32 + Sync) -> Self {
        let kp = k.div_ceil(2);
        let mut data = vec![0u16; n.div_ceil(NR) * kp * 2 * NR];
        data.par_chunks_mut(kp * 2 * NR)
            .enumerate()
            .for_each(|(p, panel)| {
                for q in 0..kp {
                    for c in 0..NR {
                        let col = p * NR + c;
                        for t in 0..2 {
                            let kk = 2 * q + t;
                            if col < n && kk < k {
                                panel[q * 2 * NR + 2 * c + t] = to_bf16(b(kk, col));
                            }
                        }
                    }
                }
            });
        Self { k, n, data }
    }

    /// An empty pack to [`refill`](Self::refill) (no allocation until then).
    pub fn empty() -> Self {
        Self {
            k: 0,
            n: 0,
            data: Vec::new(),
        }
    }

    /// Repack in place on this thread, reusing the allocation: for the small per-head packs
    /// of attention, made inside the (already parallel) head loop.
    pub fn refill(&mut self, k: usize, n: usize, b: impl Fn(usize, usize) -> f32) {
        let kp = k.div_ceil(2);
        self.data.clear();
        self.data.resize(n.div_ceil(NR) * kp * 2 * NR, 0);
        for (p, panel) in self.data.chunks_exact_mut(kp * 2 * NR).enumerate() {
            for c in 0..NR.min(n - p * NR) {
                let col = p * NR + c;
                for kk in 0..k {
                    panel[(kk / 2) * 2 * NR + 2 * c + kk % 2] = to_bf16(b(kk, col));
                }
            }
        }
        (self.k, self.n) = (k, n);
    }

    /// For `y = x W^T` with `w` stored `(out, inp)`: `B = W^T`, k = inp, n = out.
    pub fn for_linear(w: &[f32], inp: usize, out: usize) -> Self {
        Self::new(inp, out, |kk, c| w[c * inp + kk])
    }

    /// For `dx = dy W`: `B = W`, k = out, n = inp.
    pub fn for_linear_back(w: &[f32], inp: usize, out: usize) -> Self {
        Self::new(out, inp, |kk, c| w[kk * inp + c])
    }

    pub fn bytes(&self) -> usize {
        2 * self.data.len()
    }
}

/// The bf16 pairs of the `m x k` left-hand side of a [`product`], rows padded with zeros to a
/// multiple of `MR`.
pub(crate) struct Lhs {
    data: Vec<u32>,
    m: usize,
    k: usize,
    /// Pair-major (`data[q padded_m + i]`) rather than row-major (`data[i kp + q]`).
    pair_major: bool,
}

impl Lhs {
    pub fn new() -> Self {
        Self {
            data: Vec::new(),
            m: 0,
            k: 0,
            pair_major: false,
        }
    }

    /// `A(i, kk) = a[i lda + kk]` (row-major pairs, each row converted sixteen pairs at a time).
    pub fn rows(&mut self, a: &[f32], lda: usize, m: usize, k: usize) {
        assert!(supported(), "bf16 pairs on a CPU without AVX-512 BF16");
        let kp = k.div_ceil(2);
        self.data.clear();
        self.data.resize(m.div_ceil(MR) * MR * kp, 0);
        for (i, row) in self.data.chunks_exact_mut(kp.max(1)).take(m).enumerate() {
            // SAFETY: `supported()` asserted above.
            unsafe { pairs(&a[i * lda..i * lda + k], row) }
        }
        (self.m, self.k, self.pair_major) = (m, k, false);
    }

    /// `A(i, kk) = a[kk lda + i]`, a transposed operand: each pair of `a`'s rows becomes one
    /// contiguous run of pairs (pair-major), so the conversion stays vectorized.
    pub fn columns(&mut self, a: &[f32], lda: usize, m: usize, k: usize) {
        assert!(supported(), "bf16 pairs on a CPU without AVX-512 BF16");
        let (kp, mp) = (k.div_ceil(2), m.div_ceil(MR) * MR);
        self.data.clear();
        self.data.resize(kp * mp, 0);
        for (q, run) in self.data.chunks_exact_mut(mp.max(1)).take(kp).enumerate() {
            let lo = &a[2 * q * lda..2 * q * lda + m];
            let hi = (2 * q + 1 < k).then(|| &a[(2 * q + 1) * lda..(2 * q + 1) * lda + m]);
            // SAFETY: `supported()` asserted above.
            unsafe { interleave(lo, hi, &mut run[..m]) }
        }
        (self.m, self.k, self.pair_major) = (m, k, true);
    }
}

/// `dst[i] = (bf16(lo[i]), bf16(hi[i]))`, `hi` zero when absent.
#[cfg_attr(
    target_arch = "x86_64",
    target_feature(enable = "avx512f,avx512bw,avx512bf16")
)]
unsafe fn interleave(lo: &[f32], hi: Option<&[f32]>, dst: &mut [u32]) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(hi) = hi {
        use std::arch::x86_64::*;
        // bf16 lanes 0..16 are lo, 16..32 hi; the permutation pairs lane j with 16 + j.
        let order = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        while i + 16 <= dst.len() {
            let l = _mm512_loadu_ps(lo.as_ptr().add(i));
            let h = _mm512_loadu_ps(hi.as_ptr().add(i));
            let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(h, l));
            let v = _mm512_permutexvar_epi16(order, both);
            _mm512_storeu_si512(dst.as_mut_ptr().add(i) as *mut _, v);
            i += 16;
        }
    }
    for j in i..dst.len() {
        let h = hi.map_or(0, |h| to_bf16(h[j]) as u32);
        dst[j] = to_bf16(lo[j]) as u32 | (h << 16);
    }
}

/// `C (m x n, row stride ldc) [+]= L B[0..k, 0..n]` on this thread, `m` and `k` the left-hand
/// side's; `k` and `n` may be less than the pack's (the keys a query block may see of a
/// segment packed whole).
pub(crate) fn product(c: &mut [f32], ldc: usize, lhs: &Lhs, b: &PackedB, n: usize, acc: bool) {
    let (m, k) = (lhs.m, lhs.k);
    if m == 0 || n == 0 {
        return;
    }
    let (kp, full) = (k.div_ceil(2), b.k.div_ceil(2));
    assert!(supported(), "bf16 product on a CPU without AVX-512 BF16");
    assert!(
        k <= b.k && n <= b.n,
        "bf16 product: {k} x {n} exceeds the pack"
    );
    assert!(c.len() >= (m - 1) * ldc + n, "bf16 product: short output");
    let mp = m.div_ceil(MR) * MR;
    let (rs, qs) = if lhs.pair_major { (1, mp) } else { (kp, 1) };
    for p in 0..n.div_ceil(NR) {
        let panel = &b.data[p * full * 2 * NR..(p + 1) * full * 2 * NR];
        let cols = (n - p * NR).min(NR);
        for r in (0..m).step_by(MR) {
            // SAFETY: `supported()` holds; rows `r..r + MR` of `lhs` exist (padded), the panel
            // holds `full >= kp` pairs, and the block written is inside `c` (asserted above).
            unsafe {
                kernel(
                    lhs.data[r * rs..].as_ptr(),
                    (rs, qs),
                    kp,
                    panel.as_ptr(),
                    c.as_mut_ptr().add(r * ldc + p * NR),
                    ldc,
                    (m - r).min(MR),
                    cols,
                    acc,
                )
            }
        }
    }
}

thread_local! {
    /// The bf16 pairs of the current left-hand side, grown to the largest seen.
    static LHS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// A pointer the tasks of one product share; each task writes a disjoint block of `C`.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: tasks write disjoint (row block, panel group) rectangles of the one output.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    /// By value, so a closure captures the whole (Send) wrapper rather than its raw field.
    fn at(self, offset: usize) -> *mut f32 {
        // SAFETY: the caller's offset lies inside the output (see `matmul`).
        unsafe { self.0.add(offset) }
    }
}

/// `C (rows x n) [+]= A B`, `A` row-major `rows x k` in f32 (rounded to bf16 here), sums in f32.
///
/// Panics if this CPU lacks AVX-512 BF16 (callers build a [`PackedB`] only where
/// [`supported`] holds) or if a slice is shorter than the shapes say.
pub(crate) fn matmul(c: &mut [f32], a: &[f32], rows: usize, b: &PackedB, acc: bool) {
    let (k, n) = (b.k, b.n);
    assert!(supported(), "bf16 product on a CPU without AVX-512 BF16");
    assert!(
        a.len() >= rows * k && c.len() >= rows * n,
        "bf16 product: short slice"
    );
    if rows == 0 || n == 0 {
        return;
    }
    let kp = k.div_ceil(2);
    let padded = rows.div_ceil(MR) * MR;
    LHS.with(|cell| {
        let mut lhs = cell.borrow_mut();
        if lhs.len() < padded * kp {
            lhs.resize(padded * kp, 0);
        }
        let lhs = &mut lhs[..padded * kp];
        lhs.par_chunks_mut(kp).enumerate().for_each(|(r, dst)| {
            if r < rows {
                // SAFETY: `supported()` was asserted above.
                unsafe { pairs(&a[r * k..(r + 1) * k], dst) }
            } else {
                dst.fill(0);
            }
        });
        let lhs: &[u32] = lhs;
        let panels = n.div_ceil(NR);
        let row_blocks = padded.div_ceil(ROWS);
        // Enough tasks for every thread even when a product has few rows (the output head's
        // chunks, one suffix): split the panels too.
        let threads = rayon::current_num_threads();
        let groups = (2 * threads).div_ceil(row_blocks).clamp(1, panels);
        let per_group = panels.div_ceil(groups);
        let out = Out(c.as_mut_ptr());
        (0..row_blocks * groups).into_par_iter().for_each(|task| {
            let (rb, g) = (task / groups, task % groups);
            let r0 = rb * ROWS;
            let r1 = (r0 + ROWS).min(padded);
            for p in g * per_group..((g + 1) * per_group).min(panels) {
                let panel = &b.data[p * kp * 2 * NR..(p + 1) * kp * 2 * NR];
                let cols = (n - p * NR).min(NR);
                for r in (r0..r1).step_by(MR) {
                    let live = rows.saturating_sub(r).min(MR);
                    if live == 0 {
                        break;
                    }
                    // SAFETY: `supported()` holds; the block `[r, r + live) x [p NR, p NR + cols)`
                    // lies inside `c` (rows x n) and no other task writes it; `lhs` has `MR`
                    // padded rows of `kp` pairs from `r`, the panel `kp` pairs of `NR` columns.
                    unsafe {
                        kernel(
                            lhs[r * kp..].as_ptr(),
                            (kp, 1),
                            kp,
                            panel.as_ptr(),
                            out.at(r * n + p * NR),
                            n,
                            live,
                            cols,
                            acc,
                        )
                    }
                }
            }
        });
    });
}

/// Round one row to bf16 pairs (`dst.len() == x.len().div_ceil(2)`).
#[cfg_attr(
    target_arch = "x86_64",
    target_feature(enable = "avx512f,avx512bw,avx512bf16")
)]
unsafe fn pairs(x: &[f32], dst: &mut [u32]) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        while i + 32 <= x.len() {
            let lo = _mm512_loadu_ps(x.as_ptr().add(i));
            let hi = _mm512_loadu_ps(x.as_ptr().add(i + 16));
            // bf16 lane j of the result is float j of (lo, hi): consecutive k pairs per u32.
            let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(dst.as_mut_ptr().add(i / 2) as *mut _, v);
            i += 32;
        }
    }
    while i < x.len() {
        let lo = to_bf16(x[i]) as u32;
        let hi = x.get(i + 1).map_or(0, |&v| to_bf16(v) as u32);
        dst[i / 2] = lo | (hi << 16);
        i += 2;
    }
}

/// `C[0..live, 0..cols] [+]= A[0..MR] x panel`, pair `q` of row `r` of `A` at `a[r rs + q qs]`
/// (row-major pairs: `rs = kp, qs = 1`; pair-major: `rs = 1`, `qs` = the padded rows).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    a: *const u32,
    (rs, qs): (usize, usize),
    kp: usize,
    panel: *const u16,
    c: *mut f32,
    ldc: usize,
    live: usize,
    cols: usize,
    acc: bool,
) {
    use std::arch::x86_64::*;
    let mut s = [[_mm512_setzero_ps(); 2]; MR];
    for q in 0..kp {
        let b0: __m512bh =
            std::mem::transmute(_mm512_loadu_si512(panel.add(q * 2 * NR) as *const _));
        let b1: __m512bh =
            std::mem::transmute(_mm512_loadu_si512(panel.add(q * 2 * NR + NR) as *const _));
        for (r, row) in s.iter_mut().enumerate() {
            let av: __m512bh =
                std::mem::transmute(_mm512_set1_epi32(*a.add(r * rs + q * qs) as i32));
            row[0] = _mm512_dpbf16_ps(row[0], av, b0);
            row[1] = _mm512_dpbf16_ps(row[1], av, b1);
        }
    }
    for (r, row) in s.iter().enumerate().take(live) {
        let dst = c.add(r * ldc);
        if cols == NR {
            let (mut v0, mut v1) = (row[0], row[1]);
            if acc {
                v0 = _mm512_add_ps(v0, _mm512_loadu_ps(dst));
                v1 = _mm512_add_ps(v1, _mm512_loadu_ps(dst.add(16)));
            }
            _mm512_storeu_ps(dst, v0);
            _mm512_storeu_ps(dst.add(16), v1);
        } else {
            let mut tmp = [0f32; NR];
            _mm512_storeu_ps(tmp.as_mut_ptr(), row[0]);
            _mm512_storeu_ps(tmp.as_mut_ptr().add(16), row[1]);
            for (j, v) in tmp.iter().enumerate().take(cols) {
                *dst.add(j) = if acc { *dst.add(j) + v } else { *v };
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel(
    _: *const u32,
    _: usize,
    _: *const u16,
    _: *mut f32,
    _: usize,
    _: usize,
    _: usize,
    _: bool,
) {
    unreachable!("bf16 products run only where `supported()` holds")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(
        a: &[f32],
        rows: usize,
        k: usize,
        n: usize,
        b: impl Fn(usize, usize) -> f32,
    ) -> Vec<f32> {
        let mut c = vec![0f32; rows * n];
        for r in 0..rows {
            for j in 0..n {
                c[r * n + j] = (0..k).map(|kk| a[r * k + kk] * b(kk, j)).sum();
            }
        }
        c
    }

    /// Small integers are exact in bf16 and their sums exact in f32, so the packed product must
    /// equal the naive one bit for bit — at every ragged edge (rows not a multiple of `MR`,
    /// columns not of `NR`, odd k) and when accumulating.
    #[test]
    fn bf16_products_are_exact_on_bf16_values_at_every_edge() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        for &(rows, k, n) in &[
            (1, 2, 1),
            (7, 5, 33),
            (8, 64, 32),
            (13, 35, 70),
            (200, 96, 65),
        ] {
            let a: Vec<f32> = (0..rows * k).map(|i| ((i * 7 % 11) as f32) - 5.0).collect();
            let w: Vec<f32> = (0..n * k).map(|i| ((i * 5 % 13) as f32) - 6.0).collect();
            // w stored (out = n, inp = k)
            let want = naive(&a, rows, k, n, |kk, j| w[j * k + kk]);
            let mut got = vec![0f32; rows * n];
            matmul(&mut got, &a, rows, &PackedB::for_linear(&w, k, n), false);
            assert_eq!(got, want, "linear {rows}x{k}x{n}");
            // dy (rows x n) W (n x k): for_linear_back with out = n, inp = k
            let dy: Vec<f32> = (0..rows * n).map(|i| ((i * 3 % 7) as f32) - 3.0).collect();
            let mut back = vec![1f32; rows * k];
            let mut want = naive(&dy, rows, n, k, |o, i| w[o * k + i]);
            want.iter_mut().for_each(|v| *v += 1.0);
            matmul(
                &mut back,
                &dy,
                rows,
                &PackedB::for_linear_back(&w, k, n),
                true,
            );
            assert_eq!(back, want, "linear_back {rows}x{n}x{k}");
        }
    }

    /// The single-thread products attention uses: a transposed (pair-major) left-hand side,
    /// and a pack used for fewer keys / columns than it holds, exact on bf16 values.
    #[test]
    fn single_thread_products_read_transposed_operands_and_pack_prefixes() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        for &(m, k, n) in &[(1, 1, 1), (9, 7, 40), (37, 33, 64), (100, 64, 17)] {
            // A stored transposed: a[kk * m + i]
            let at: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 9) as f32) - 4.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32) - 5.0).collect();
            // the pack holds 3 more rows of k and 5 more columns than the product uses
            let (kb, nb) = (k + 3, n + 5);
            let big: Vec<f32> = (0..kb * nb).map(|i| ((i % 13) as f32) - 6.0).collect();
            let mut packed = PackedB::empty();
            packed.refill(kb, nb, |kk, c| {
                if kk < k && c < n {
                    b[kk * n + c]
                } else {
                    big[kk * nb + c]
                }
            });
            let want = naive(
                &(0..m * k)
                    .map(|x| at[(x % k) * m + x / k])
                    .collect::<Vec<_>>(),
                m,
                k,
                n,
                |kk, c| b[kk * n + c],
            );
            let mut lhs = Lhs::new();
            lhs.columns(&at, m, m, k);
            let mut got = vec![0f32; m * n];
            product(&mut got, n, &lhs, &packed, n, false);
            assert_eq!(got, want, "transposed {m}x{k}x{n}");
            // the same rows given row-major, accumulated twice
            let a: Vec<f32> = (0..m * k).map(|x| at[(x % k) * m + x / k]).collect();
            lhs.rows(&a, k, m, k);
            product(&mut got, n, &lhs, &packed, n, true);
            let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
            assert_eq!(got, twice, "row-major {m}x{k}x{n}");
        }
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(to_bf16(f32::NAN) & 0x7fc0, 0x7fc0);
    }
}
