//! The own Q4_1 / Q8_0 / Q4_K / Q5_K / Q6_K kernels against dense f32 references, candle, and
//! themselves (scalar vs SIMD).

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QMatMul};
use candle_core::{DType, Device, Module, Tensor};
use plansmith_llama::qkernel::{f16_to_f32, f32_to_f16, Kernel, QFormat, QMatrix, QK, QK_K};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn sym(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Random GGUF Q4_1 bytes for `[rows, cols]`: scales like a trained layer's (d ~ 0.01, m ~ -8d).
fn random_q4_1(rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for _ in 0..rows * cols / QK {
        let d = 0.002 + 0.02 * rng.sym().abs();
        let m = -8.0 * d * (1.0 + 0.3 * rng.sym());
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(m).to_le_bytes());
        for _ in 0..QK / 2 {
            out.push((rng.next() & 0xff) as u8);
        }
    }
    out
}

/// Random GGUF Q8_0 bytes for `[rows, cols]`, including the extreme quant -128.
fn random_q8_0(rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 0..rows * cols / QK {
        let d = 0.0005 + 0.002 * rng.sym().abs();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        for e in 0..QK {
            let q = if (i + e) % 97 == 0 {
                0x80
            } else {
                (rng.next() & 0xff) as u8
            };
            out.push(q);
        }
    }
    out
}

/// Random GGUF K-quant bytes for `[rows, cols]`: random quants; for Q4_K / Q5_K random 6-bit
/// scales with mins that centre each sub-block near zero like a trained layer's (every bit of
/// the packed scale bytes occurs); for Q6_K random signed scales.
fn random_k(format: QFormat, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let block = match format {
        QFormat::Q4K => 144,
        QFormat::Q5K => 176,
        _ => 210,
    };
    let mut out = Vec::new();
    for _ in 0..rows * cols / QK_K {
        let mut b: Vec<u8> = (0..block).map(|_| rng.next() as u8).collect();
        let d = 0.0002 + 0.001 * rng.sym().abs();
        if format == QFormat::Q6K {
            b[208..210].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        } else {
            // dmin = 8d (Q4_K) / 16d (Q5_K): a min of about sc * 15/16 puts the sub-block's
            // middle quant (7.5 / 15.5) at zero.
            let levels = if format == QFormat::Q4K { 8.0 } else { 16.0 };
            b[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
            b[2..4].copy_from_slice(&f32_to_f16(d * levels).to_le_bytes());
            let s = &mut b[4..16];
            s.fill(0);
            for j in 0..8 {
                let sc = 1 + (rng.next() % 63) as u8;
                let m = (sc as f32 * (levels - 0.5) / levels * (1.0 + 0.2 * rng.sym()))
                    .round()
                    .clamp(0.0, 63.0) as u8;
                if j < 4 {
                    s[j] = sc;
                    s[j + 4] = m;
                } else {
                    s[j + 4] = (sc & 0x0f) | ((m & 0x0f) << 4);
                    s[j - 4] |= (sc >> 4) << 6;
                    s[j] |= (m >> 4) << 6;
                }
            }
        }
        out.extend(b);
    }
    out
}

fn random_weights(format: QFormat, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    match format {
        QFormat::Q4_1 => random_q4_1(rows, cols, seed),
        QFormat::Q8_0 => random_q8_0(rows, cols, seed),
        QFormat::Q4K | QFormat::Q5K | QFormat::Q6K => random_k(format, rows, cols, seed),
    }
}

fn ggml_dtype(format: QFormat) -> GgmlDType {
    match format {
        QFormat::Q4_1 => GgmlDType::Q4_1,
        QFormat::Q8_0 => GgmlDType::Q8_0,
        QFormat::Q4K => GgmlDType::Q4K,
        QFormat::Q5K => GgmlDType::Q5K,
        QFormat::Q6K => GgmlDType::Q6K,
    }
}

const FORMATS: [QFormat; 5] = [
    QFormat::Q4_1,
    QFormat::Q8_0,
    QFormat::Q4K,
    QFormat::Q5K,
    QFormat::Q6K,
];

/// Whether `cols` is whole GGUF blocks of `format` (256 weights for the K-quants).
fn fits(format: QFormat, cols: usize) -> bool {
    let block = match format {
        QFormat::Q4_1 | QFormat::Q8_0 => QK,
        _ => QK_K,
    };
    cols.is_multiple_of(block)
}

fn random_x(m: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    // Varied magnitudes per block so the per-block activation scales differ.
    (0..m * cols)
        .map(|i| rng.sym() * (1.0 + ((i / QK) % 5) as f32))
        .collect()
}

fn dense_ref(w: &[f32], rows: usize, cols: usize, x: &[f32], m: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * rows];
    for i in 0..m {
        for r in 0..rows {
            y[i * rows + r] = (0..cols)
                .map(|c| w[r * cols + c] as f64 * x[i * cols + c] as f64)
                .sum();
        }
    }
    y
}

