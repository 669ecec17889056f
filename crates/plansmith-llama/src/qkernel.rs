//! CPU matmul kernels for GGUF Q4_1, Q8_0, Q4_K, Q5_K and Q6_K weights against f32
//! activations.
//!
//! candle 0.11 runs Q4_1 x Q8_1 dot products in a scalar loop (its SIMD paths cover Q4_0, Q8_0
//! and the k-quants only), and SmolLM2's GGUF stores every projection in Q4_1, so that loop was
//! most of a decode step. These kernels compute what llama.cpp computes for Q4_1 / Q8_0: each
//! activation row is quantized per block of 32 (`d = amax / 127`, `q = round(x / d)`,
//! `s = d * sum(q)`, with `d` and `s` rounded to f16 like ggml's block structs) and each output
//! is
//! - Q4_1: `sum_b d_w * d_x * sum(q_w * q_x) + m_w * s_x` (activations as Q8_1),
//! - Q8_0: `sum_b d_w * d_x * sum(q_w * q_x)` (activations as Q8_0, the same `d` and `q`).
//!
//! The K-quants (super-blocks of 256 with 6- or 8-bit sub-block scales, [`crate::kquant`]) use
//! the same 32-value activation blocks: a Q4_K / Q5_K block of 32 is Q4_1's sum with
//! `d_w = d * sc` and `m_w = -dmin * min` (exact f32 products), and Q6_K weights its two
//! 16-value halves by their i8 scales in integer arithmetic (`q - 32` through
//! `sum(q * x) - 32 * sum(x)`) before one `d * d_x`. ggml quantizes activations per 256 for
//! these (Q8_K); per 32 is finer, so the results differ from llama.cpp's by less than either
//! differs from the f32 product.
//!
//! Decode streams every weight from memory once per token, so bytes per weight decide its speed.
//! The packed layout keeps GGUF's byte count (scales stay f16; a Q4_K matrix grows by 6%, a
//! Q6_K one by 1%, for byte-sized sub-block scales and f32 super-block scales) but reorders it:
//! rows are interleaved in groups of [`GROUP`] so that one 256-bit vector holds four consecutive weights
//! of eight different rows. One integer multiply-add step then advances eight row sums at once,
//! a block needs no horizontal reduction, the eight rows' scales load as one vector, and a row
//! group's blocks form one sequential stream (quants followed by scales, block after block).
//!
//! The scalar kernel performs the same f32 operations in the same order per output as the SIMD
//! kernels (integer block sums are exact), so all kernels agree bit for bit; tests rely on it.

use std::sync::OnceLock;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, Layout, Shape};

use crate::error::{LlamaError, Result};
pub use crate::kquant::QK_K;
use crate::kquant::{self, KType};

/// Elements per quantization block (Q4_1, Q8_0 and Q8_1), and per packed block of every
/// format (a K-quant super-block is packed as 8 blocks of 32).
pub const QK: usize = 32;
/// Blocks of 32 per K-quant super-block.
const SUB: usize = QK_K / QK;
/// Most activation rows one pass over a weight group serves ([`Kernel::x_tile`]).
const MAX_TILE: usize = 8;
/// Per activation row of a tile, the outputs of one row group.
type Tile = [[f32; GROUP]; MAX_TILE];
/// Weight rows interleaved per packed group: one i32 lane of a 256-bit vector per row.
pub const GROUP: usize = 8;

/// Weight formats with an own kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QFormat {
    /// f16 d, f16 m, 16 bytes of nibbles (low nibble = element e, high = element e + 16).
    Q4_1,
    /// f16 d, 32 signed bytes.
    Q8_0,
    /// K-quant super-blocks of 256 ([`crate::kquant`]): 4-bit quants with a 6-bit scale and
    /// min per 32 weights.
    Q4K,
    /// As Q4K with 5-bit quants.
    Q5K,
    /// 6-bit quants offset by 32, a signed 8-bit scale per 16 weights.
    Q6K,
}

impl QFormat {
    /// The format of a GGML dtype, if it has an own kernel.
    pub fn from_ggml(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4_1 => Some(Self::Q4_1),
            GgmlDType::Q8_0 => Some(Self::Q8_0),
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q5K => Some(Self::Q5K),
            GgmlDType::Q6K => Some(Self::Q6K),
            _ => None,
        }
    }

    /// The K-quant this format repacks, if it is one.
    fn k_type(self) -> Option<KType> {
        match self {
            Self::Q4K => Some(KType::Q4K),
            Self::Q5K => Some(KType::Q5K),
            Self::Q6K => Some(KType::Q6K),
            Self::Q4_1 | Self::Q8_0 => None,
        }
    }

    /// Weights per GGUF block: 32, or 256 for the K-quants.
    fn ggml_block_len(self) -> usize {
        if self.k_type().is_some() {
            QK_K
        } else {
            QK
        }
    }

    /// Bytes of one GGUF block.
    fn ggml_block_bytes(self) -> usize {
        match self {
            Self::Q4_1 => 20,
            Self::Q8_0 => 34,
            Self::Q4K | Self::Q5K | Self::Q6K => self.k_type().map_or(0, KType::block_bytes),
        }
    }

    /// Bytes of quants of one packed (group, block of 32); its scales follow.
    fn packed_quant_bytes(self) -> usize {
        let nibbles = GROUP * QK / 2;
        match self {
            Self::Q4_1 | Self::Q4K => nibbles,
            Self::Q8_0 => GROUP * QK,
            // One plane of fifth bits / two planes of bit pairs (see `pack_k_block`).
            Self::Q5K => nibbles + GROUP * QK / 8,
            Self::Q6K => nibbles + GROUP * QK / 4,
        }
    }

    /// Bytes of one packed (group, block of 32): quants, then the 8 rows' scales: f16 `d`
    /// (and `m` for Q4_1); for the K-quants, u8 scale and min (Q4K, Q5K) or the i8 scales of
    /// the two 16-weight halves (Q6K).
    fn packed_bytes(self) -> usize {
        self.packed_quant_bytes()
            + match self {
                Self::Q4_1 => 2 * GROUP * 2,
                Self::Q8_0 => GROUP * 2,
                Self::Q4K | Self::Q5K | Self::Q6K => 2 * GROUP,
            }
    }

    /// f32 values per (group, super-block) in [`QMatrix`]'s `supers`: the 8 rows' `d` and,
    /// with mins, their `dmin`.
    fn super_floats(self) -> usize {
        match self {
            Self::Q4K | Self::Q5K => 2 * GROUP,
            Self::Q6K => GROUP,
            Self::Q4_1 | Self::Q8_0 => 0,
        }
    }
}

