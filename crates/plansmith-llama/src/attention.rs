//! Causal attention of new positions against the KV cache, reading the cache in place.
//!
//! candle's matmuls need the cache narrowed to the filled positions; that view is not
//! contiguous, so every call packed all of a layer's K and V before multiplying. For decode
//! that copy was the whole cost: at a 1,500-token context it outweighed every weight matmul of
//! the step. Here each (KV head, query position) is one work item: it scores the keys for all
//! query heads sharing that KV head, keeps a softmax (max, sum, weighted V), and writes the
//! result. When there are too few such items to occupy the threads (decode), each query's keys
//! are split into blocks whose partial softmaxes are merged afterwards.
//!
//! Every query runs the same arithmetic whatever the call's size, so a prompt prefilled in
//! chunks (or restored from a prefix snapshot and continued) gets the logits of a one-shot
//! prefill. That matters more than it seems: activations are quantized before each matmul, so
//! a 1e-6 difference in attention can flip a rounding and move logits by tenths.

use candle_core::{CpuStorage, Device, Layout, Storage, Tensor};

use crate::error::{LlamaError, Result};

/// Keys per softmax block.
const KEY_BLOCK: usize = 256;
/// Below this many (KV head, query) pairs, blocks rather than pairs are the work items.
const MIN_ITEMS: usize = 16;

/// Shapes of one attention call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttnShape {
    /// Query heads.
    pub nh: usize,
    /// KV heads (`nh % nkv == 0`).
    pub nkv: usize,
    pub hd: usize,
    /// Positions already in the cache before this call.
    pub p0: usize,
    /// New positions (queries); their K / V are already written at `p0..p0 + l`.
    pub l: usize,
    /// Positions allocated per KV head in the cache buffers.
    pub cap: usize,
    /// A sliding-window layer's span: a query at position `p` sees keys `p + 1 - window ..= p`
    /// (Gemma 3's local layers). `None`: every earlier key.
    pub window: Option<usize>,
}

impl AttnShape {
    /// The keys query `i` sees: `first..end`.
    fn keys(&self, i: usize) -> (usize, usize) {
        let end = self.p0 + i + 1;
        let first = self.window.map_or(0, |w| end.saturating_sub(w));
        (first, end)
    }

    /// The key blocks query `i` touches: `b0..b1`.
    fn blocks(&self, i: usize) -> std::ops::Range<usize> {
        let (first, end) = self.keys(i);
        first / KEY_BLOCK..end.div_ceil(KEY_BLOCK)
    }
}

/// The values of a contiguous f32 CPU tensor's storage.
fn cpu_f32<'a>(storage: &'a Storage, layout: &Layout) -> Result<&'a [f32]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        return Err(LlamaError::State(
            "attention input is not contiguous".into(),
        ));
    };
    match storage {
        Storage::Cpu(CpuStorage::F32(v)) => Ok(&v[start..end]),
        _ => Err(LlamaError::State(
            "attention input is not f32 on the CPU".into(),
        )),
    }
}

/// `softmax(scale * q k^T) v` for queries `q [1, nh, l, hd]` (positions `p0..p0 + l`) over
/// the caches `k`, `v` `[nkv, cap, hd]`, each query seeing positions up to its own (within the
/// shape's window, if any). Returns `[l, nh * hd]`.
pub(crate) fn cached_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    shape: AttnShape,
    scale: f32,
) -> Result<Tensor> {
    let AttnShape {
        nh,
        nkv,
        hd,
        p0,
        l,
        cap,
        window,
    } = shape;
    if nkv == 0
        || nh % nkv != 0
        || p0 + l > cap
        || q.elem_count() != nh * l * hd
        || window == Some(0)
    {
        return Err(LlamaError::State(format!(
            "attention shapes do not fit: {shape:?}"
        )));
    }
    // The queries are small; the caches are read in place under their storage locks.
    let q = q.flatten_all()?.to_vec1::<f32>()?;
    let (k_storage, k_layout) = k.storage_and_layout();
    let (v_storage, v_layout) = v.storage_and_layout();
    let (k, v) = (
        cpu_f32(&k_storage, k_layout)?,
        cpu_f32(&v_storage, v_layout)?,
    );
    if k.len() != nkv * cap * hd || v.len() != nkv * cap * hd {
        return Err(LlamaError::State(format!(
            "KV cache of {} / {} values does not fit {shape:?}",
            k.len(),
            v.len()
        )));
    }
    let out = attend(&q, k, v, shape, scale);
    Ok(Tensor::from_vec(out, (l, nh * hd), &Device::Cpu)?)
}