/// Worst-case error of Q8_1 activation rounding for one output: each activation moves by at
/// most d_x / 2 from rounding plus 127 * d_x * 2^-11 from storing d_x as f16, and the m * s
/// term moves by the f16 rounding of s.
fn q8_1_bound(w: &[f32], cols: usize, x: &[f32], row: usize, xi: usize, mins: &[f32]) -> f64 {
    let mut bound = 0f64;
    for b in 0..cols / QK {
        let xb = &x[xi * cols + b * QK..][..QK];
        let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs())) as f64;
        let d = amax / 127.0;
        let per = d * (0.5 + 127.0 / 2048.0);
        let wsum: f64 = (0..QK)
            .map(|e| (w[row * cols + b * QK + e] as f64 - mins[row * cols / QK + b] as f64).abs())
            .sum();
        let s = xb
            .iter()
            .map(|v| (*v as f64 / d).round())
            .sum::<f64>()
            .abs()
            * d;
        bound +=
            wsum * per + mins[row * cols / QK + b].abs() as f64 * (s / 2048.0 + per * QK as f64);
    }
    bound
}

/// Standard deviation of the output error if each activation's rounding error is uniform in
/// +-d_x / 2 and independent, plus the relative f16 rounding of d_x applied to each block's
/// contribution and of `s` applied to each block's offset term.
fn q8_1_sigma(
    w: &[f32],
    cols: usize,
    x: &[f32],
    row: usize,
    xi: usize,
    y: f64,
    mins: &[f32],
) -> f64 {
    let mut var = 0f64;
    for b in 0..cols / QK {
        let xb = &x[xi * cols + b * QK..][..QK];
        let d = xb.iter().fold(0f32, |a, v| a.max(v.abs())) as f64 / 127.0;
        let w2: f64 = (0..QK)
            .map(|e| (w[row * cols + b * QK + e] as f64).powi(2))
            .sum();
        var += w2 * d * d / 12.0;
        let s: f64 = xb.iter().map(|v| *v as f64).sum();
        var += (mins[row * cols / QK + b] as f64 * s / 2048.0).powi(2) / 3.0;
        let yb: f64 = (0..QK)
            .map(|e| w[row * cols + b * QK + e] as f64 * xb[e] as f64)
            .sum();
        var += (yb / 2048.0).powi(2) / 3.0;
    }
    let _ = y;
    var.sqrt()
}

/// Per-block offset of the dequantized weights: Q4_1's `m`, the K-quants' `-dmin * min`
/// (ggml's 6-bit packing, decoded here independently of the library); zero for Q8_0 / Q6_K.
fn block_mins(format: QFormat, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let f16 = |b: &[u8]| f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
    (0..rows * cols / QK)
        .map(|i| match format {
            QFormat::Q4_1 => f16(&data[i * 20 + 2..]),
            QFormat::Q4K | QFormat::Q5K => {
                let block = if format == QFormat::Q4K { 144 } else { 176 };
                let b = &data[(i / 8) * block..];
                let (j, s) = (i % 8, &b[4..16]);
                let m = if j < 4 {
                    s[j + 4] & 63
                } else {
                    (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
                };
                -f16(&b[2..]) * m as f32
            }
            QFormat::Q8_0 | QFormat::Q6K => 0.0,
        })
        .collect()
}

#[test]
fn f16_conversions_match_candle() {
    let mut rng = Rng(7);
    let mut vals: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65520.0,
        1e6,
        -1e6,
        6.1e-5,
        5.96e-8,
        2.98e-8,
        2.99e-8,
        1e-9,
        0.1,
        1.0 / 3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        // Ties between neighbouring f16 values: 1 + 2^-11 rounds down, 1 + 3 * 2^-11 up.
        1.0 + 1.0 / 2048.0,
        1.0 + 3.0 / 2048.0,
    ];
    for _ in 0..20_000 {
        let e = (rng.next() % 40) as i32 - 28;
        vals.push(rng.sym() * 2f32.powi(e));
    }
    let t = Tensor::new(vals.as_slice(), &Device::Cpu).unwrap();
    let h = t.to_dtype(DType::F16).unwrap();
    let back: Vec<f32> = h.to_dtype(DType::F32).unwrap().to_vec1().unwrap();
    for (v, want) in vals.iter().zip(back) {
        let got = f16_to_f32(f32_to_f16(*v));
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{v:e}: {got:e} vs candle {want:e}"
        );
    }
    assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
}