/// Q4_0 and Q5_0 blocks rewritten as Q8_0 blocks, exactly: both dequantize as `d * (q - o)`
/// with an f16 `d` and a small integer `q - o` (4 or 5 bits, `o` = 8 or 16), which an i8 holds,
/// and Q8_0 dequantizes as `d * q8`. The products then run on the Q8_0 kernels against Q8_0
/// activations, which is what ggml pairs Q4_0 / Q5_0 weights with too. Costs 34 bytes per 32
/// weights instead of 18 / 22. `None` for other types; an error if `data` is not whole blocks.
fn widen_to_q8_0(dtype: GgmlDType, data: &[u8]) -> Option<Result<Vec<u8>>> {
    let (block, offset) = match dtype {
        GgmlDType::Q4_0 => (18, 8i16),
        GgmlDType::Q5_0 => (22, 16i16),
        _ => return None,
    };
    if !data.len().is_multiple_of(block) {
        return Some(Err(LlamaError::State(format!(
            "{dtype:?} data of {} bytes is not whole {block}-byte blocks",
            data.len()
        ))));
    }
    let mut out = Vec::with_capacity(data.len() / block * 34);
    for b in data.chunks_exact(block) {
        out.extend_from_slice(&b[..2]);
        let (high, qs) = if dtype == GgmlDType::Q5_0 {
            (u32::from_le_bytes([b[2], b[3], b[4], b[5]]), &b[6..22])
        } else {
            (0, &b[2..18])
        };
        // Element j < 16 is the low nibble of qs[j], element j + 16 the high one; Q5_0's fifth
        // bit of element e is bit e of `high`.
        for e in 0..QK {
            let nibble = if e < 16 {
                qs[e] & 0x0f
            } else {
                qs[e - 16] >> 4
            };
            let fifth = (((high >> e) & 1) as u8) << 4;
            out.push(((nibble | fifth) as i16 - offset) as i8 as u8);
        }
    }
    Some(Ok(out))
}

