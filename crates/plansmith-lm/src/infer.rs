//! Inference forward of a [`TinyGpt`] on flat `f32` buffers, for decoding one request at a time.
//!
//! A planner feeds a prompt of a few dozen tokens, then one token per step. candle runs each of
//! the ~40 ops of such a step as a separately allocated tensor and grows its KV cache by
//! concatenation; at this model size that overhead is most of the step (~100 µs). [`InferModel`]
//! keeps a copy of the weights as plain vectors and [`InferCache`] keeps key/value rows in
//! growable vectors, so a step is a few dot-product loops. It computes the same function as
//! [`TinyGpt::forward_with_cache`] (to float rounding; `tests/infer.rs` checks both position
//! encodings, chunked feeds and cache snapshots).
//!
//! The copy is taken when the model is loaded for decoding: training changes the candle
//! variables, not this copy, so build a new one after training.

use crate::error::{LmError, Result};
use crate::kernels::{dot, gelu_fwd, linear_fwd, ln_fwd, rope_apply, rope_tables, softmax_causal};
use crate::tiny_gpt::{BlockParams, PosEncoding, TinyGpt, TinyGptConfig};

/// One block's weights, row-major as in the safetensors file.
type Block = BlockParams<Vec<f32>>;

/// One block's weight matrices transposed (`in x out`, row-major): what a short feed reads.
struct Transposed {
    qkv: Vec<f32>,
    proj: Vec<f32>,
    fc: Vec<f32>,
    out: Vec<f32>,
}

/// A decoding copy of a [`TinyGpt`].
pub struct InferModel {
    cfg: TinyGptConfig,
    tok: Vec<f32>,
    /// The token embedding transposed (`d_model x vocab`): the tied head of a short feed.
    tok_t: Vec<f32>,
    pos: Option<Vec<f32>>,
    blocks: Vec<Block>,
    blocks_t: Vec<Transposed>,
    lnf_w: Vec<f32>,
    lnf_b: Vec<f32>,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl std::fmt::Debug for InferModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferModel")
            .field("cfg", &self.cfg)
            .finish()
    }
}

/// Keys and values of one sequence: per layer, one `d_model`-wide row per position (heads side
/// by side). Cloning copies the rows, so a clone is an independent snapshot.
#[derive(Clone, Debug, Default)]
pub struct InferCache {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    len: usize,
}

impl InferCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
    /// Cached positions.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Keep the first `len` positions and drop the rest (a no-op when `len` is not shorter).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        for rows in self.keys.iter_mut().chain(self.values.iter_mut()) {
            let width = rows.len() / self.len;
            rows.truncate(len * width);
        }
        self.len = len;
    }
}

/// Which positions [`InferModel::forward`] returns logits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Only after the last fed token (the next-token distribution).
    Last,
    /// After every fed token (teacher forcing, forced-token log-probs).
    All,
}

