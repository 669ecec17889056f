//! CPU matmul kernel for GGUF Q4_1 weights against f32 activations.
//!
//! candle 0.11 runs Q4_1 x Q8_1 dot products in a scalar loop (its SIMD paths cover Q4_0, Q8_0
//! and the k-quants only), and SmolLM2's GGUF stores every projection in Q4_1, so that loop was
//! most of a decode step. This kernel computes what llama.cpp computes: each activation row is
//! quantized to Q8_1 (blocks of 32, `d = amax / 127`, `q = round(x / d)`, `s = d * sum(q)`, `d`
//! and `s` rounded to f16 like ggml's block struct) and each output is
//! `sum_b d_w * d_x * sum(q_w * q_x) + m_w * s_x`.
//!
//! Weights are repacked at load time: rows are interleaved in groups of [`GROUP`] so that one
//! 256-bit vector holds four consecutive 4-bit weights of eight different rows. One integer
//! multiply-add step then advances eight row sums at once, a block's sum needs no horizontal
//! reduction, and the per-row scales (kept as f32, converted once) load as one vector. The
//! packed nibble byte for (row, element e) is the GGUF byte itself (low nibble = element e,
//! high nibble = element e + 16), only the order of 4-byte chunks changes.
//!
//! The scalar kernel performs the same f32 operations in the same order per output as the SIMD
//! kernels (integer block sums are exact), so all kernels agree bit for bit; tests rely on it.

use std::sync::OnceLock;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, Layout, Shape};

use crate::error::{LlamaError, Result};

/// Elements per quantization block (Q4_1 and Q8_1).
pub const QK: usize = 32;
/// Weight rows interleaved per packed group: one i32 lane of a 256-bit vector per row.
pub const GROUP: usize = 8;
/// Bytes of packed nibbles per (row group, block).
const GROUP_BLOCK_BYTES: usize = GROUP * QK / 2;
/// Bytes of one GGUF Q4_1 block: f16 d, f16 m, 16 bytes of nibbles.
const Q4_1_BLOCK_BYTES: usize = 20;

/// Which implementation runs the dot products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Portable Rust; the reference the SIMD kernels are tested against.
    Scalar,
    /// AVX2 + FMA (`vpmaddubsw` / `vpmaddwd`).
    Avx2,
    /// AVX-512 VNNI on 256-bit vectors (`vpdpbusd`), needs AVX512VL as well.
    Avx512Vnni,
}

impl Kernel {
    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => {
                Kernel::Avx2.is_available()
                    && is_x86_feature_detected!("avx512vnni")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx2 | Kernel::Avx512Vnni => false,
        }
    }

    /// Every kernel this CPU can run, fastest last.
    pub fn available() -> Vec<Kernel> {
        [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512Vnni]
            .into_iter()
            .filter(|k| k.is_available())
            .collect()
    }

    /// The kernel used by [`Q41Matrix::matmul`]: the fastest available one, unless the
    /// environment variable `PLANSMITH_QKERNEL` (`scalar`, `avx2`, `vnni`) names another
    /// available one (for measuring one kernel against another in the full model).
    pub fn best() -> Kernel {
        static BEST: OnceLock<Kernel> = OnceLock::new();
        *BEST.get_or_init(|| {
            let forced = match std::env::var("PLANSMITH_QKERNEL").as_deref() {
                Ok("scalar") => Some(Kernel::Scalar),
                Ok("avx2") => Some(Kernel::Avx2),
                Ok("vnni") => Some(Kernel::Avx512Vnni),
                _ => None,
            };
            match forced {
                Some(k) if k.is_available() => k,
                _ => *Kernel::available().last().unwrap_or(&Kernel::Scalar),
            }
        })
    }

    /// Activation rows processed per pass over a weight group. More rows reuse each unpacked
    /// weight vector more often; AVX2's 16 vector registers hold the unpacked group plus the
    /// accumulators of two rows, AVX-512's 32 registers those of four.
    fn x_tile(self) -> usize {
        match self {
            Kernel::Scalar => 4,
            Kernel::Avx2 => 2,
            Kernel::Avx512Vnni => 4,
        }
    }
}

/// f16 bit pattern -> f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let man = (h & 0x3ff) as u32;
    match exp {
        // Subnormal: man * 2^-24, exact in f32.
        0 => sign * man as f32 * (1.0 / 16_777_216.0),
        31 => f32::from_bits(((h as u32 & 0x8000) << 16) | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(((h as u32 & 0x8000) << 16) | ((exp as u32 + 112) << 23) | (man << 13)),
    }
}