/// Which implementation runs the dot products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Portable Rust; the reference the SIMD kernels are tested against.
    Scalar,
    /// AVX2 + FMA + F16C (`vpmaddubsw` / `vpmaddwd`).
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
            Kernel::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
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

    /// The kernel used by [`QMatrix::matmul`]: the fastest available one, unless the
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
    /// accumulators of two rows, AVX-512's 32 registers those of eight (measured on
    /// Qwen2.5-Coder-1.5B Q4_K_M prefill: 122 tok/s with eight, 92 with four; SmolLM2 within
    /// noise).
    fn x_tile(self) -> usize {
        match self {
            Kernel::Scalar => 4,
            Kernel::Avx2 => 2,
            Kernel::Avx512Vnni => 8,
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

fn read_f16(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Pack one GGUF Q4_1 / Q8_0 block (row `r` of its group) into its packed (group, block).
fn pack_32_block(format: QFormat, src: &[u8], r: usize, dst: &mut [u8]) {
    let qb = format.packed_quant_bytes();
    match format {
        QFormat::Q4_1 => {
            for j in 0..4 {
                dst[j * 32 + r * 4..][..4].copy_from_slice(&src[4 + j * 4..][..4]);
            }
            dst[qb + 2 * r..][..2].copy_from_slice(&src[0..2]);
            dst[qb + 2 * GROUP + 2 * r..][..2].copy_from_slice(&src[2..4]);
        }
        QFormat::Q8_0 => {
            for j in 0..8 {
                for i in 0..4 {
                    // q + 128 as u8: vpdpbusd multiplies unsigned by signed bytes.
                    dst[j * 32 + r * 4 + i] = src[2 + j * 4 + i] ^ 0x80;
                }
            }
            dst[qb + 2 * r..][..2].copy_from_slice(&src[0..2]);
        }
        QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => unreachable!("K-quants use pack_k_block"),
    }
}

/// Pack the 32 unsigned quants `q` of a K-quant block (row `r` of its group): low nibbles
/// paired like Q4_1 (byte `32j + 4r + i` = element `4j + i` | element `16 + 4j + i` << 4, j < 4),
/// then the bits above the nibble in planes laid out the same way, so the kernels unpack them
/// with the same shifts for every row:
/// - Q5K, one 32-byte plane: bit j (j < 4) of byte `4r + i` is element `4j + i`'s fifth bit,
///   bit 4 + j element `16 + 4j + i`'s;
/// - Q6K, two planes (elements < 16, elements >= 16): bits 2j..2j+2 of byte `4r + i` are the
///   top two bits of element `4j + i` (of the plane's half).
fn pack_k_block(format: QFormat, q: &[u8], r: usize, dst: &mut [u8]) {
    for j in 0..4 {
        for i in 0..4 {
            let (lo, hi) = (q[4 * j + i], q[16 + 4 * j + i]);
            dst[j * 32 + r * 4 + i] = (lo & 0x0f) | ((hi & 0x0f) << 4);
            let at = GROUP * QK / 2 + r * 4 + i;
            match format {
                QFormat::Q5K => dst[at] |= ((lo >> 4) & 1) << j | ((hi >> 4) & 1) << (4 + j),
                QFormat::Q6K => {
                    dst[at] |= ((lo >> 4) & 3) << (2 * j);
                    dst[at + 32] |= ((hi >> 4) & 3) << (2 * j);
                }
                _ => {}
            }
        }
    }
}

/// Unsigned quant of element `e` of row `r` in a packed (group, block) of a nibble format
/// (Q4_1, Q4K, Q5K, Q6K): its nibble plus, for Q5K / Q6K, the bits from the planes.
fn k_quant(format: QFormat, blk: &[u8], r: usize, e: usize) -> u8 {
    let byte = blk[(e % 16 / 4) * 32 + r * 4 + e % 4];
    let nibble = if e < 16 { byte & 0x0f } else { byte >> 4 };
    let plane = GROUP * QK / 2 + r * 4 + e % 4;
    match format {
        QFormat::Q5K => nibble | ((blk[plane] >> (e / 4)) & 1) << 4,
        QFormat::Q6K => nibble | ((blk[plane + (e / 16) * 32] >> (2 * (e % 16 / 4))) & 3) << 4,
        _ => nibble,
    }
}

/// Quantized weights `[rows, cols]` repacked for the kernels (see the module docs).
#[derive(Clone)]
pub struct QMatrix {
    format: QFormat,
    rows: usize,
    cols: usize,
    /// Blocks of 32 per row.
    nb: usize,
    /// Row groups; the last one is zero-padded when `rows % GROUP != 0`.
    groups: usize,
    /// Per (group, block), `format.packed_bytes()`: the quants as vectors of 32 bytes (vector
    /// j holds elements 4j..4j+4 of row r at bytes 4r..4r+4; Q4_1 and the K-quants pair
    /// nibbles like GGUF's Q4_1, so vector j also carries elements 16+4j..16+4j+4 in the high
    /// nibbles; Q8_0 stores `q + 128` as u8), then the rows' scales (see `packed_bytes`).
    data: Vec<u8>,
    /// K-quants: per (group, super-block), `format.super_floats()` values: the rows' `d`, then
    /// (Q4K, Q5K) their `dmin`. Empty for the other formats.
    supers: Vec<f32>,
}

impl std::fmt::Debug for QMatrix {
    // The weights themselves would flood any debug print of a model.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QMatrix<{:?}>[{}, {}]",
            self.format, self.rows, self.cols
        )
    }
}

impl QMatrix {
    /// Repack GGUF data of a `[rows, cols]` matrix (row-major blocks).
    ///
    /// Errors: `cols` not a positive multiple of the format's block (32, or 256 for the
    /// K-quants), or `data` not exactly the blocks of `rows * cols` weights.
    pub fn from_ggml(format: QFormat, rows: usize, cols: usize, data: &[u8]) -> Result<Self> {
        let blen = format.ggml_block_len();
        if cols == 0 || !cols.is_multiple_of(blen) {
            return Err(LlamaError::Unsupported(format!(
                "{format:?} matrix with {cols} columns (must be a positive multiple of {blen})"
            )));
        }
        let nb = cols / QK;
        let src_blocks = cols / blen;
        let src_block = format.ggml_block_bytes();
        let expected = rows
            .checked_mul(src_blocks)
            .and_then(|b| b.checked_mul(src_block));
        if expected != Some(data.len()) {
            return Err(LlamaError::State(format!(
                "{format:?} matrix [{rows}, {cols}] needs {} bytes, got {}",
                expected.map_or_else(|| "too many".to_string(), |e| e.to_string()),
                data.len()
            )));
        }
        let groups = rows.div_ceil(GROUP);
        let pb = format.packed_bytes();
        let qb = format.packed_quant_bytes();
        let sf = format.super_floats();
        let mut packed = vec![0u8; groups * nb * pb];
        let mut supers = vec![0f32; groups * (nb / SUB) * sf];
        for row in 0..rows {
            let (g, r) = (row / GROUP, row % GROUP);
            for sblk in 0..src_blocks {
                let src = &data[(row * src_blocks + sblk) * src_block..][..src_block];
                let at = |b: usize| (g * nb + b) * pb;
                match format.k_type() {
                    None => {
                        let dst = &mut packed[at(sblk)..][..pb];
                        pack_32_block(format, src, r, dst);
                    }
                    Some(kind) => {
                        let k = kquant::decode(kind, src);
                        let sup = &mut supers[(g * (nb / SUB) + sblk) * sf..][..sf];
                        sup[r] = k.d;
                        if sf == 2 * GROUP {
                            sup[GROUP + r] = k.dmin;
                        }
                        for j in 0..SUB {
                            let dst = &mut packed[at(sblk * SUB + j)..][..pb];
                            pack_k_block(format, &k.q[j * QK..][..QK], r, dst);
                            let (s0, s1) = match kind {
                                KType::Q6K => (k.sc16[2 * j] as u8, k.sc16[2 * j + 1] as u8),
                                KType::Q4K | KType::Q5K => (k.sc[j], k.m[j]),
                            };
                            dst[qb + r] = s0;
                            dst[qb + GROUP + r] = s1;
                        }
                    }
                }
            }
        }
        Ok(Self {
            format,
            rows,
            cols,
            nb,
            groups,
            data: packed,
            supers,
        })
    }

    /// Repack a candle tensor of shape `[rows, cols]`; `None` for a dtype without own kernel.
    pub fn from_qtensor(q: &QTensor) -> Result<Option<Self>> {
        let (rows, cols) = q.shape().dims2()?;
        if let Some(format) = QFormat::from_ggml(q.dtype()) {
            return Ok(Some(Self::from_ggml(format, rows, cols, &q.data()?)?));
        }
        match widen_to_q8_0(q.dtype(), &q.data()?) {
            Some(blocks) => Ok(Some(Self::from_ggml(QFormat::Q8_0, rows, cols, &blocks?)?)),
            None => Ok(None),
        }
    }

    /// Whether [`QMatrix::from_qtensor`] takes a tensor of this type: the own formats, and the
    /// symmetric 32-value formats it widens losslessly into Q8_0.
    pub fn takes(dtype: GgmlDType) -> bool {
        QFormat::from_ggml(dtype).is_some() || matches!(dtype, GgmlDType::Q4_0 | GgmlDType::Q5_0)
    }

    /// The weight format.
    pub fn format(&self) -> QFormat {
        self.format
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `row` as f32, bit-identical to candle's (and ggml's) dequantization.
    fn dequantize_row_into(&self, row: usize, out: &mut [f32]) {
        let (g, r) = (row / GROUP, row % GROUP);
        let (pb, qb) = (self.format.packed_bytes(), self.format.packed_quant_bytes());
        let sf = self.format.super_floats();
        for (b, ob) in out.chunks_exact_mut(QK).enumerate() {
            let blk = &self.data[(g * self.nb + b) * pb..][..pb];
            let sup = &self.supers[(g * (self.nb / SUB) + b / SUB) * sf..][..sf];
            match self.format {
                QFormat::Q4_1 => {
                    let d = read_f16(blk, qb + 2 * r);
                    let m = read_f16(blk, qb + 2 * GROUP + 2 * r);
                    for (e, o) in ob.iter_mut().enumerate() {
                        // The expression of ggml's / candle's dequantize_row_q4_1.
                        *o = k_quant(QFormat::Q4_1, blk, r, e) as f32 * d + m;
                    }
                }
                QFormat::Q8_0 => {
                    let d = read_f16(blk, qb + 2 * r);
                    for (e, o) in ob.iter_mut().enumerate() {
                        let byte = blk[(e / 4) * 32 + r * 4 + e % 4];
                        *o = ((byte ^ 0x80) as i8) as f32 * d;
                    }
                }
                QFormat::Q4K | QFormat::Q5K => {
                    // dequantize_row_q4_K / _q5_K: `d1 * q - m1`, d1 = d * sc, m1 = dmin * m.
                    let d1 = sup[r] * blk[qb + r] as f32;
                    let m1 = sup[GROUP + r] * blk[qb + GROUP + r] as f32;
                    for (e, o) in ob.iter_mut().enumerate() {
                        *o = d1 * k_quant(self.format, blk, r, e) as f32 - m1;
                    }
                }
                QFormat::Q6K => {
                    // dequantize_row_q6_K: `d * sc * (q - 32)`.
                    for (e, o) in ob.iter_mut().enumerate() {
                        let sc = blk[qb + (e / 16) * GROUP + r] as i8;
                        let q = k_quant(QFormat::Q6K, blk, r, e) as i32 - 32;
                        *o = sup[r] * sc as f32 * q as f32;
                    }
                }
            }
        }
    }

    /// Row `row` as f32 (embedding lookup). Errors: `row >= rows`.
    pub fn dequantize_row(&self, row: usize) -> Result<Vec<f32>> {
        if row >= self.rows {
            return Err(LlamaError::State(format!(
                "row {row} of a {}-row matrix",
                self.rows
            )));
        }
        let mut out = vec![0f32; self.cols];
        self.dequantize_row_into(row, &mut out);
        Ok(out)
    }

    /// The weights as dense f32 `[rows, cols]`, bit-identical to candle's dequantization.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        for (row, o) in out.chunks_exact_mut(self.cols).enumerate() {
            self.dequantize_row_into(row, o);
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
        let acts = Q8Acts::quantize(kernel, x, m, self.nb);
        let out_ptr = OutPtr(out.as_mut_ptr());
        let tile = kernel.x_tile();
        let work = |groups: std::ops::Range<usize>| {
            let mut tmp = [[0f32; GROUP]; MAX_TILE];
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
                            std::ptr::copy_nonoverlapping(
                                vals.as_ptr(),
                                out_ptr.get().add(at),
                                live,
                            )
                        };
                    }
                    x0 += c;
                }
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(self.groups, work);
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