#[test]
fn dequantize_is_bit_identical_to_candle() {
    for format in FORMATS {
        for (rows, cols) in [(1, 32), (13, 96), (8, 576), (1, 256), (13, 768), (8, 512)] {
            if !fits(format, cols) {
                continue;
            }
            let data = random_weights(format, rows, cols, rows as u64 * 31 + cols as u64);
            let m = QMatrix::from_ggml(format, rows, cols, &data).unwrap();
            let q = qtensor_from_ggml(ggml_dtype(format), &data, vec![rows, cols], &Device::Cpu)
                .unwrap();
            let want: Vec<f32> = q
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let got = m.dequantize();
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{format:?} [{rows},{cols}] element {i}"
                );
            }
            for row in [0, rows / 2, rows - 1] {
                assert_eq!(m.dequantize_row(row).unwrap(), &want[row * cols..][..cols]);
            }
            assert!(m.dequantize_row(rows).is_err());
        }
    }
}

#[test]
fn matmul_matches_dense_reference_within_q8_rounding() {
    for format in FORMATS {
        for kernel in Kernel::available() {
            // Typical error over all shapes: the worst-case bound below is loose, so also
            // require the errors to be of the size random rounding predicts (a wrong block or
            // scale would be far off). Pooled, because the outputs of one activation row share
            // its rounding errors and a small case alone says little.
            let (mut z2, mut count) = (0f64, 0usize);
            for (rows, cols, m) in [
                (8, 32, 1),
                (13, 96, 3),
                (40, 576, 5),
                (576, 576, 1),
                (3, 1536, 9),
                (8, 256, 1),
                (13, 768, 3),
                (300, 512, 2),
            ] {
                if !fits(format, cols) {
                    continue;
                }
                let data = random_weights(format, rows, cols, 1000 + rows as u64);
                let w = QMatrix::from_ggml(format, rows, cols, &data).unwrap();
                let dense = w.dequantize();
                let mins = block_mins(format, &data, rows, cols);
                let x = random_x(m, cols, 77 + cols as u64);
                let want = dense_ref(&dense, rows, cols, &x, m);
                let got = w.matmul_with(kernel, &x, m).unwrap();
                assert_eq!(got.len(), m * rows);
                for xi in 0..m {
                    for r in 0..rows {
                        let (g, e) = (got[xi * rows + r] as f64, want[xi * rows + r]);
                        z2 += ((g - e) / q8_1_sigma(&dense, cols, &x, r, xi, e, &mins)).powi(2);
                        count += 1;
                        let bound =
                            q8_1_bound(&dense, cols, &x, r, xi, &mins) + 1e-4 * e.abs() + 1e-5;
                        assert!(
                            (g - e).abs() <= bound,
                            "{format:?} {kernel:?} [{rows},{cols}] x{m}: out ({xi},{r}) = {g} vs {e} (bound {bound})"
                        );
                    }
                }
            }
            let z_rms = (z2 / count as f64).sqrt();
            eprintln!("{format:?} {kernel:?}: error rms {z_rms:.3} sigma");
            assert!(
                z_rms < 1.3,
                "{format:?} {kernel:?}: error rms {z_rms} sigma"
            );
        }
    }
}