/// f32 -> f16 bit pattern, rounding to nearest even (overflow gives infinity).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Below 2^-25 everything rounds to zero (2^-25 itself ties to even zero).
        if e < -10 {
            return sign;
        }
        // Count in units of the f16 subnormal step 2^-24.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let mut h = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        if rem > half || (rem == half && h & 1 == 1) {
            // A carry out of the mantissa lands on the smallest normal, which is correct.
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) {
        // A carry into the exponent is the correct rounding (up to infinity).
        h += 1;
    }
    sign | h as u16
}

/// `x` rounded to the nearest f16 value, as f32 (ggml stores Q8_1 scales as f16).
fn round_f16(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

/// Q4_1 weights `[rows, cols]` repacked for the kernels (see the module docs).
#[derive(Clone)]
pub struct Q41Matrix {
    rows: usize,
    cols: usize,
    /// Blocks per row.
    nb: usize,
    /// Row groups; the last one is zero-padded when `rows % GROUP != 0`.
    groups: usize,
    /// Per (group, block): four 32-byte vectors; vector j holds, for row r of the group, the
    /// GGUF nibble bytes 4j..4j+4 of that row's block at bytes 4r..4r+4.
    qs: Vec<u8>,
    /// Per (group, block): `d` of the group's rows, then `m` of the group's rows.
    dm: Vec<f32>,
}

impl std::fmt::Debug for Q41Matrix {
    // The weights themselves would flood any debug print of a model.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Q41Matrix[{}, {}]", self.rows, self.cols)
    }
}

impl Q41Matrix {
    /// Repack GGUF Q4_1 data of a `[rows, cols]` matrix (row-major blocks).
    ///
    /// Errors: `cols` not a multiple of 32, or `data` not exactly `rows * cols / 32` blocks.
    pub fn from_ggml(rows: usize, cols: usize, data: &[u8]) -> Result<Self> {
        if cols == 0 || cols % QK != 0 {
            return Err(LlamaError::Unsupported(format!(
                "Q4_1 matrix with {cols} columns (must be a positive multiple of {QK})"
            )));
        }
        let nb = cols / QK;
        let expected = rows
            .checked_mul(nb)
            .and_then(|b| b.checked_mul(Q4_1_BLOCK_BYTES));
        if expected != Some(data.len()) {
            return Err(LlamaError::State(format!(
                "Q4_1 matrix [{rows}, {cols}] needs {} bytes, got {}",
                expected.map_or_else(|| "too many".to_string(), |e| e.to_string()),
                data.len()
            )));
        }
        let groups = rows.div_ceil(GROUP);
        let mut qs = vec![0u8; groups * nb * GROUP_BLOCK_BYTES];
        let mut dm = vec![0f32; groups * nb * 2 * GROUP];
        for row in 0..rows {
            let (g, r) = (row / GROUP, row % GROUP);
            for b in 0..nb {
                let src = &data[(row * nb + b) * Q4_1_BLOCK_BYTES..][..Q4_1_BLOCK_BYTES];
                let gb = g * nb + b;
                dm[gb * 2 * GROUP + r] = f16_to_f32(u16::from_le_bytes([src[0], src[1]]));
                dm[gb * 2 * GROUP + GROUP + r] = f16_to_f32(u16::from_le_bytes([src[2], src[3]]));
                let dst = &mut qs[gb * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
                for j in 0..4 {
                    dst[j * 32 + r * 4..][..4].copy_from_slice(&src[4 + j * 4..][..4]);
                }
            }
        }
        Ok(Self {
            rows,
            cols,
            nb,
            groups,
            qs,
            dm,
        })
    }

    /// Repack a candle Q4_1 tensor of shape `[rows, cols]`; `None` for any other dtype.
    pub fn from_qtensor(q: &QTensor) -> Result<Option<Self>> {
        if q.dtype() != GgmlDType::Q4_1 {
            return Ok(None);
        }
        let (rows, cols) = q.shape().dims2()?;
        Ok(Some(Self::from_ggml(rows, cols, &q.data()?)?))
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Weight `(row, col)` of the block at `(group, block)`: nibble and the row's d, m.
    fn weight(&self, row: usize, col: usize) -> f32 {
        let (g, r) = (row / GROUP, row % GROUP);
        let (b, e) = (col / QK, col % QK);
        let gb = g * self.nb + b;
        let byte = self.qs[gb * GROUP_BLOCK_BYTES + (e % 16 / 4) * 32 + r * 4 + e % 4];
        let q = if e < 16 { byte & 0x0f } else { byte >> 4 };
        let d = self.dm[gb * 2 * GROUP + r];
        let m = self.dm[gb * 2 * GROUP + GROUP + r];
        // Same expression as ggml's / candle's dequantize_row_q4_1.
        q as f32 * d + m
    }

    /// The weights as dense f32 `[rows, cols]`, bit-identical to candle's dequantization.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.rows * self.cols);
        for row in 0..self.rows {
            for col in 0..self.cols {
                out.push(self.weight(row, col));
            }
        }
        out
    }

    /// `y = x W^T` for `x` of `m` rows of `cols` f32 values: `m` rows of `rows` outputs. Uses
    /// [`Kernel::best`] and candle's CPU thread pool (sized by `RAYON_NUM_THREADS`).
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        self.matmul_with(Kernel::best(), x, m)
    }