/// One work item: KV head `kh`, query `i`, keys `j0..j1`.
#[derive(Clone, Copy)]
struct Item {
    kh: usize,
    i: usize,
    j0: usize,
    j1: usize,
}

/// Raw output pointer for the pool's threads, which write disjoint ranges.
struct SyncPtr(*mut f32);
// SAFETY: only used for disjoint writes, see `attend`.
unsafe impl Sync for SyncPtr {}
unsafe impl Send for SyncPtr {}

impl SyncPtr {
    // A method, not a field access: closures would otherwise capture the bare pointer.
    fn get(&self) -> *mut f32 {
        self.0
    }
}

fn attend(q: &[f32], k: &[f32], v: &[f32], s: AttnShape, scale: f32) -> Vec<f32> {
    attend_with(simd_available(), q, k, v, s, scale)
}

/// `attend` with the vector path (`fast`, only if available) or the portable one.
///
/// A query's keys are always scored in blocks of [`KEY_BLOCK`] whose softmax partials are
/// merged in block order by [`merge`]; only where the blocks run differs. With enough (KV head,
/// query) pairs each pair is one work item that runs and merges its blocks itself; with few
/// (decode) every block is an item of its own and the merge runs after the pool. Either way a
/// query gets the same arithmetic, whatever the size of the call.
fn attend_with(fast: bool, q: &[f32], k: &[f32], v: &[f32], s: AttnShape, scale: f32) -> Vec<f32> {
    let fast = fast && simd_available();
    let group = s.nh / s.nkv;
    // Per block and group head: max score, sum of exp, then hd weighted-V values.
    let stride = group * (2 + s.hd);
    let block_item = |kh: usize, i: usize, b: usize| {
        let (first, end) = s.keys(i);
        Item {
            kh,
            i,
            j0: first.max(b * KEY_BLOCK),
            j1: end.min((b + 1) * KEY_BLOCK),
        }
    };
    let run_block = |it: Item, scores: &mut [f32], out: &mut [f32]| {
        #[cfg(target_arch = "x86_64")]
        if fast {
            // SAFETY: `simd_available` checked AVX2 and FMA.
            unsafe { item_avx2(q, k, v, s, scale, it, scores, out) };
            return;
        }
        let _ = fast;
        item_body::<Portable>(q, k, v, s, scale, it, scores, out);
    };
    let mut y = vec![0f32; s.l * s.nh * s.hd];
    let pool = candle_core::utils::barrier_pool();
    if s.nkv * s.l >= MIN_ITEMS {
        let y_ptr = SyncPtr(y.as_mut_ptr());
        pool.execute_chunked(s.nkv * s.l, |range| {
            let mut scores = vec![0f32; group * KEY_BLOCK];
            let mut partial = Vec::new();
            for pair in range {
                let (kh, i) = (pair / s.l, pair % s.l);
                let blocks = s.blocks(i);
                partial.resize(blocks.len() * stride, 0.0);
                for (b, out) in blocks.zip(partial.chunks_exact_mut(stride)) {
                    run_block(block_item(kh, i, b), &mut scores, out);
                }
                for g in 0..group {
                    let h = kh * group + g;
                    // SAFETY: (query i, head h) owns `y[(i * nh + h) * hd..][..hd]`, in bounds
                    // and written by this pair only; `y` outlives the pool call.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(y_ptr.get().add((i * s.nh + h) * s.hd), s.hd)
                    };
                    merge(&partial, stride, g * (2 + s.hd), s.hd, dst);
                }
            }
        });
    } else {
        let mut items = Vec::new();
        for kh in 0..s.nkv {
            for i in 0..s.l {
                items.extend(s.blocks(i).map(|b| block_item(kh, i, b)));
            }
        }
        let mut partial = vec![0f32; items.len() * stride];
        let part_ptr = SyncPtr(partial.as_mut_ptr());
        pool.execute_chunked(items.len(), |range| {
            let mut scores = vec![0f32; group * KEY_BLOCK];
            for idx in range {
                // SAFETY: item `idx` owns `partial[idx * stride..][..stride]`, in bounds;
                // `partial` outlives the pool call.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(part_ptr.get().add(idx * stride), stride)
                };
                run_block(items[idx], &mut scores, out);
            }
        });
        // Items are ordered by (KV head, query, block): merge each pair's run of blocks.
        let mut idx = 0;
        for kh in 0..s.nkv {
            for i in 0..s.l {
                let nb = s.blocks(i).len();
                let part = &partial[idx * stride..(idx + nb) * stride];
                for g in 0..group {
                    let h = kh * group + g;
                    let dst = &mut y[(i * s.nh + h) * s.hd..][..s.hd];
                    merge(part, stride, g * (2 + s.hd), s.hd, dst);
                }
                idx += nb;
            }
        }
    }
    y
}