impl InferModel {
    /// Copy `model`'s current weights.
    pub fn from_model(model: &TinyGpt) -> Result<Self> {
        let cfg = model.config().clone();
        cfg.validate()?;
        let mut tensors = model.named_tensors();
        let mut take = |name: &str| -> Result<Vec<f32>> {
            let t = tensors
                .remove(name)
                .ok_or_else(|| LmError::Config(format!("model lacks tensor {name}")))?;
            Ok(t.flatten_all()?.to_vec1::<f32>()?)
        };
        let tok = take("tok.weight")?;
        let pos = match cfg.pos {
            PosEncoding::Learned => Some(take("pos.weight")?),
            PosEncoding::Rope => None,
        };
        let mut blocks = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            blocks.push(Block::by_name(i, &mut take)?);
        }
        let lnf_w = take("ln.weight")?;
        let lnf_b = take("ln.bias")?;
        let (cos, sin) = rope_tables(&cfg);
        let d = cfg.d_model;
        let blocks_t = blocks
            .iter()
            .map(|b| Transposed {
                qkv: transpose(&b.qkv_w, 3 * d, d),
                proj: transpose(&b.proj_w, d, d),
                fc: transpose(&b.fc_w, 4 * d, d),
                out: transpose(&b.out_w, d, 4 * d),
            })
            .collect();
        let tok_t = transpose(&tok, cfg.vocab, d);
        Ok(Self {
            cfg,
            tok,
            tok_t,
            pos,
            blocks,
            blocks_t,
            lnf_w,
            lnf_b,
            cos,
            sin,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &TinyGptConfig {
        &self.cfg
    }

    /// Append `tokens` to `cache` and return logits (`rows x vocab`, row-major) after the last
    /// token or after each. On error (an id outside the vocabulary, the block would overflow, a
    /// cache from another shape) the cache is unchanged.
    pub fn forward(&self, tokens: &[u32], cache: &mut InferCache, rows: Rows) -> Result<Vec<f32>> {
        let cfg = &self.cfg;
        let (d, nh, vocab) = (cfg.d_model, cfg.n_head, cfg.vocab);
        let hd = d / nh;
        let t = tokens.len();
        if t == 0 {
            return Err(LmError::Data("forward needs at least one token".into()));
        }
        if let Some(&id) = tokens.iter().find(|&&i| i as usize >= vocab) {
            return Err(LmError::TokenOutOfRange {
                place: "forward_with_cache",
                id,
                vocab,
            });
        }
        let offset = cache.len;
        if offset + t > cfg.block {
            return Err(LmError::ContextOverflow {
                needed: offset + t,
                block: cfg.block,
            });
        }
        if cache.keys.is_empty() {
            cache.keys = vec![Vec::with_capacity(cfg.block * d); cfg.n_layer];
            cache.values = vec![Vec::with_capacity(cfg.block * d); cfg.n_layer];
        } else if cache.keys.len() != cfg.n_layer || cache.keys[0].len() != offset * d {
            return Err(LmError::Config(format!(
                "KV cache of {} layers x {} values does not fit a {}-layer, d_model {} model",
                cache.keys.len(),
                cache.keys[0].len(),
                cfg.n_layer,
                d
            )));
        }

        let mut x = vec![0f32; t * d];
        for (i, &id) in tokens.iter().enumerate() {
            let row = &mut x[i * d..(i + 1) * d];
            row.copy_from_slice(&self.tok[id as usize * d..(id as usize + 1) * d]);
            if let Some(pos) = &self.pos {
                let p = offset + i;
                for (v, &e) in row.iter_mut().zip(&pos[p * d..(p + 1) * d]) {
                    *v += e;
                }
            }
        }
        let eps = cfg.ln_eps as f32;
        let scale = 1.0 / (hd as f32).sqrt();
        let half = hd / 2;
        let total = offset + t;
        let mut a = vec![0f32; t * d];
        let mut stats = vec![0f32; t * 2];
        let mut qkv = vec![0f32; t * 3 * d];
        let mut y = vec![0f32; t * d];
        let mut proj = vec![0f32; t * d];
        let mut fc = vec![0f32; t * 4 * d];
        let mut act = vec![0f32; t * 4 * d];
        let mut scores = vec![0f32; total];
        for (l, (b, bt)) in self.blocks.iter().zip(&self.blocks_t).enumerate() {
            ln_fwd(&x, &b.ln1_w, &b.ln1_b, &mut a, &mut stats, d, eps);
            linear(&mut qkv, &a, (&b.qkv_w, &bt.qkv), &b.qkv_b, t, d, 3 * d);
            let (keys, values) = (&mut cache.keys[l], &mut cache.values[l]);
            for i in 0..t {
                let row = &mut qkv[i * 3 * d..(i + 1) * 3 * d];
                if cfg.pos == PosEncoding::Rope {
                    let p = offset + i;
                    let (c, s) = (
                        &self.cos[p * half..(p + 1) * half],
                        &self.sin[p * half..(p + 1) * half],
                    );
                    for h in 0..2 * nh {
                        rope_apply(&mut row[h * hd..(h + 1) * hd], c, s);
                    }
                }
                keys.extend_from_slice(&row[d..2 * d]);
                values.extend_from_slice(&row[2 * d..3 * d]);
            }
            y.fill(0.0);
            for i in 0..t {
                let n = offset + i + 1; // keys this query sees (causal)
                let (qs, ys) = (&qkv[i * 3 * d..i * 3 * d + d], &mut y[i * d..(i + 1) * d]);
                // The head width as a constant where it is a usual one: its sums stay in
                // registers (a runtime width reloads and stores the output at every key).
                match hd {
                    16 => attend::<16>(qs, keys, values, ys, &mut scores[..n], scale),
                    24 => attend::<24>(qs, keys, values, ys, &mut scores[..n], scale),
                    32 => attend::<32>(qs, keys, values, ys, &mut scores[..n], scale),
                    64 => attend::<64>(qs, keys, values, ys, &mut scores[..n], scale),
                    _ => attend_any(qs, keys, values, ys, &mut scores[..n], scale, hd),
                }
            }
            linear(&mut proj, &y, (&b.proj_w, &bt.proj), &b.proj_b, t, d, d);
            add(&mut x, &proj);
            ln_fwd(&x, &b.ln2_w, &b.ln2_b, &mut a, &mut stats, d, eps);
            linear(&mut fc, &a, (&b.fc_w, &bt.fc), &b.fc_b, t, d, 4 * d);
            gelu_fwd(&fc, &mut act);
            linear(&mut proj, &act, (&b.out_w, &bt.out), &b.out_b, t, 4 * d, d);
            add(&mut x, &proj);
        }
        cache.len = total;

        let first = match rows {
            Rows::Last => t - 1,
            Rows::All => 0,
        };
        let n_rows = t - first;
        let xs = &x[first * d..];
        ln_fwd(
            xs,
            &self.lnf_w,
            &self.lnf_b,
            &mut a[..n_rows * d],
            &mut stats,
            d,
            eps,
        );
        let mut logits = vec![0f32; n_rows * vocab];
        if n_rows <= DOT_ROWS {
            gemv_t(
                &mut logits,
                &a[..n_rows * d],
                &self.tok_t,
                None,
                n_rows,
                d,
                vocab,
            );
        } else {
            for (r, out) in logits.chunks_exact_mut(vocab).enumerate() {
                let h = &a[r * d..(r + 1) * d];
                for (v, o) in out.iter_mut().enumerate() {
                    *o = dot(h, &self.tok[v * d..(v + 1) * d]);
                }
            }
        }
        Ok(logits)
    }
}

/// One query's attention over the `scores.len()` cached positions, every head: `q` and `out`
/// are `d_model` wide (heads side by side), as are the cached key and value rows.
fn attend<const HD: usize>(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scores: &mut [f32],
    scale: f32,
) {
    let d = q.len();
    let n = scores.len();
    for h in 0..d / HD {
        let qh: &[f32; HD] = q[h * HD..(h + 1) * HD].try_into().expect("a head");
        for (j, s) in scores.iter_mut().enumerate() {
            *s = dot(qh, &keys[j * d + h * HD..j * d + (h + 1) * HD]);
        }
        softmax_causal(scores, n, scale);
        let mut acc = [0f32; HD];
        for (j, &p) in scores.iter().enumerate() {
            let v: &[f32; HD] = values[j * d + h * HD..j * d + (h + 1) * HD]
                .try_into()
                .expect("a head");
            for (o, &vv) in acc.iter_mut().zip(v) {
                *o += p * vv;
            }
        }
        out[h * HD..(h + 1) * HD].copy_from_slice(&acc);
    }
}

/// [`attend`] for a head width known only at run time.
fn attend_any(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scores: &mut [f32],
    scale: f32,
    hd: usize,
) {
    let d = q.len();
    let n = scores.len();
    for h in 0..d / hd {
        let qh = &q[h * hd..(h + 1) * hd];
        for (j, s) in scores.iter_mut().enumerate() {
            *s = dot(qh, &keys[j * d + h * hd..j * d + (h + 1) * hd]);
        }
        softmax_causal(scores, n, scale);
        let o = &mut out[h * hd..(h + 1) * hd];
        for (j, &p) in scores.iter().enumerate() {
            for (o, &vv) in o
                .iter_mut()
                .zip(&values[j * d + h * hd..j * d + (h + 1) * hd])
            {
                *o += p * vv;
            }
        }
    }
}

/// Up to this many rows, [`linear`] and the head take [`gemv_t`] instead of the gemm kernel.
const DOT_ROWS: usize = 16;

/// `y = x W^T + b` for `rows` rows; `w` is `(W, W^T)`. A decode step or a short request (at
/// most [`DOT_ROWS`] rows) goes through [`gemv_t`] on `W^T`; from 32 rows on gemm on `W` is
/// faster (`bench plan` p50 at 1, 16, 32, 64 and 128 rows: docs/results/planner-latency.md).
fn linear(
    y: &mut [f32],
    x: &[f32],
    w: (&[f32], &[f32]),
    b: &[f32],
    rows: usize,
    inp: usize,
    out: usize,
) {
    if rows <= DOT_ROWS {
        gemv_t(y, x, w.1, Some(b), rows, inp, out);
    } else {
        linear_fwd(y, x, w.0, b, rows, inp, out);
    }
}

/// `y = x Wt + b` for `rows` rows of `x` (`rows x inp`), with `Wt` the transposed weight
/// (`inp x out`). A block of output columns keeps its sums in registers while the input row is
/// read once: a broadcast and a fused multiply-add per input and vector, and no horizontal
/// sum, where a dot product per output pays one for every output (a decode step of the tiny
/// planner is ~3,000 dot products of 96 or 384 values). Every row is computed alone, in the
/// same order, so a row's result does not depend on how many rows are fed with it.
fn gemv_t(
    y: &mut [f32],
    x: &[f32],
    wt: &[f32],
    b: Option<&[f32]>,
    rows: usize,
    inp: usize,
    out: usize,
) {
    // Blocks of 64 columns (eight AVX2 vectors: enough independent sums to keep both FMA units
    // busy), then 32, 16 and 8 for what is left (288 = 4 x 64 + 32), then one by one. Every row
    // of a feed is taken while its block's weights are in cache: a short prompt reads them once.
    let shape = (rows, inp, out);
    let mut c0 = column_blocks::<64>(y, x, wt, b, shape, 0, usize::MAX);
    c0 = column_blocks::<32>(y, x, wt, b, shape, c0, 1);
    c0 = column_blocks::<16>(y, x, wt, b, shape, c0, 1);
    c0 = column_blocks::<8>(y, x, wt, b, shape, c0, 1);
    for r in 0..rows {
        for c in c0..out {
            let mut s = b.map_or(0.0, |b| b[c]);
            for (i, &xi) in x[r * inp..(r + 1) * inp].iter().enumerate() {
                s = xi.mul_add(wt[i * out + c], s);
            }
            y[r * out + c] = s;
        }
    }
}

/// Up to `at_most` blocks of `N` columns of [`gemv_t`] from column `c0`, every row of the feed
/// per block (`shape`: rows, `inp`, `out`); the column the next block starts at.
#[inline(always)]
fn column_blocks<const N: usize>(
    y: &mut [f32],
    x: &[f32],
    wt: &[f32],
    b: Option<&[f32]>,
    (rows, inp, out): (usize, usize, usize),
    mut c0: usize,
    at_most: usize,
) -> usize {
    let mut blocks = 0;
    while out - c0 >= N && blocks < at_most {
        for r in 0..rows {
            column_block::<N>(y, x, wt, b, (r, inp, out), c0);
        }
        c0 += N;
        blocks += 1;
    }
    c0
}

/// Columns `c0..c0 + N` of row `r` of [`gemv_t`] (`shape`: the row, `inp`, `out`).
#[inline(always)]
fn column_block<const N: usize>(
    y: &mut [f32],
    x: &[f32],
    wt: &[f32],
    b: Option<&[f32]>,
    (r, inp, out): (usize, usize, usize),
    c0: usize,
) {
    let xr = &x[r * inp..(r + 1) * inp];
    let mut acc = [0f32; N];
    if let Some(b) = b {
        acc.copy_from_slice(&b[c0..c0 + N]);
    }
    for (i, &xi) in xr.iter().enumerate() {
        let w: &[f32; N] = wt[i * out + c0..i * out + c0 + N]
            .try_into()
            .expect("a whole column block");
        for (s, &wv) in acc.iter_mut().zip(w) {
            *s = xi.mul_add(wv, *s);
        }
    }
    y[r * out + c0..r * out + c0 + N].copy_from_slice(&acc);
}

/// `w` (`rows x cols`, row-major) transposed.
fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
            .collect()
    }