    /// [`Self::matmul`] with a chosen kernel. Errors: the kernel is not available on this CPU,
    /// or `x` does not hold `m` rows of `cols` values.
    pub fn matmul_with(&self, kernel: Kernel, x: &[f32], m: usize) -> Result<Vec<f32>> {
        if !kernel.is_available() {
            return Err(LlamaError::Unsupported(format!(
                "{kernel:?} kernel on this CPU"
            )));
        }
        if m.checked_mul(self.cols) != Some(x.len()) {
            return Err(LlamaError::State(format!(
                "matmul input has {} values, expected {m} rows of {}",
                x.len(),
                self.cols
            )));
        }
        let mut out = vec![0f32; m * self.rows];
        if m == 0 || self.rows == 0 {
            return Ok(out);
        }
        let acts = Q8Acts::quantize(x, m, self.nb);
        let out_ptr = OutPtr(out.as_mut_ptr());
        let tile = kernel.x_tile();
        let work = |groups: std::ops::Range<usize>| {
            let mut tmp = [[0f32; GROUP]; 4];
            for g in groups {
                let mut x0 = 0;
                while x0 < m {
                    let c = tile.min(m - x0);
                    run_group(kernel, self, g, &acts, x0, c, &mut tmp);
                    let live = GROUP.min(self.rows - g * GROUP);
                    for (ci, vals) in tmp.iter().enumerate().take(c) {
                        let at = (x0 + ci) * self.rows + g * GROUP;
                        // SAFETY: `at + live <= m * rows` (x0 + ci < m, g * GROUP + live <=
                        // rows), and each (activation row, row group) cell is written by the
                        // one work item that owns group `g`; `out` outlives the pool call.
                        unsafe {
                            std::ptr::copy_nonoverlapping(vals.as_ptr(), out_ptr.get().add(at), live)
                        };
                    }
                    x0 += c;
                }
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(self.groups, |r| work(r));
        Ok(out)
    }
}

/// The output buffer shared by the pool's threads, which write disjoint cells.
struct OutPtr(*mut f32);
// SAFETY: the pointer is only used for disjoint writes (see `matmul_with`).
unsafe impl Sync for OutPtr {}
unsafe impl Send for OutPtr {}

impl OutPtr {
    // A method, not a field access: closures would otherwise capture the bare pointer.
    fn get(&self) -> *mut f32 {
        self.0
    }
}

/// Activation rows quantized to Q8_1.
struct Q8Acts {
    /// `[m, nb, 32]`.
    qs: Vec<i8>,
    /// Per (row, block): f16-rounded `d`.
    d: Vec<f32>,
    /// Per (row, block): f16-rounded `d * sum(q)`.
    s: Vec<f32>,
}

impl Q8Acts {
    fn quantize(x: &[f32], m: usize, nb: usize) -> Self {
        let mut qs = vec![0i8; m * nb * QK];
        let mut d = vec![0f32; m * nb];
        let mut s = vec![0f32; m * nb];
        for (i, (xb, qb)) in x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK)).enumerate() {
            let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
            let db = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qb.iter_mut().zip(xb) {
                // Round half to even via the 1.5 * 2^23 shift (|v * id| <= 127), as ggml's
                // x86 quantizer does; NaN / infinite inputs saturate in the cast.
                const SHIFT: f32 = 12_582_912.0;
                let r = (v * id + SHIFT) - SHIFT;
                *q = r as i8;
                sum += *q as i32;
            }
            d[i] = round_f16(db);
            s[i] = round_f16(db * sum as f32);
        }
        Self { qs, d, s }
    }
}