/// Activation rows quantized per block of 32 (Q8_1, which carries Q8_0 as well).
struct Q8Acts {
    /// `[m, nb, 32]`.
    qs: Vec<i8>,
    /// Per (row, block): f16-rounded `d`.
    d: Vec<f32>,
    /// Per (row, block): f16-rounded `d * sum(q)` (Q8_1's `s`).
    s: Vec<f32>,
    /// Per (row, block): `sum(q)` (undoes the +128 of packed Q8_0 weights).
    sum: Vec<i32>,
    /// Per (row, block): `sum(q)` over the first 16 elements (undoes Q6K's offset of 32 per
    /// 16-weight half).
    sum_lo: Vec<i32>,
}

impl Q8Acts {
    fn quantize(kernel: Kernel, x: &[f32], m: usize, nb: usize) -> Self {
        let mut a = Self {
            qs: vec![0i8; m * nb * QK],
            d: vec![0f32; m * nb],
            s: vec![0f32; m * nb],
            sum: vec![0i32; m * nb],
            sum_lo: vec![0i32; m * nb],
        };
        match kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller checked `kernel.is_available()` (AVX2 + F16C); the buffers
            // hold `x.len() / 32` blocks.
            Kernel::Avx2 | Kernel::Avx512Vnni => unsafe { x86::quantize(x, &mut a) },
            _ => a.quantize_scalar(x),
        }
        a
    }

    /// ggml's x86 quantizer in scalar form: `q = round_half_even(x * (127 / amax))`.
    fn quantize_scalar(&mut self, x: &[f32]) {
        for (i, xb) in x.chunks_exact(QK).enumerate() {
            let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let mut sum = 0i32;
            for (e, (q, &v)) in self.qs[i * QK..][..QK].iter_mut().zip(xb).enumerate() {
                // Round half to even via the 1.5 * 2^23 shift (|v * id| <= 127); NaN /
                // infinite inputs saturate in the cast (their outputs are meaningless, but
                // nothing panics).
                const SHIFT: f32 = 12_582_912.0;
                let r = (v * id + SHIFT) - SHIFT;
                *q = r as i8;
                sum += *q as i32;
                if e == QK / 2 - 1 {
                    self.sum_lo[i] = sum;
                }
            }
            self.set_scales(i, amax, sum);
        }
    }

    fn set_scales(&mut self, i: usize, amax: f32, sum: i32) {
        let d = amax / 127.0;
        self.d[i] = round_f16(d);
        self.s[i] = round_f16(d * sum as f32);
        self.sum[i] = sum;
    }
}

/// Outputs of group `g` for activation rows `x0..x0 + c` (`c <= MAX_TILE`) into `out[0..c]`.
fn run_group(
    kernel: Kernel,
    w: &QMatrix,
    g: usize,
    a: &Q8Acts,
    x0: usize,
    c: usize,
    out: &mut Tile,
) {
    #[cfg(target_arch = "x86_64")]
    macro_rules! tiles {
        ($f:ident) => {
            // SAFETY: `matmul_with` checked `kernel.is_available()`; indices are in range
            // because g < groups, x0 + c <= m and every buffer was sized from (groups, nb, m).
            unsafe {
                match c {
                    1 => x86::$f::<1>(w, g, a, x0, out),
                    2 => x86::$f::<2>(w, g, a, x0, out),
                    3 => x86::$f::<3>(w, g, a, x0, out),
                    4 => x86::$f::<4>(w, g, a, x0, out),
                    5 => x86::$f::<5>(w, g, a, x0, out),
                    6 => x86::$f::<6>(w, g, a, x0, out),
                    7 => x86::$f::<7>(w, g, a, x0, out),
                    _ => x86::$f::<8>(w, g, a, x0, out),
                }
            }
        };
    }
    match (kernel, w.format) {
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx2, QFormat::Q4_1) => tiles!(q41_avx2),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx512Vnni, QFormat::Q4_1) => tiles!(q41_vnni),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx2, QFormat::Q8_0) => tiles!(q80_avx2),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx512Vnni, QFormat::Q8_0) => tiles!(q80_vnni),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx2, QFormat::Q4K) => tiles!(q4k_avx2),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx512Vnni, QFormat::Q4K) => tiles!(q4k_vnni),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx2, QFormat::Q5K) => tiles!(q5k_avx2),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx512Vnni, QFormat::Q5K) => tiles!(q5k_vnni),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx2, QFormat::Q6K) => tiles!(q6k_avx2),
        #[cfg(target_arch = "x86_64")]
        (Kernel::Avx512Vnni, QFormat::Q6K) => tiles!(q6k_vnni),
        (_, QFormat::Q4_1) => q41_scalar(w, g, a, x0, c, out),
        (_, QFormat::Q8_0) => q80_scalar(w, g, a, x0, c, out),
        (_, QFormat::Q4K | QFormat::Q5K) => kmin_scalar(w, g, a, x0, c, out),
        (_, QFormat::Q6K) => q6k_scalar(w, g, a, x0, c, out),
    }
}