/// Softmax-weighted V of one (query, head) from its blocks' partials (`[max, sum, hd values]`
/// at `offset` within each `stride`-sized block record): every block is rescaled to the
/// overall max. `dst` must be zero.
fn merge(partial: &[f32], stride: usize, offset: usize, hd: usize, dst: &mut [f32]) {
    let blocks = partial
        .chunks_exact(stride)
        .map(|b| &b[offset..offset + 2 + hd]);
    let mx = blocks
        .clone()
        .map(|p| p[0])
        .fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0f32;
    for p in blocks {
        let w = (p[0] - mx).exp();
        total += p[1] * w;
        for (d, o) in dst.iter_mut().zip(&p[2..]) {
            *d += o * w;
        }
    }
    let inv = 1.0 / total;
    for d in dst.iter_mut() {
        *d *= inv;
    }
}

fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn item_avx2(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    scale: f32,
    it: Item,
    scores: &mut [f32],
    out: &mut [f32],
) {
    match s.hd {
        64 => x86::item_fixed::<8>(q, k, v, s, scale, it, scores, out),
        128 => x86::item_fixed::<16>(q, k, v, s, scale, it, scores, out),
        256 => x86::item_fixed::<32>(q, k, v, s, scale, it, scores, out),
        _ => item_body::<x86::Avx2>(q, k, v, s, scale, it, scores, out),
    }
}

/// The vector primitives of an item.
trait Ops {
    fn dot(a: &[f32], b: &[f32]) -> f32;
    /// `acc += p * x`.
    fn axpy(p: f32, x: &[f32], acc: &mut [f32]);
    /// `xs[j] = e^(xs[j] - mx)`, returning their sum.
    fn exp_sub_sum(xs: &mut [f32], mx: f32) -> f32;
    /// The largest value (-inf for none). Scores are finite, so NaN handling does not matter.
    fn max(xs: &[f32]) -> f32;
}

/// Plain Rust, for CPUs without AVX2.
struct Portable;

impl Ops for Portable {
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn axpy(p: f32, x: &[f32], acc: &mut [f32]) {
        for (a, x) in acc.iter_mut().zip(x) {
            *a += p * x;
        }
    }

    fn exp_sub_sum(xs: &mut [f32], mx: f32) -> f32 {
        let mut sum = 0f32;
        for x in xs.iter_mut() {
            *x = exp_nonpos(*x - mx);
            sum += *x;
        }
        sum
    }

    fn max(xs: &[f32]) -> f32 {
        xs.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    }
}