/// Outputs of group `g` for activation rows `x0..x0 + c` (`c <= 4`) into `out[0..c]`.
fn run_group(
    kernel: Kernel,
    w: &Q41Matrix,
    g: usize,
    a: &Q8Acts,
    x0: usize,
    c: usize,
    out: &mut [[f32; GROUP]; 4],
) {
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `matmul_with` checked `kernel.is_available()`; indices are in range because
        // g < groups, x0 + c <= m and every buffer was sized from (groups, nb, m).
        Kernel::Avx2 => unsafe {
            match c {
                1 => x86::group_avx2::<1>(w, g, a, x0, out),
                2 => x86::group_avx2::<2>(w, g, a, x0, out),
                3 => x86::group_avx2::<3>(w, g, a, x0, out),
                _ => x86::group_avx2::<4>(w, g, a, x0, out),
            }
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Kernel::Avx512Vnni => unsafe {
            match c {
                1 => x86::group_vnni::<1>(w, g, a, x0, out),
                2 => x86::group_vnni::<2>(w, g, a, x0, out),
                3 => x86::group_vnni::<3>(w, g, a, x0, out),
                _ => x86::group_vnni::<4>(w, g, a, x0, out),
            }
        },
        _ => group_scalar(w, g, a, x0, c, out),
    }
}