/// Reference Q4_1 kernel. Per output: `acc_d = fma(isum, d_w * d_x, acc_d)` and
/// `acc_m = fma(m_w, s_x, acc_m)` over blocks, result `acc_d + acc_m`: the SIMD kernels do the
/// same operations lane-wise.
fn q41_scalar(w: &QMatrix, g: usize, a: &Q8Acts, x0: usize, c: usize, out: &mut Tile) {
    let (nb, pb, qb) = (w.nb, w.format.packed_bytes(), w.format.packed_quant_bytes());
    for (ci, o) in out.iter_mut().enumerate().take(c) {
        let xr = x0 + ci;
        let mut acc_d = [0f32; GROUP];
        let mut acc_m = [0f32; GROUP];
        for b in 0..nb {
            let blk = &w.data[(g * nb + b) * pb..][..pb];
            let xq = &a.qs[(xr * nb + b) * QK..][..QK];
            let (dx, sx) = (a.d[xr * nb + b], a.s[xr * nb + b]);
            for r in 0..GROUP {
                let mut isum = 0i32;
                for j in 0..4 {
                    for i in 0..4 {
                        let byte = blk[j * 32 + r * 4 + i];
                        isum += (byte & 0x0f) as i32 * xq[j * 4 + i] as i32;
                        isum += (byte >> 4) as i32 * xq[16 + j * 4 + i] as i32;
                    }
                }
                let dw = read_f16(blk, qb + 2 * r);
                let mw = read_f16(blk, qb + 2 * GROUP + 2 * r);
                acc_d[r] = (isum as f32).mul_add(dw * dx, acc_d[r]);
                acc_m[r] = mw.mul_add(sx, acc_m[r]);
            }
        }
        for r in 0..GROUP {
            o[r] = acc_d[r] + acc_m[r];
        }
    }
}

/// Reference Q8_0 kernel. Per output: `acc = fma(isum, d_w * d_x, acc)` over blocks.
fn q80_scalar(w: &QMatrix, g: usize, a: &Q8Acts, x0: usize, c: usize, out: &mut Tile) {
    let (nb, pb, qb) = (w.nb, w.format.packed_bytes(), w.format.packed_quant_bytes());
    for (ci, o) in out.iter_mut().enumerate().take(c) {
        let xr = x0 + ci;
        let mut acc = [0f32; GROUP];
        for b in 0..nb {
            let blk = &w.data[(g * nb + b) * pb..][..pb];
            let xq = &a.qs[(xr * nb + b) * QK..][..QK];
            let dx = a.d[xr * nb + b];
            for r in 0..GROUP {
                let mut isum = 0i32;
                for j in 0..8 {
                    for i in 0..4 {
                        let q = (blk[j * 32 + r * 4 + i] ^ 0x80) as i8;
                        isum += q as i32 * xq[j * 4 + i] as i32;
                    }
                }
                let dw = read_f16(blk, qb + 2 * r);
                acc[r] = (isum as f32).mul_add(dw * dx, acc[r]);
            }
        }
        *o = acc;
    }
}

/// Reference Q4K / Q5K kernel. Per output: `acc_d = fma(isum, (d * sc) * d_x, acc_d)` and
/// `acc_m = fma(-(dmin * m), s_x, acc_m)` over blocks, result `acc_d + acc_m` (Q4_1's scheme
/// with the block's scale and min made from the super-block's; the products are exact).
fn kmin_scalar(w: &QMatrix, g: usize, a: &Q8Acts, x0: usize, c: usize, out: &mut Tile) {
    let (nb, pb, qb) = (w.nb, w.format.packed_bytes(), w.format.packed_quant_bytes());
    for (ci, o) in out.iter_mut().enumerate().take(c) {
        let xr = x0 + ci;
        let mut acc_d = [0f32; GROUP];
        let mut acc_m = [0f32; GROUP];
        for b in 0..nb {
            let blk = &w.data[(g * nb + b) * pb..][..pb];
            let sup = &w.supers[(g * (nb / SUB) + b / SUB) * 2 * GROUP..][..2 * GROUP];
            let xq = &a.qs[(xr * nb + b) * QK..][..QK];
            let (dx, sx) = (a.d[xr * nb + b], a.s[xr * nb + b]);
            for r in 0..GROUP {
                let isum: i32 = (0..QK)
                    .map(|e| k_quant(w.format, blk, r, e) as i32 * xq[e] as i32)
                    .sum();
                let dw = sup[r] * blk[qb + r] as f32;
                let mw = sup[GROUP + r] * blk[qb + GROUP + r] as f32;
                acc_d[r] = (isum as f32).mul_add(dw * dx, acc_d[r]);
                acc_m[r] = (-mw).mul_add(sx, acc_m[r]);
            }
        }
        for r in 0..GROUP {
            o[r] = acc_d[r] + acc_m[r];
        }
    }
}

