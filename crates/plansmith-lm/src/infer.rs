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

/// A decoding copy of a [`TinyGpt`].
pub struct InferModel {
    cfg: TinyGptConfig,
    tok: Vec<f32>,
    pos: Option<Vec<f32>>,
    blocks: Vec<Block>,
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
        Ok(Self {
            cfg,
            tok,
            pos,
            blocks,
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
        for (l, b) in self.blocks.iter().enumerate() {
            ln_fwd(&x, &b.ln1_w, &b.ln1_b, &mut a, &mut stats, d, eps);
            linear(&mut qkv, &a, &b.qkv_w, &b.qkv_b, t, d, 3 * d);
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
                for h in 0..nh {
                    let q = &qkv[i * 3 * d + h * hd..i * 3 * d + (h + 1) * hd];
                    for (j, s) in scores[..n].iter_mut().enumerate() {
                        *s = dot(q, &keys[j * d + h * hd..j * d + (h + 1) * hd]);
                    }
                    softmax_causal(&mut scores[..n], n, scale);
                    let out = &mut y[i * d + h * hd..i * d + (h + 1) * hd];
                    for (j, &p) in scores[..n].iter().enumerate() {
                        let v = &values[j * d + h * hd..j * d + (h + 1) * hd];
                        for (o, &vv) in out.iter_mut().zip(v) {
                            *o += p * vv;
                        }
                    }
                }
            }
            linear(&mut proj, &y, &b.proj_w, &b.proj_b, t, d, d);
            add(&mut x, &proj);
            ln_fwd(&x, &b.ln2_w, &b.ln2_b, &mut a, &mut stats, d, eps);
            linear(&mut fc, &a, &b.fc_w, &b.fc_b, t, d, 4 * d);
            gelu_fwd(&fc, &mut act);
            linear(&mut proj, &act, &b.out_w, &b.out_b, t, 4 * d, d);
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
        for (r, out) in logits.chunks_exact_mut(vocab).enumerate() {
            let h = &a[r * d..(r + 1) * d];
            for (v, o) in out.iter_mut().enumerate() {
                *o = dot(h, &self.tok[v * d..(v + 1) * d]);
            }
        }
        Ok(logits)
    }
}

/// Up to this many rows, [`linear`] takes dot products instead of the gemm kernel.
const DOT_ROWS: usize = 16;

/// `y = x W^T + b` for `rows` rows. For a decode step or a short request (at most
/// [`DOT_ROWS`] rows) each weight row is read once and dotted with every input row while it
/// is in L1, which at this model size beats packing the operands for gemm. From 32 rows on
/// gemm is faster (`bench plan` p50 at 1, 16, 32, 64 and 128 rows:
/// docs/results/planner-latency.md).
fn linear(y: &mut [f32], x: &[f32], w: &[f32], b: &[f32], rows: usize, inp: usize, out: usize) {
    if rows <= DOT_ROWS {
        for (o, (wo, &bo)) in w.chunks_exact(inp).take(out).zip(b).enumerate() {
            for r in 0..rows {
                y[r * out + o] = dot(&x[r * inp..(r + 1) * inp], wo) + bo;
            }
        }
    } else {
        linear_fwd(y, x, w, b, rows, inp, out);
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
