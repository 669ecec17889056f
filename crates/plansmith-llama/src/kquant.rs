//! GGUF K-quant super-blocks (256 weights: Q4_K, Q5_K, Q6_K) decoded into small unsigned
//! integers and their scales, the form the own kernels repack (see [`crate::qkernel`]).
//!
//! Every weight of a super-block is
//! - Q4_K / Q5_K: `(d * sc[s]) * q - (dmin * m[s])` for the 32-weight sub-block `s`, with `q`
//!   of 4 / 5 bits and 6-bit `sc`, `m`;
//! - Q6_K: `(d * sc[s]) * (q - 32)` for the 16-weight sub-block `s`, with 6-bit `q` and a
//!   signed 8-bit `sc`,
//!
//! where `d` and `dmin` are f16. The byte layouts below are ggml's `block_q4_K`, `block_q5_K`
//! and `block_q6_K`.

/// Weights per K-quant super-block.
pub const QK_K: usize = 256;

/// A decoded super-block.
#[derive(Debug, Clone)]
pub(crate) struct KBlock {
    /// `d` (f16, as f32).
    pub d: f32,
    /// `dmin` (f16, as f32); 0 for Q6_K.
    pub dmin: f32,
    /// Unsigned quants in weight order: Q4_K 0..=15, Q5_K 0..=31, Q6_K 0..=63.
    pub q: [u8; QK_K],
    /// Q4_K / Q5_K: the eight 32-weight sub-blocks' scale and min. Q6_K: unused.
    pub sc: [u8; 8],
    pub m: [u8; 8],
    /// Q6_K: the sixteen 16-weight sub-blocks' signed scales. Q4_K / Q5_K: unused.
    pub sc16: [i8; 16],
}

/// Which K-quant a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KType {
    Q4K,
    Q5K,
    Q6K,
}

impl KType {
    /// Bytes of one GGUF super-block.
    pub(crate) fn block_bytes(self) -> usize {
        match self {
            Self::Q4K => 144,
            Self::Q5K => 176,
            Self::Q6K => 210,
        }
    }
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    crate::qkernel::f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// The 6-bit scale and min of sub-block `j` from the 12 packed bytes of Q4_K / Q5_K: bytes
/// 0..4 hold the scales of sub-blocks 0..4, bytes 4..8 their mins, and bytes 8..12 the low
/// four bits of sub-blocks 4..8 (scale low nibble, min high nibble) whose top two bits sit in
/// bits 6..8 of bytes 0..8.
fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Decode one super-block of `kind` from exactly `kind.block_bytes()` bytes.
pub(crate) fn decode(kind: KType, b: &[u8]) -> KBlock {
    debug_assert_eq!(b.len(), kind.block_bytes());
    let mut k = KBlock {
        d: 0.0,
        dmin: 0.0,
        q: [0; QK_K],
        sc: [0; 8],
        m: [0; 8],
        sc16: [0; 16],
    };
    match kind {
        KType::Q4K | KType::Q5K => {
            k.d = f16_at(b, 0);
            k.dmin = f16_at(b, 2);
            let scales = &b[4..16];
            for j in 0..8 {
                (k.sc[j], k.m[j]) = scale_min(j, scales);
            }
            // Q5_K: 32 bytes of fifth bits (bit s of byte l is weight l of sub-block s), then
            // the nibbles; Q4_K: the nibbles right after the scales.
            let (qh, qs) = match kind {
                KType::Q5K => (Some(&b[16..48]), &b[48..176]),
                _ => (None, &b[16..144]),
            };
            // Sub-blocks 2p and 2p + 1 share 32 bytes: low nibbles, then high nibbles.
            for s in 0..8 {
                for l in 0..32 {
                    let byte = qs[(s / 2) * 32 + l];
                    let nibble = if s % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                    let fifth = qh.map_or(0, |h| ((h[l] >> s) & 1) << 4);
                    k.q[s * 32 + l] = nibble | fifth;
                }
            }
        }
        KType::Q6K => {
            let (ql, qh) = (&b[0..128], &b[128..192]);
            for (s, v) in k.sc16.iter_mut().enumerate() {
                *v = b[192 + s] as i8;
            }
            k.d = f16_at(b, 208);
            // Each 128-weight half: weights l, l + 32, l + 64, l + 96 take the low nibble of
            // ql[l], of ql[l + 32], the high nibble of ql[l], of ql[l + 32], and bit pairs
            // 0, 1, 2, 3 of qh[l].
            for half in 0..2 {
                let (ql, qh) = (&ql[64 * half..], &qh[32 * half..]);
                let q = &mut k.q[128 * half..];
                for l in 0..32 {
                    q[l] = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
                    q[l + 32] = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
                    q[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                    q[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                }
            }
        }
    }
    k
}