/// Reference Q6K kernel. Per output: the two 16-weight halves' integer sums with the offset
/// removed (`sum(q * x) - 32 * sum(x)`), weighted by their i8 scales in i32 (exact), then
/// `acc = fma(isum, d * d_x, acc)` over blocks.
fn q6k_scalar(w: &QMatrix, g: usize, a: &Q8Acts, x0: usize, c: usize, out: &mut Tile) {
    let (nb, pb, qb) = (w.nb, w.format.packed_bytes(), w.format.packed_quant_bytes());
    for (ci, o) in out.iter_mut().enumerate().take(c) {
        let xr = x0 + ci;
        let mut acc = [0f32; GROUP];
        for b in 0..nb {
            let blk = &w.data[(g * nb + b) * pb..][..pb];
            let sup = &w.supers[(g * (nb / SUB) + b / SUB) * GROUP..][..GROUP];
            let xi = xr * nb + b;
            let xq = &a.qs[xi * QK..][..QK];
            let dx = a.d[xi];
            let (sum_lo, sum_hi) = (a.sum_lo[xi], a.sum[xi] - a.sum_lo[xi]);
            for r in 0..GROUP {
                let half = |h: usize| -> i32 {
                    (h * 16..h * 16 + 16)
                        .map(|e| k_quant(QFormat::Q6K, blk, r, e) as i32 * xq[e] as i32)
                        .sum()
                };
                let lo = half(0) - 32 * sum_lo;
                let hi = half(1) - 32 * sum_hi;
                let (sc_lo, sc_hi) = (blk[qb + r] as i8 as i32, blk[qb + GROUP + r] as i8 as i32);
                let isum = lo * sc_lo + hi * sc_hi;
                acc[r] = (isum as f32).mul_add(sup[r] * dx, acc[r]);
            }
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Q8Acts, QFormat, QMatrix, Tile, GROUP, QK, SUB};
    use std::arch::x86_64::*;

    /// The eight unpacked Q4_1 weight vectors of a (group, block): vector `j` holds elements
    /// 4j..4j+4 of each row (j < 4 from low nibbles, j >= 4 from high nibbles).
    #[inline(always)]
    unsafe fn unpack_q41(p: *const u8) -> [__m256i; 8] {
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

    /// The eight packed Q8_0 weight vectors (`q + 128`) of a (group, block).
    #[inline(always)]
    unsafe fn load_q80(p: *const u8) -> [__m256i; 8] {
        let l = |j: usize| _mm256_loadu_si256(p.add(32 * j) as *const __m256i);
        [l(0), l(1), l(2), l(3), l(4), l(5), l(6), l(7)]
    }

    /// Eight f16 scales -> f32.
    #[inline(always)]
    unsafe fn scales(p: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }

    /// Four activation bytes (elements 4j..4j+4 of a block) in every i32 lane.
    #[inline(always)]
    unsafe fn bcast4(x: *const i8, j: usize) -> __m256i {
        _mm256_set1_epi32(std::ptr::read_unaligned(x.add(4 * j) as *const i32))
    }

    /// `acc += isum * (d_w * d_x)` lane-wise (see `q41_scalar` / `q80_scalar`).
    #[inline(always)]
    unsafe fn acc_scaled(isum: __m256i, dw: __m256, dx: f32, acc: &mut __m256) {
        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(dx));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, *acc);
    }

    /// One block's eight row sums from unpacked Q4_1 weights, AVX2: u4 * i8 pairs stay within
    /// +-3810, so eight `vpmaddubsw` results add up in i16 before one widening `vpmaddwd`.
    #[inline(always)]
    unsafe fn dot_q41_avx2(u: &[__m256i; 8], x: *const i8) -> __m256i {
        let mut s16 = _mm256_maddubs_epi16(u[0], bcast4(x, 0));
        for (j, uj) in u.iter().enumerate().skip(1) {
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(*uj, bcast4(x, j)));
        }
        _mm256_madd_epi16(s16, _mm256_set1_epi16(1))
    }

    /// One block's eight row sums with `vpdpbusd`, in two chains to halve its latency.
    #[inline(always)]
    unsafe fn dot_vnni(u: &[__m256i; 8], x: *const i8) -> __m256i {
        let mut s0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[0], bcast4(x, 0));
        let mut s1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[4], bcast4(x, 4));
        for j in 1..4 {
            s0 = _mm256_dpbusd_epi32(s0, u[j], bcast4(x, j));
            s1 = _mm256_dpbusd_epi32(s1, u[j + 4], bcast4(x, j + 4));
        }
        _mm256_add_epi32(s0, s1)
    }

    /// One block's eight row sums from packed Q8_0 weights (`q + 128`), AVX2: the products of
    /// `vpmaddubsw` must stay unsigned x signed without saturating, so it multiplies `|q|` by
    /// `x` carrying the sign of `q` (at most 128 * 127 * 2 per pair) and widens each step.
    #[inline(always)]
    unsafe fn dot_q80_avx2(u: &[__m256i; 8], x: *const i8) -> __m256i {
        let flip = _mm256_set1_epi8(-128);
        let ones = _mm256_set1_epi16(1);
        let mut s = _mm256_setzero_si256();
        for (j, uj) in u.iter().enumerate() {
            let q = _mm256_xor_si256(*uj, flip);
            let p = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(bcast4(x, j), q));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
        }
        s
    }

    /// Unpacked Q5K weights (0..=31): the nibbles plus the fifth-bit plane, each bit moved to
    /// bit 4 (see `pack_k_block`; 16-bit shifts never carry a neighbour byte's bit into 0x10).
    #[inline(always)]
    unsafe fn unpack_q5k(p: *const u8) -> [__m256i; 8] {
        let mut u = unpack_q41(p);
        let h = _mm256_loadu_si256(p.add(GROUP * QK / 2) as *const __m256i);
        let m = _mm256_set1_epi8(0x10);
        let bits = [
            _mm256_slli_epi16(h, 4),
            _mm256_slli_epi16(h, 3),
            _mm256_slli_epi16(h, 2),
            _mm256_slli_epi16(h, 1),
            h,
            _mm256_srli_epi16(h, 1),
            _mm256_srli_epi16(h, 2),
            _mm256_srli_epi16(h, 3),
        ];
        for (uj, b) in u.iter_mut().zip(bits) {
            *uj = _mm256_or_si256(*uj, _mm256_and_si256(b, m));
        }
        u
    }

    /// Unpacked Q6K weights (0..=63, before the offset of 32): the nibbles plus each bit pair
    /// of the two planes moved to bits 4..6.
    #[inline(always)]
    unsafe fn unpack_q6k(p: *const u8) -> [__m256i; 8] {
        let mut u = unpack_q41(p);
        let h0 = _mm256_loadu_si256(p.add(GROUP * QK / 2) as *const __m256i);
        let h1 = _mm256_loadu_si256(p.add(GROUP * QK / 2 + 32) as *const __m256i);
        let m = _mm256_set1_epi8(0x30);
        let pairs = |h: __m256i| {
            [
                _mm256_slli_epi16(h, 4),
                _mm256_slli_epi16(h, 2),
                h,
                _mm256_srli_epi16(h, 2),
            ]
        };
        let (p0, p1) = (pairs(h0), pairs(h1));
        for j in 0..4 {
            u[j] = _mm256_or_si256(u[j], _mm256_and_si256(p0[j], m));
            u[j + 4] = _mm256_or_si256(u[j + 4], _mm256_and_si256(p1[j], m));
        }
        u
    }

    /// `vpmaddubsw` of `u[j]` by the activations' group j.
    #[inline(always)]
    unsafe fn pair(u: &[__m256i; 8], x: *const i8, j: usize) -> __m256i {
        _mm256_maddubs_epi16(u[j], bcast4(x, j))
    }

    /// One block's eight row sums from 5-bit weights, AVX2: four u5 * i8 pairs fit i16
    /// (4 * 2 * 31 * 128 < 2^15), so each half adds in i16 and widens once.
    #[inline(always)]
    unsafe fn dot_u5_avx2(u: &[__m256i; 8], x: *const i8) -> __m256i {
        let ones = _mm256_set1_epi16(1);
        let half = |j: usize| {
            let s = _mm256_add_epi16(
                _mm256_add_epi16(pair(u, x, j), pair(u, x, j + 1)),
                _mm256_add_epi16(pair(u, x, j + 2), pair(u, x, j + 3)),
            );
            _mm256_madd_epi16(s, ones)
        };
        _mm256_add_epi32(half(0), half(4))
    }

    /// The row sums of the two 16-element halves of a block from 6-bit weights, AVX2: two
    /// u6 * i8 pairs fit i16 (2 * 2 * 63 * 128 < 2^15).
    #[inline(always)]
    unsafe fn dot_halves_u6_avx2(u: &[__m256i; 8], x: *const i8) -> (__m256i, __m256i) {
        let ones = _mm256_set1_epi16(1);
        let two =
            |j: usize| _mm256_madd_epi16(_mm256_add_epi16(pair(u, x, j), pair(u, x, j + 1)), ones);
        (
            _mm256_add_epi32(two(0), two(2)),
            _mm256_add_epi32(two(4), two(6)),
        )
    }

    /// The two halves' row sums with `vpdpbusd`.
    #[inline(always)]
    unsafe fn dot_halves_vnni(u: &[__m256i; 8], x: *const i8) -> (__m256i, __m256i) {
        let mut s0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[0], bcast4(x, 0));
        let mut s1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u[4], bcast4(x, 4));
        for j in 1..4 {
            s0 = _mm256_dpbusd_epi32(s0, u[j], bcast4(x, j));
            s1 = _mm256_dpbusd_epi32(s1, u[j + 4], bcast4(x, j + 4));
        }
        (s0, s1)
    }

    /// Eight u8 / i8 per-row scales -> f32 / i32 lanes.
    #[inline(always)]
    unsafe fn u8_lanes(p: *const u8) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i)))
    }

    #[inline(always)]
    unsafe fn i8_lanes(p: *const u8) -> __m256i {
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i))
    }

    /// Q4K / Q5K: `kmin_scalar` lane-wise.
    macro_rules! kmin_kernel {
        ($name:ident, $features:literal, $format:expr, $unpack:ident, $dot:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const C: usize>(
                w: &QMatrix,
                g: usize,
                a: &Q8Acts,
                x0: usize,
                out: &mut Tile,
            ) {
                let (nb, pb, qb) = (w.nb, $format.packed_bytes(), $format.packed_quant_bytes());
                let mut acc_d = [_mm256_setzero_ps(); C];
                let mut acc_m = [_mm256_setzero_ps(); C];
                let base = w.data.as_ptr().add(g * nb * pb);
                let sup = w.supers.as_ptr().add(g * (nb / SUB) * 2 * GROUP);
                for sb in 0..nb / SUB {
                    let d = _mm256_loadu_ps(sup.add(sb * 2 * GROUP));
                    let dmin = _mm256_loadu_ps(sup.add(sb * 2 * GROUP + GROUP));
                    for j in 0..SUB {
                        let b = sb * SUB + j;
                        let blk = base.add(b * pb);
                        let u = $unpack(blk);
                        let dw = _mm256_mul_ps(d, u8_lanes(blk.add(qb)));
                        let mw = _mm256_mul_ps(dmin, u8_lanes(blk.add(qb + GROUP)));
                        for c in 0..C {
                            let xi = (x0 + c) * nb + b;
                            let isum = $dot(&u, a.qs.as_ptr().add(xi * QK));
                            acc_scaled(isum, dw, *a.d.get_unchecked(xi), &mut acc_d[c]);
                            let sx = _mm256_set1_ps(*a.s.get_unchecked(xi));
                            acc_m[c] = _mm256_fnmadd_ps(mw, sx, acc_m[c]);
                        }
                    }
                }
                for c in 0..C {
                    _mm256_storeu_ps(out[c].as_mut_ptr(), _mm256_add_ps(acc_d[c], acc_m[c]));
                }
            }
        };
    }

    /// Q6K: `q6k_scalar` lane-wise.
    macro_rules! q6k_kernel {
        ($name:ident, $features:literal, $dot:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const C: usize>(
                w: &QMatrix,
                g: usize,
                a: &Q8Acts,
                x0: usize,
                out: &mut Tile,
            ) {
                let format = QFormat::Q6K;
                let (nb, pb, qb) = (w.nb, format.packed_bytes(), format.packed_quant_bytes());
                let mut acc = [_mm256_setzero_ps(); C];
                let base = w.data.as_ptr().add(g * nb * pb);
                let sup = w.supers.as_ptr().add(g * (nb / SUB) * GROUP);
                for sb in 0..nb / SUB {
                    let d = _mm256_loadu_ps(sup.add(sb * GROUP));
                    for j in 0..SUB {
                        let b = sb * SUB + j;
                        let blk = base.add(b * pb);
                        let u = unpack_q6k(blk);
                        let sc_lo = i8_lanes(blk.add(qb));
                        let sc_hi = i8_lanes(blk.add(qb + GROUP));
                        for c in 0..C {
                            let xi = (x0 + c) * nb + b;
                            let (lo, hi) = $dot(&u, a.qs.as_ptr().add(xi * QK));
                            let sum_lo = *a.sum_lo.get_unchecked(xi);
                            let sum_hi = *a.sum.get_unchecked(xi) - sum_lo;
                            let lo = _mm256_sub_epi32(lo, _mm256_set1_epi32(32 * sum_lo));
                            let hi = _mm256_sub_epi32(hi, _mm256_set1_epi32(32 * sum_hi));
                            let isum = _mm256_add_epi32(
                                _mm256_mullo_epi32(lo, sc_lo),
                                _mm256_mullo_epi32(hi, sc_hi),
                            );
                            acc_scaled(isum, d, *a.d.get_unchecked(xi), &mut acc[c]);
                        }
                    }
                }
                for c in 0..C {
                    _mm256_storeu_ps(out[c].as_mut_ptr(), acc[c]);
                }
            }
        };
    }

    macro_rules! q41_kernel {
        ($name:ident, $features:literal, $dot:ident) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const C: usize>(
                w: &QMatrix,
                g: usize,
                a: &Q8Acts,
                x0: usize,
                out: &mut Tile,
            ) {
                let (nb, pb) = (w.nb, QFormat::Q4_1.packed_bytes());
                let qb = QFormat::Q4_1.packed_quant_bytes();
                let mut acc_d = [_mm256_setzero_ps(); C];
                let mut acc_m = [_mm256_setzero_ps(); C];
                let base = w.data.as_ptr().add(g * nb * pb);
                for b in 0..nb {
                    let blk = base.add(b * pb);
                    let u = unpack_q41(blk);
                    let dw = scales(blk.add(qb));
                    let mw = scales(blk.add(qb + 2 * GROUP));
                    for c in 0..C {
                        let xi = (x0 + c) * nb + b;
                        let isum = $dot(&u, a.qs.as_ptr().add(xi * QK));
                        acc_scaled(isum, dw, *a.d.get_unchecked(xi), &mut acc_d[c]);
                        let sx = _mm256_set1_ps(*a.s.get_unchecked(xi));
                        acc_m[c] = _mm256_fmadd_ps(mw, sx, acc_m[c]);
                    }
                }
                for c in 0..C {
                    _mm256_storeu_ps(out[c].as_mut_ptr(), _mm256_add_ps(acc_d[c], acc_m[c]));
                }
            }
        };
    }

    macro_rules! q80_kernel {
        ($name:ident, $features:literal, $dot:ident, $offset:expr) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const C: usize>(
                w: &QMatrix,
                g: usize,
                a: &Q8Acts,
                x0: usize,
                out: &mut Tile,
            ) {
                let (nb, pb) = (w.nb, QFormat::Q8_0.packed_bytes());
                let qb = QFormat::Q8_0.packed_quant_bytes();
                let mut acc = [_mm256_setzero_ps(); C];
                let base = w.data.as_ptr().add(g * nb * pb);
                for b in 0..nb {
                    let blk = base.add(b * pb);
                    let u = load_q80(blk);
                    let dw = scales(blk.add(qb));
                    for c in 0..C {
                        let xi = (x0 + c) * nb + b;
                        let mut isum = $dot(&u, a.qs.as_ptr().add(xi * QK));
                        if $offset {
                            // sum((q + 128) * x) - 128 * sum(x) = sum(q * x), exactly.
                            let corr = _mm256_set1_epi32(128 * *a.sum.get_unchecked(xi));
                            isum = _mm256_sub_epi32(isum, corr);
                        }
                        acc_scaled(isum, dw, *a.d.get_unchecked(xi), &mut acc[c]);
                    }
                }
                for c in 0..C {
                    _mm256_storeu_ps(out[c].as_mut_ptr(), acc[c]);
                }
            }
        };
    }

    #[inline(always)]
    unsafe fn round_f16_hw(x: f32) -> f32 {
        let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x));
        _mm_cvtss_f32(_mm_cvtph_ps(h))
    }

    /// Block quantization with the same operations as `Q8Acts::quantize_scalar` (rounding
    /// half to even in both), so finite inputs give identical blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn quantize(x: &[f32], a: &mut Q8Acts) {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        // vpackssdw / vpacksswb interleave 128-bit lanes; this restores element order.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (i, xb) in x.chunks_exact(QK).enumerate() {
            let p = xb.as_ptr();
            let v = [
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            ];
            let m01 = _mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask));
            let m23 = _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask));
            let m = _mm256_max_ps(m01, m23);
            let m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
            let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            let m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            let amax = _mm_cvtss_f32(m4);
            let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            let (lo, hi) = (_mm256_set1_epi32(-128), _mm256_set1_epi32(127));
            let q = |vj: __m256| {
                let r = _mm256_round_ps(
                    _mm256_mul_ps(vj, id),
                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
                );
                // NaN / infinite inputs convert to i32::MIN; clamp to the i8 range the pack
                // below saturates to, so `sum` stays the sum of the stored quants (it was a
                // wrapped sum of i32::MINs, and `128 * sum` overflowed; found by fuzzing).
                let r = _mm256_cvtps_epi32(r);
                _mm256_max_epi32(_mm256_min_epi32(r, hi), lo)
            };
            let (q0, q1, q2, q3) = (q(v[0]), q(v[1]), q(v[2]), q(v[3]));
            let hsum = |s8: __m256i| {
                let s4 = _mm_add_epi32(_mm256_extracti128_si256(s8, 1), _mm256_castsi256_si128(s8));
                let s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
                let s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
                _mm_cvtsi128_si32(s4)
            };
            let lo8 = _mm256_add_epi32(q0, q1);
            let sum_lo = hsum(lo8);
            let sum = hsum(_mm256_add_epi32(lo8, _mm256_add_epi32(q2, q3)));
            let packed = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
            let packed = _mm256_permutevar8x32_epi32(packed, order);
            _mm256_storeu_si256(a.qs.as_mut_ptr().add(i * QK) as *mut __m256i, packed);
            // `set_scales` with F16C's f16 rounding (also to nearest even).
            let d = amax / 127.0;
            *a.d.get_unchecked_mut(i) = round_f16_hw(d);
            *a.s.get_unchecked_mut(i) = round_f16_hw(d * sum as f32);
            *a.sum.get_unchecked_mut(i) = sum;
            *a.sum_lo.get_unchecked_mut(i) = sum_lo;
        }
    }

    q41_kernel!(q41_avx2, "avx2,fma,f16c", dot_q41_avx2);
    q41_kernel!(q41_vnni, "avx2,fma,f16c,avx512vnni,avx512vl", dot_vnni);
    q80_kernel!(q80_avx2, "avx2,fma,f16c", dot_q80_avx2, false);
    kmin_kernel!(
        q4k_avx2,
        "avx2,fma,f16c",
        QFormat::Q4K,
        unpack_q41,
        dot_q41_avx2
    );
    kmin_kernel!(
        q5k_avx2,
        "avx2,fma,f16c",
        QFormat::Q5K,
        unpack_q5k,
        dot_u5_avx2
    );
    q6k_kernel!(q6k_avx2, "avx2,fma,f16c", dot_halves_u6_avx2);
    kmin_kernel!(
        q4k_vnni,
        "avx2,fma,f16c,avx512vnni,avx512vl",
        QFormat::Q4K,
        unpack_q41,
        dot_vnni
    );
    kmin_kernel!(
        q5k_vnni,
        "avx2,fma,f16c,avx512vnni,avx512vl",
        QFormat::Q5K,
        unpack_q5k,
        dot_vnni
    );
    q6k_kernel!(
        q6k_vnni,
        "avx2,fma,f16c,avx512vnni,avx512vl",
        dot_halves_vnni
    );
    q80_kernel!(
        q80_vnni,
        "avx2,fma,f16c,avx512vnni,avx512vl",
        dot_vnni,
        true
    );
}

/// candle entry point: `x [.., cols] -> [.., rows]` for contiguous f32 CPU tensors.
impl candle_core::CustomOp1 for QMatrix {
    fn name(&self) -> &'static str {
        "plansmith-qmatmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("quantized matmul expects f32 activations")
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("quantized matmul expects contiguous activations {layout:?}")
        };
        let mut dims = layout.dims().to_vec();
        if dims.last() != Some(&self.cols) {
            candle_core::bail!(
                "quantized matmul: activations {dims:?} do not end in {} columns",
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