/// Reference kernel. Per output: `acc_d = fma(isum, d_w * d_x, acc_d)` and
/// `acc_m = fma(m_w, s_x, acc_m)` over blocks, result `acc_d + acc_m`: the SIMD kernels do the
/// same operations lane-wise.
fn group_scalar(w: &Q41Matrix, g: usize, a: &Q8Acts, x0: usize, c: usize, out: &mut [[f32; GROUP]; 4]) {
    let nb = w.nb;
    for (ci, o) in out.iter_mut().enumerate().take(c) {
        let xr = x0 + ci;
        let mut acc_d = [0f32; GROUP];
        let mut acc_m = [0f32; GROUP];
        for b in 0..nb {
            let gb = g * nb + b;
            let qs = &w.qs[gb * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
            let dm = &w.dm[gb * 2 * GROUP..][..2 * GROUP];
            let xq = &a.qs[(xr * nb + b) * QK..][..QK];
            let (dx, sx) = (a.d[xr * nb + b], a.s[xr * nb + b]);
            for r in 0..GROUP {
                let mut isum = 0i32;
                for j in 0..4 {
                    for i in 0..4 {
                        let byte = qs[j * 32 + r * 4 + i];
                        isum += (byte & 0x0f) as i32 * xq[j * 4 + i] as i32;
                        isum += (byte >> 4) as i32 * xq[16 + j * 4 + i] as i32;
                    }
                }
                acc_d[r] = (isum as f32).mul_add(dm[r] * dx, acc_d[r]);
                acc_m[r] = dm[GROUP + r].mul_add(sx, acc_m[r]);
            }
        }
        for r in 0..GROUP {
            o[r] = acc_d[r] + acc_m[r];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Q41Matrix, Q8Acts, GROUP, GROUP_BLOCK_BYTES, QK};
    use std::arch::x86_64::*;

    /// The eight unpacked weight vectors of a (group, block): vector `j` holds elements
    /// 4j..4j+4 of each row (j < 4 from low nibbles, j >= 4 from high nibbles).
    #[inline(always)]
    unsafe fn unpack(p: *const u8) -> [__m256i; 8] {
        let mask = _mm256_set1_epi8(0x0f);
        let v0 = _mm256_loadu_si256(p as *const __m256i);
        let v1 = _mm256_loadu_si256(p.add(32) as *const __m256i);
        let v2 = _mm256_loadu_si256(p.add(64) as *const __m256i);
        let v3 = _mm256_loadu_si256(p.add(96) as *const __m256i);
        [
            _mm256_and_si256(v0, mask),
            _mm256_and_si256(v1, mask),
            _mm256_and_si256(v2, mask),
            _mm256_and_si256(v3, mask),
            _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask),
            _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask),
            _mm256_and_si256(_mm256_srli_epi16(v2, 4), mask),
            _mm256_and_si256(_mm256_srli_epi16(v3, 4), mask),
        ]
    }

    /// Four activation bytes (elements 4j..4j+4 of a block) in every i32 lane.
    #[inline(always)]
    unsafe fn bcast4(x: *const i8, j: usize) -> __m256i {
        _mm256_set1_epi32(std::ptr::read_unaligned(x.add(4 * j) as *const i32))
    }

    /// Folds one block's integer row sums into the accumulators (see `group_scalar`).
    #[inline(always)]
    unsafe fn accumulate(
        isum: __m256i,
        dw: __m256,
        mw: __m256,
        dx: f32,
        sx: f32,
        acc_d: &mut __m256,
        acc_m: &mut __m256,
    ) {
        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(dx));
        *acc_d = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, *acc_d);
        *acc_m = _mm256_fmadd_ps(mw, _mm256_set1_ps(sx), *acc_m);
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn group_avx2<const C: usize>(
        w: &Q41Matrix,
        g: usize,
        a: &Q8Acts,
        x0: usize,
        out: &mut [[f32; GROUP]; 4],
    ) {
        let nb = w.nb;
        let ones = _mm256_set1_epi16(1);
        let mut acc_d = [_mm256_setzero_ps(); C];
        let mut acc_m = [_mm256_setzero_ps(); C];
        let qs = w.qs.as_ptr().add(g * nb * GROUP_BLOCK_BYTES);
        let dm = w.dm.as_ptr().add(g * nb * 2 * GROUP);
        for b in 0..nb {
            let u = unpack(qs.add(b * GROUP_BLOCK_BYTES));
            let dw = _mm256_loadu_ps(dm.add(b * 2 * GROUP));
            let mw = _mm256_loadu_ps(dm.add(b * 2 * GROUP + GROUP));
            for c in 0..C {
                let xi = (x0 + c) * nb + b;
                let x = a.qs.as_ptr().add(xi * QK);
                // u4 * i8 pairs stay within +-3810 and eight of them within i16.
                let mut s16 = _mm256_maddubs_epi16(u[0], bcast4(x, 0));
                for (j, uj) in u.iter().enumerate().skip(1) {
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(*uj, bcast4(x, j)));
                }
                let isum = _mm256_madd_epi16(s16, ones);
                accumulate(
                    isum,
                    dw,
                    mw,
                    *a.d.get_unchecked(xi),
                    *a.s.get_unchecked(xi),
                    &mut acc_d[c],
                    &mut acc_m[c],
                );
            }
        }
        for c in 0..C {
            _mm256_storeu_ps(out[c].as_mut_ptr(), _mm256_add_ps(acc_d[c], acc_m[c]));
        }
    }

    #[target_feature(enable = "avx2,fma,avx512vnni,avx512vl")]
    pub(super) unsafe fn group_vnni<const C: usize>(
        w: &Q41Matrix,
        g: usize,
        a: &Q8Acts,
        x0: usize,
        out: &mut [[f32; GROUP]; 4],
    ) {
        let nb = w.nb;
        let mut acc_d = [_mm256_setzero_ps(); C];
        let mut acc_m = [_mm256_setzero_ps(); C];
        let qs = w.qs.as_ptr().add(g * nb * GROUP_BLOCK_BYTES);
        let dm = w.dm.as_ptr().add(g * nb * 2 * GROUP);
        for b in 0..nb {
            let u = unpack(qs.add(b * GROUP_BLOCK_BYTES));
            let dw = _mm256_loadu_ps(dm.add(b * 2 * GROUP));
            let mw = _mm256_loadu_ps(dm.add(b * 2 * GROUP + GROUP));
            for c in 0..C {
                let xi = (x0 + c) * nb + b;
                let x = a.qs.as_ptr().add(xi * QK);
                // Two independent chains halve the dependent vpdpbusd latency.
                let mut s0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[0], bcast4(x, 0));
                let mut s1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[4], bcast4(x, 4));
                for j in 1..4 {
                    s0 = _mm256_dpbusd_epi32(s0, u[j], bcast4(x, j));
                    s1 = _mm256_dpbusd_epi32(s1, u[j + 4], bcast4(x, j + 4));
                }
                accumulate(
                    _mm256_add_epi32(s0, s1),
                    dw,
                    mw,
                    *a.d.get_unchecked(xi),
                    *a.s.get_unchecked(xi),
                    &mut acc_d[c],
                    &mut acc_m[c],
                );
            }
        }
        for c in 0..C {
            _mm256_storeu_ps(out[c].as_mut_ptr(), _mm256_add_ps(acc_d[c], acc_m[c]));
        }
    }
}

/// candle entry point: `x [.., cols] -> [.., rows]` for contiguous f32 CPU tensors.
impl candle_core::CustomOp1 for Q41Matrix {
    fn name(&self) -> &'static str {
        "plansmith-q4_1-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("Q4_1 matmul expects f32 activations")
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("Q4_1 matmul expects contiguous activations {layout:?}")
        };
        let mut dims = layout.dims().to_vec();
        if dims.last() != Some(&self.cols) {
            candle_core::bail!(
                "Q4_1 matmul: activations {dims:?} do not end in {} columns",
                self.cols
            )
        }
        let m = layout.shape().elem_count() / self.cols;
        let out = self
            .matmul(&data[start..end], m)
            .map_err(candle_core::Error::wrap)?;
        if let Some(last) = dims.last_mut() {
            *last = self.rows;
        }
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }
}