#[test]
fn matmul_is_close_to_candle() {
    for format in FORMATS {
        let (rows, cols, m) = if fits(format, 576) {
            (64, 576, 4)
        } else {
            (64, 768, 4)
        };
        let data = random_weights(format, rows, cols, 5);
        let w = QMatrix::from_ggml(format, rows, cols, &data).unwrap();
        let q =
            qtensor_from_ggml(ggml_dtype(format), &data, vec![rows, cols], &Device::Cpu).unwrap();
        let x = random_x(m, cols, 6);
        let xt = Tensor::from_vec(x.clone(), (m, cols), &Device::Cpu).unwrap();
        let want: Vec<f32> = QMatMul::from_qtensor(q)
            .unwrap()
            .forward(&xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let got = w.matmul(&x, m).unwrap();
        let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
        for (g, e) in got.iter().zip(&want) {
            // Both quantize activations the same way up to tie rounding (and, for Q4_1, the
            // rounding of `s`), so the gap is far below the activation rounding error itself.
            // For the K-quants candle quantizes activations per 256 (Q8_K, f32 scale), the own
            // kernels per 32 (finer): the gap is about that rounding error.
            let tol = if fits(format, QK) { 2e-3 } else { 1.5e-2 };
            assert!(
                (g - e).abs() <= tol * scale,
                "{format:?}: {g} vs candle {e}"
            );
        }
    }
}

#[test]
fn simd_kernels_equal_scalar_bit_for_bit() {
    let kernels = Kernel::available();
    eprintln!("kernels on this CPU: {kernels:?}");
    for format in FORMATS {
        for rows in [1, 7, 8, 9, 13, 64] {
            for cols in [32, 96, 576, 256, 768] {
                if !fits(format, cols) {
                    continue;
                }
                let data = random_weights(format, rows, cols, (rows * 1000 + cols) as u64);
                let w = QMatrix::from_ggml(format, rows, cols, &data).unwrap();
                for (m, scale) in [(1, 1.0), (2, 1.0), (3, 3e-6), (4, 1.0), (5, 1.0), (9, 1.0)] {
                    // Tiny activations put d and s into f16's subnormal range.
                    let x: Vec<f32> = random_x(m, cols, (m * 7 + cols) as u64)
                        .iter()
                        .map(|v| v * scale)
                        .collect();
                    let scalar = w.matmul_with(Kernel::Scalar, &x, m).unwrap();
                    for &k in &kernels {
                        let got = w.matmul_with(k, &x, m).unwrap();
                        let same = got
                            .iter()
                            .zip(&scalar)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{format:?} {k:?} differs from scalar at [{rows},{cols}] x{m}"
                        );
                    }
                    // A row's result does not depend on which other rows share its tile.
                    let single = w
                        .matmul_with(Kernel::best(), &x[(m - 1) * cols..], 1)
                        .unwrap();
                    let full = w.matmul_with(Kernel::best(), &x, m).unwrap();
                    assert_eq!(&full[(m - 1) * rows..], &single[..]);
                }
            }
        }
    }
}

#[test]
fn activation_ties_round_half_to_even_in_every_kernel() {
    // Q8_0 "selector" rows: row e has q = 1 at element e, d = 1, so y[e] = d_x * q_x[e].
    let mut data = Vec::new();
    for e in 0..QK {
        data.extend_from_slice(&f32_to_f16(1.0).to_le_bytes());
        data.extend((0..QK).map(|i| u8::from(i == e)));
    }
    let w = QMatrix::from_ggml(QFormat::Q8_0, QK, QK, &data).unwrap();
    // amax = 127 makes d_x = 1, so x itself is rounded: ties go to the even neighbour as in
    // ggml's x86 quantizer.
    let mut x = vec![
        127.0f32, 2.5, -3.5, 0.5, -0.5, 1.5, -1.5, 126.5, -126.5, 0.49999997,
    ];
    x.resize(QK, 0.25);
    let want: Vec<f32> = x.iter().map(|v| v.round_ties_even()).collect();
    for k in Kernel::available() {
        assert_eq!(w.matmul_with(k, &x, 1).unwrap(), want, "{k:?}");
    }
}

#[test]
fn candle_op_keeps_leading_dims() {
    let (rows, cols) = (24, 64);
    let data = random_q4_1(rows, cols, 9);
    let w = QMatrix::from_ggml(QFormat::Q4_1, rows, cols, &data).unwrap();
    let x = random_x(6, cols, 10);
    let xt = Tensor::from_vec(x.clone(), (2, 3, cols), &Device::Cpu).unwrap();
    let y = xt.apply_op1_no_bwd(&w).unwrap();
    assert_eq!(y.dims(), &[2, 3, rows]);
    let flat: Vec<f32> = y.flatten_all().unwrap().to_vec1().unwrap();
    assert_eq!(flat, w.matmul(&x, 6).unwrap());
    // Wrong width and non-f32 inputs are errors, not panics.
    let bad = Tensor::zeros((2, cols + 32), DType::F32, &Device::Cpu).unwrap();
    assert!(bad.apply_op1_no_bwd(&w).is_err());
    let half = Tensor::zeros((2, cols), DType::F16, &Device::Cpu).unwrap();
    assert!(half.apply_op1_no_bwd(&w).is_err());
}