    #[test]
    fn gemv_t_equals_the_plain_product_at_every_block_width() {
        // 64-, 32-, 16- and 8-column blocks and the one-by-one tail, alone and together.
        for &(rows, inp, out) in &[
            (1, 96, 288),
            (3, 7, 5),
            (2, 13, 120),
            (16, 384, 96),
            (1, 4, 63),
        ] {
            let (x, w, b) = (values(rows * inp, 1), values(out * inp, 2), values(out, 3));
            let mut y = vec![f32::NAN; rows * out];
            gemv_t(
                &mut y,
                &x,
                &transpose(&w, out, inp),
                Some(&b),
                rows,
                inp,
                out,
            );
            for r in 0..rows {
                for o in 0..out {
                    let want: f64 = b[o] as f64
                        + (0..inp)
                            .map(|i| x[r * inp + i] as f64 * w[o * inp + i] as f64)
                            .sum::<f64>();
                    let got = y[r * out + o] as f64;
                    assert!(
                        (got - want).abs() < 1e-4,
                        "{rows}x{inp}x{out} [{r},{o}]: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn attention_of_a_usual_head_width_equals_the_run_time_one_bit_for_bit() {
        let (d, n) = (96, 37);
        let (q, k, v) = (values(d, 4), values(n * d, 5), values(n * d, 6));
        for hd in [16, 24, 32] {
            let (mut fixed, mut any) = (vec![0f32; d], vec![0f32; d]);
            let (mut s1, mut s2) = (vec![0f32; n], vec![0f32; n]);
            match hd {
                16 => attend::<16>(&q, &k, &v, &mut fixed, &mut s1, 0.2),
                24 => attend::<24>(&q, &k, &v, &mut fixed, &mut s1, 0.2),
                _ => attend::<32>(&q, &k, &v, &mut fixed, &mut s1, 0.2),
            }
            attend_any(&q, &k, &v, &mut any, &mut s2, 0.2, hd);
            assert_eq!(fixed, any, "head width {hd}");
        }
    }
}