/// Local softmax of one item: `out[g] = [max, sum exp, sum exp * v]` for each group head.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn item_body<O: Ops>(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    scale: f32,
    it: Item,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let group = s.nh / s.nkv;
    let hd = s.hd;
    let nk = it.j1 - it.j0;
    let kv_base = it.kh * s.cap * hd;
    let stride = scores.len() / group;
    for g in 0..group {
        let h = it.kh * group + g;
        let qh = &q[(h * s.l + it.i) * hd..][..hd];
        let sc = &mut scores[g * stride..][..nk];
        for (jj, slot) in sc.iter_mut().enumerate() {
            let kr = &k[kv_base + (it.j0 + jj) * hd..][..hd];
            *slot = O::dot(qh, kr) * scale;
        }
        let mx = O::max(sc);
        let sum = O::exp_sub_sum(sc, mx);
        let o = &mut out[g * (2 + hd)..][..2 + hd];
        o[0] = mx;
        o[1] = sum;
        let acc = &mut o[2..];
        acc.fill(0.0);
        for (jj, &p) in sc.iter().enumerate() {
            let vr = &v[kv_base + (it.j0 + jj) * hd..][..hd];
            O::axpy(p, vr, acc);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{exp_nonpos, item_body, AttnShape, Item, Ops};
    use std::arch::x86_64::*;

    /// AVX2 + FMA primitives. Only instantiated inside `item_avx2`, whose target features
    /// make the intrinsics valid (and inline them).
    pub(super) struct Avx2;

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// `exp_nonpos` on eight lanes with the same operations in the same order.
    #[inline(always)]
    unsafe fn exp8(x: __m256) -> __m256 {
        let c = _mm256_set1_ps;
        let x = _mm256_max_ps(x, c(-87.0));
        let shift = c(12_582_912.0);
        let n = _mm256_sub_ps(
            _mm256_add_ps(_mm256_mul_ps(x, c(std::f32::consts::LOG2_E)), shift),
            shift,
        );
        let r = _mm256_sub_ps(
            _mm256_sub_ps(x, _mm256_mul_ps(n, c(0.693_359_4))),
            _mm256_mul_ps(n, c(-2.121_944_4e-4)),
        );
        let mut p = _mm256_add_ps(c(1.0 / 720.0), _mm256_mul_ps(r, c(1.0 / 5040.0)));
        for coef in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            p = _mm256_add_ps(c(coef), _mm256_mul_ps(r, p));
        }
        let e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
        _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)))
    }

    /// Sums of eight vectors: lane t of the result is the sum of the lanes of `a[t]`.
    #[inline(always)]
    unsafe fn hsum8x8(a: &[__m256; 8]) -> __m256 {
        let u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        let u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
        _mm256_add_ps(
            _mm256_permute2f128_ps(u0, u1, 0x20),
            _mm256_permute2f128_ps(u0, u1, 0x31),
        )
    }

    /// `item_body` for `hd = 8 * N` with the query and the weighted-V sums held in registers:
    /// eight keys are scored at once (eight independent FMA chains instead of one), and the V
    /// accumulators never go through memory.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn item_fixed<const N: usize>(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        s: AttnShape,
        scale: f32,
        it: Item,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let group = s.nh / s.nkv;
        let hd = 8 * N;
        let nk = it.j1 - it.j0;
        let kv0 = (it.kh * s.cap + it.j0) * hd;
        // Callers guarantee these; checking keeps the raw reads below in bounds regardless.
        if s.hd != hd
            || k.len() < kv0 + nk * hd
            || v.len() < kv0 + nk * hd
            || q.len() < s.nh * s.l * hd
            || scores.len() < group * nk
            || out.len() < group * (2 + hd)
        {
            return item_body::<Avx2>(q, k, v, s, scale, it, scores, out);
        }
        let (kp, vp) = (k.as_ptr().add(kv0), v.as_ptr().add(kv0));
        let stride = scores.len() / group;
        let scale_v = _mm256_set1_ps(scale);
        for g in 0..group {
            let h = it.kh * group + g;
            let qp = q.as_ptr().add((h * s.l + it.i) * hd);
            let mut qv = [_mm256_setzero_ps(); N];
            for (c, qc) in qv.iter_mut().enumerate() {
                *qc = _mm256_loadu_ps(qp.add(8 * c));
            }
            let sc = &mut scores[g * stride..][..nk];
            let mut j = 0;
            while j + 8 <= nk {
                let mut acc = [_mm256_setzero_ps(); 8];
                for (c, qc) in qv.iter().enumerate() {
                    for (t, a) in acc.iter_mut().enumerate() {
                        let kr = _mm256_loadu_ps(kp.add((j + t) * hd + 8 * c));
                        *a = _mm256_fmadd_ps(*qc, kr, *a);
                    }
                }
                _mm256_storeu_ps(
                    sc.as_mut_ptr().add(j),
                    _mm256_mul_ps(hsum8x8(&acc), scale_v),
                );
                j += 8;
            }
            while j < nk {
                let mut acc = _mm256_setzero_ps();
                for (c, qc) in qv.iter().enumerate() {
                    acc = _mm256_fmadd_ps(*qc, _mm256_loadu_ps(kp.add(j * hd + 8 * c)), acc);
                }
                sc[j] = hsum(acc) * scale;
                j += 1;
            }
            let mx = Avx2::max(sc);
            let sum = Avx2::exp_sub_sum(sc, mx);
            let mut o = [_mm256_setzero_ps(); N];
            for (jj, &p) in sc.iter().enumerate() {
                let pv = _mm256_set1_ps(p);
                for (c, oc) in o.iter_mut().enumerate() {
                    *oc = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vp.add(jj * hd + 8 * c)), *oc);
                }
            }
            let dst = &mut out[g * (2 + hd)..][..2 + hd];
            dst[0] = mx;
            dst[1] = sum;
            for (c, oc) in o.iter().enumerate() {
                _mm256_storeu_ps(dst.as_mut_ptr().add(2 + 8 * c), *oc);
            }
        }
    }

    impl Ops for Avx2 {
        #[inline(always)]
        fn dot(a: &[f32], b: &[f32]) -> f32 {
            let n = a.len().min(b.len());
            let n8 = n / 8 * 8;
            // SAFETY: AVX2 + FMA are enabled (see the struct docs); loads stay below n8.
            let mut sum = unsafe {
                let mut acc = _mm256_setzero_ps();
                for i in (0..n8).step_by(8) {
                    let (x, y) = (a.as_ptr().add(i), b.as_ptr().add(i));
                    acc = _mm256_fmadd_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y), acc);
                }
                hsum(acc)
            };
            for i in n8..n {
                sum += a[i] * b[i];
            }
            sum
        }

        #[inline(always)]
        fn axpy(p: f32, x: &[f32], acc: &mut [f32]) {
            let n = acc.len().min(x.len());
            let n8 = n / 8 * 8;
            // SAFETY: as in `dot`.
            unsafe {
                let pv = _mm256_set1_ps(p);
                for i in (0..n8).step_by(8) {
                    let (xp, ap) = (x.as_ptr().add(i), acc.as_mut_ptr().add(i));
                    _mm256_storeu_ps(
                        ap,
                        _mm256_fmadd_ps(pv, _mm256_loadu_ps(xp), _mm256_loadu_ps(ap)),
                    );
                }
            }
            for i in n8..n {
                acc[i] += p * x[i];
            }
        }

        #[inline(always)]
        fn max(xs: &[f32]) -> f32 {
            let n8 = xs.len() / 8 * 8;
            // SAFETY: as in `dot`.
            let mut mx = unsafe {
                let mut m = _mm256_set1_ps(f32::NEG_INFINITY);
                for i in (0..n8).step_by(8) {
                    m = _mm256_max_ps(m, _mm256_loadu_ps(xs.as_ptr().add(i)));
                }
                let m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
                let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)))
            };
            for &x in &xs[n8..] {
                mx = mx.max(x);
            }
            mx
        }

        #[inline(always)]
        fn exp_sub_sum(xs: &mut [f32], mx: f32) -> f32 {
            let n8 = xs.len() / 8 * 8;
            // SAFETY: as in `dot`.
            let mut sum = unsafe {
                let (mv, mut acc) = (_mm256_set1_ps(mx), _mm256_setzero_ps());
                for i in (0..n8).step_by(8) {
                    let p = xs.as_mut_ptr().add(i);
                    let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p), mv));
                    _mm256_storeu_ps(p, e);
                    acc = _mm256_add_ps(acc, e);
                }
                hsum(acc)
            };
            for x in &mut xs[n8..] {
                *x = exp_nonpos(*x - mx);
                sum += *x;
            }
            sum
        }
    }
}