#[test]
fn bad_shapes_are_errors() {
    let q41 = QFormat::Q4_1;
    assert!(QMatrix::from_ggml(q41, 4, 33, &[0u8; 80]).is_err());
    assert!(QMatrix::from_ggml(q41, 4, 0, &[]).is_err());
    assert!(QMatrix::from_ggml(q41, 4, 32, &[0u8; 79]).is_err());
    assert!(QMatrix::from_ggml(QFormat::Q8_0, 4, 32, &[0u8; 80]).is_err());
    // K-quants need whole 256-weight super-blocks.
    assert!(QMatrix::from_ggml(QFormat::Q4K, 1, 128, &[0u8; 72]).is_err());
    assert!(QMatrix::from_ggml(QFormat::Q6K, 2, 256, &[0u8; 210]).is_err());
    assert!(QMatrix::from_ggml(QFormat::Q6K, 2, 256, &[0u8; 420]).is_ok());
    assert!(QMatrix::from_ggml(q41, usize::MAX, 64, &[0u8; 40]).is_err());
    let w = QMatrix::from_ggml(q41, 4, 32, &random_q4_1(4, 32, 1)).unwrap();
    assert!(w.matmul(&[0.0; 31], 1).is_err());
    assert!(w.matmul(&[0.0; 64], 1).is_err());
    assert_eq!(w.matmul(&[], 0).unwrap(), Vec::<f32>::new());
    // Zero, infinite and NaN activations neither panic nor poison other rows.
    let mut x = vec![0f32; 3 * 32];
    x[32] = f32::INFINITY;
    x[64] = f32::NAN;
    x[65] = 1.0;
    let y = w.matmul(&x, 3).unwrap();
    assert!(y[..4].iter().all(|v| v.is_finite()));
}

/// Found by fuzzing GGUF files: activations that are NaN or infinite (a model with garbage
/// scales produces them) made the AVX2 quantizer's block sum a wrapped sum of i32::MIN, and
/// the Q8_0 kernel's `128 * sum` overflowed. Every kernel must return (meaningless) numbers.
#[test]
fn non_finite_activations_do_not_panic_any_kernel() {
    let (rows, cols, m) = (16, 64, 3);
    let mut x = random_x(m, cols, 5);
    x[0] = f32::NAN;
    x[33] = f32::INFINITY;
    x[70] = f32::NEG_INFINITY;
    for v in &mut x[cols * 2..] {
        *v = f32::NAN;
    }
    for format in FORMATS {
        let cols = if fits(format, cols) { cols } else { QK_K };
        let mut x = x.clone();
        x.resize(m * cols, f32::NAN);
        let w =
            QMatrix::from_ggml(format, rows, cols, &random_weights(format, rows, cols, 9)).unwrap();
        for kernel in Kernel::available() {
            let y = w.matmul_with(kernel, &x, m).unwrap();
            assert_eq!(y.len(), m * rows, "{format:?} {kernel:?}");
        }
    }
}

#[test]
fn q4_0_and_q5_0_widen_to_q8_0_exactly() {
    // Random bytes with a moderate f16 scale: every nibble and fifth-bit pattern occurs.
    for (dtype, block) in [(GgmlDType::Q4_0, 18usize), (GgmlDType::Q5_0, 22)] {
        let (rows, cols) = (16usize, 128usize);
        let mut rng = Rng(dtype as u64 + 11);
        let mut data = vec![0u8; rows * cols / QK * block];
        for b in data.chunks_exact_mut(block) {
            for byte in b.iter_mut() {
                *byte = rng.next() as u8;
            }
            b[..2].copy_from_slice(&f32_to_f16(0.05 * rng.sym()).to_le_bytes());
        }
        let q = qtensor_from_ggml(dtype, &data, vec![rows, cols], &Device::Cpu).unwrap();
        assert!(QMatrix::takes(dtype));
        let m = QMatrix::from_qtensor(&q).unwrap().expect("widened");
        assert_eq!(m.format(), QFormat::Q8_0);
        let want: Vec<f32> = q
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let got = m.dequantize();
        let differ = got
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(differ, 0, "{dtype:?}: {differ} values differ from candle's");
        // The product against candle's own Q4_0 / Q5_0 kernel (Q8_0 activations on both sides).
        let x = random_x(3, cols, 9);
        let xt = Tensor::from_vec(x.clone(), (3, cols), &Device::Cpu).unwrap();
        let want: Vec<f32> = QMatMul::from_qtensor(q)
            .unwrap()
            .forward(&xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let got = m.matmul(&x, 3).unwrap();
        let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
        for (g, e) in got.iter().zip(&want) {
            assert!(
                (g - e).abs() <= 1e-4 * scale,
                "{dtype:?}: {g} vs candle {e}"
            );
        }
    }
    assert!(QMatrix::takes(GgmlDType::Q4K));
    assert!(!QMatrix::takes(GgmlDType::Q3K));
}