/// `e^x` for `x <= 0` (softmax after subtracting the max), within about 2 ulp of libm's
/// `expf`, in straight-line arithmetic that vectorizes. Below -87 (where the result would
/// leave f32's normal range) it returns `e^-87`, which is negligible next to the max's 1.
#[inline(always)]
pub(crate) fn exp_nonpos(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for |n| < 2^10.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and removing 1.5 * 2^23 rounds to an integer (|t| < 2^22).
    const SHIFT: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * LOG2E + SHIFT) - SHIFT;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Taylor series of e^r to degree 7: truncation below 1e-8 relative for |r| <= ln2 / 2.
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // n is in [-126, 0], so 2^n is a normal f32 built from its exponent bits.
    let two_n = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * two_n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Straightforward f64 attention.
    fn reference(q: &[f32], k: &[f32], v: &[f32], s: AttnShape, scale: f32) -> Vec<f32> {
        let group = s.nh / s.nkv;
        let mut y = vec![0f32; s.l * s.nh * s.hd];
        for h in 0..s.nh {
            let kh = h / group;
            for i in 0..s.l {
                let (first, n) = s.keys(i);
                let qh = &q[(h * s.l + i) * s.hd..][..s.hd];
                let sc: Vec<f64> = (first..n)
                    .map(|j| {
                        let kr = &k[(kh * s.cap + j) * s.hd..][..s.hd];
                        qh.iter()
                            .zip(kr)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            * scale as f64
                    })
                    .collect();
                let mx = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
                let tot: f64 = e.iter().sum();
                for d in 0..s.hd {
                    let val: f64 = (first..n)
                        .map(|j| e[j - first] * v[(kh * s.cap + j) * s.hd + d] as f64)
                        .sum::<f64>()
                        / tot;
                    y[(i * s.nh + h) * s.hd + d] = val as f32;
                }
            }
        }
        y
    }

    #[test]
    fn matches_f64_reference_across_key_blocks() {
        let mut seed = 3u64;
        for (nh, nkv, hd, p0, l, cap, window) in [
            (9, 3, 64, 0, 1, 8, None),
            (9, 3, 64, 300, 1, 512, None),
            (4, 4, 12, 700, 5, 768, None),
            (8, 2, 64, 1500, 20, 1536, None),
            (2, 1, 16, 255, 3, 260, None),
            (4, 2, 128, 37, 2, 64, None),
            (3, 3, 64, 13, 1, 16, None),
            // Sliding windows: inside one block, across block edges, wider than the context,
            // one key, and many queries (one item per pair).
            (4, 1, 256, 700, 1, 768, Some(512)),
            (4, 2, 64, 300, 3, 512, Some(100)),
            (2, 1, 16, 5, 4, 16, Some(64)),
            (2, 2, 8, 40, 2, 48, Some(1)),
            (4, 1, 32, 250, 24, 300, Some(7)),
        ] {
            let s = AttnShape {
                nh,
                nkv,
                hd,
                p0,
                l,
                cap,
                window,
            };
            let q: Vec<f32> = (0..nh * l * hd).map(|_| lcg(&mut seed) * 3.0).collect();
            let k: Vec<f32> = (0..nkv * cap * hd).map(|_| lcg(&mut seed)).collect();
            let v: Vec<f32> = (0..nkv * cap * hd).map(|_| lcg(&mut seed)).collect();
            let scale = 1.0 / (hd as f32).sqrt();
            let want = reference(&q, &k, &v, s, scale);
            for fast in [false, true] {
                let got = attend_with(fast, &q, &k, &v, s, scale);
                for (a, b) in got.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 2e-5 * (1.0 + b.abs()),
                        "{s:?} {fast}: {a} vs {b}"
                    );
                }
            }
            let qt = Tensor::from_vec(q, (1, nh, l, hd), &Device::Cpu).unwrap();
            let kt = Tensor::from_vec(k, (nkv, cap, hd), &Device::Cpu).unwrap();
            let vt = Tensor::from_vec(v, (nkv, cap, hd), &Device::Cpu).unwrap();
            let y = cached_attention(&qt, &kt, &vt, s, scale).unwrap();
            assert_eq!(y.dims(), &[l, nh * hd]);
        }
    }

    #[test]
    fn a_query_gets_the_same_bits_whatever_the_call_size() {
        let mut seed = 11u64;
        let (nh, nkv, hd, cap) = (9, 3, 64, 1024);
        let k: Vec<f32> = (0..nkv * cap * hd).map(|_| lcg(&mut seed)).collect();
        let v: Vec<f32> = (0..nkv * cap * hd).map(|_| lcg(&mut seed)).collect();
        let (p0, l) = (600, 24);
        let q: Vec<f32> = (0..nh * l * hd).map(|_| lcg(&mut seed) * 3.0).collect();
        let scale = 0.125;
        for fast in [false, true] {
            // 24 queries: one item per (KV head, query); then the last query alone (decode
            // style: one item per block) and the first 3 (blocks again).
            let all = attend_with(
                fast,
                &q,
                &k,
                &v,
                AttnShape {
                    nh,
                    nkv,
                    hd,
                    p0,
                    l,
                    cap,
                    window: None,
                },
                scale,
            );
            let last: Vec<f32> = (0..nh)
                .flat_map(|h| q[(h * l + l - 1) * hd..][..hd].to_vec())
                .collect();
            let s1 = AttnShape {
                nh,
                nkv,
                hd,
                p0: p0 + l - 1,
                l: 1,
                cap,
                window: None,
            };
            let one = attend_with(fast, &last, &k, &v, s1, scale);
            assert_eq!(&all[(l - 1) * nh * hd..], &one[..], "fast {fast}");
            let first: Vec<f32> = (0..nh)
                .flat_map(|h| q[h * l * hd..][..3 * hd].to_vec())
                .collect();
            let s3 = AttnShape {
                nh,
                nkv,
                hd,
                p0,
                l: 3,
                cap,
                window: None,
            };
            let three = attend_with(fast, &first, &k, &v, s3, scale);
            assert_eq!(&all[..3 * nh * hd], &three[..], "fast {fast}");
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let t = |n: usize| Tensor::zeros(n, candle_core::DType::F32, &Device::Cpu).unwrap();
        let s = AttnShape {
            nh: 2,
            nkv: 1,
            hd: 4,
            p0: 0,
            l: 1,
            cap: 4,
            window: None,
        };
        assert!(cached_attention(&t(8), &t(16), &t(16), s, 1.0).is_ok());
        assert!(cached_attention(&t(8), &t(15), &t(16), s, 1.0).is_err());
        assert!(cached_attention(&t(7), &t(16), &t(16), s, 1.0).is_err());
        assert!(cached_attention(&t(8), &t(16), &t(16), AttnShape { nkv: 3, ..s }, 1.0).is_err());
        assert!(cached_attention(&t(8), &t(16), &t(16), AttnShape { p0: 4, ..s }, 1.0).is_err());
        let no_keys = AttnShape {
            window: Some(0),
            ..s
        };
        assert!(cached_attention(&t(8), &t(16), &t(16), no_keys, 1.0).is_err());
    }

    #[test]
    fn exp_nonpos_is_accurate() {
        let mut x = 0f32;
        let mut worst = 0f64;
        while x > -87.0 {
            let want = (x as f64).exp();
            let rel = ((exp_nonpos(x) as f64 - want) / want).abs();
            worst = worst.max(rel);
            x -= 0.001_37;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(exp_nonpos(0.0), 1.0);
        assert!(exp_nonpos(-1000.0) > 0.0 && exp_nonpos(-1000.0) < 1e-37);
        assert!(exp_nonpos(f32::NEG_INFINITY) < 1e-37);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_exp_equals_scalar_exp() {
        if !simd_available() {
            return;
        }
        let mut xs: Vec<f32> = (0..4099).map(|i| -(i as f32) * 0.0317).collect();
        xs.extend([
            0.0,
            -0.0,
            -86.99,
            -87.0,
            -87.01,
            -200.0,
            f32::NEG_INFINITY,
            0.3,
        ]);
        let mx = 0.25;
        let mut a = xs.clone();
        let mut b = xs.clone();
        let sa = Portable::exp_sub_sum(&mut a, mx);
        // SAFETY: AVX2 + FMA checked above; the helper only runs the primitive.
        #[target_feature(enable = "avx2,fma")]
        unsafe fn vector(xs: &mut [f32], mx: f32) -> f32 {
            <x86::Avx2 as Ops>::exp_sub_sum(xs, mx)
        }
        let sb = unsafe { vector(&mut b, mx) };
        for (x, (p, q)) in xs.iter().zip(a.iter().zip(&b)) {
            assert_eq!(p.to_bits(), q.to_bits(), "e^({x} - {mx})");
        }
        assert!((sa - sb).abs() <= 1e-4 * sa);
    }
}
