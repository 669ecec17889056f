//! `TinyGpt`: a small decoder-only transformer (mixle's `CausalLM` architecture) with a KV cache.
//!
//! Architecture: token embedding (+ learned absolute positions, or RoPE on q/k), `n_layer` pre-LN
//! blocks (`x + attn(ln1(x))`, `x + mlp(ln2(x))`), fused QKV projection, 4x GELU (erf) MLP, final
//! LayerNorm, output head tied to the token embedding. Linear layers carry biases, as in PyTorch.
//!
//! Every op used here carries gradients on candle's CPU backend (explicit LayerNorm math,
//! `candle_nn::ops::softmax` rather than the fused last-dim kernel, `rope_slow`, plain matmul
//! attention); `tests/grad.rs` checks that every trainable variable receives a non-zero gradient.
//!
//! Tensor names follow mixle's PyTorch `state_dict` (`tok.weight`, `pos.weight`,
//! `blocks.{i}.attn.qkv.weight`, `blocks.{i}.mlp.0.weight`, `ln.weight`, ...), the tied head is
//! not stored separately.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{LmError, Result};
use crate::io;

/// How token positions are encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PosEncoding {
    /// Learned absolute position embeddings (mixle's choice).
    #[default]
    Learned,
    /// Rotary position embeddings on queries and keys.
    Rope,
}

/// Shape of a [`TinyGpt`]. Serialized into the planner directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TinyGptConfig {
    /// Vocabulary size (the codec's `vocab_size()`).
    pub vocab: usize,
    pub d_model: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// Maximum context length in tokens.
    pub block: usize,
    pub pos: PosEncoding,
    /// RoPE base (only with `pos = "rope"`).
    pub rope_theta: f32,
    /// LayerNorm epsilon.
    pub ln_eps: f64,
}

impl Default for TinyGptConfig {
    fn default() -> Self {
        Self {
            vocab: 0,
            d_model: 96,
            n_layer: 3,
            n_head: 4,
            block: 192,
            pos: PosEncoding::Learned,
            rope_theta: 10_000.0,
            ln_eps: 1e-5,
        }
    }
}

impl TinyGptConfig {
    /// Default shape (d_model 96, 3 layers, 4 heads, block 192) for a vocabulary size.
    pub fn with_vocab(vocab: usize) -> Self {
        Self {
            vocab,
            ..Self::default()
        }
    }

    /// Check the shape is buildable; the error names the offending field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(LmError::Config(m));
        if self.vocab < 3 {
            return bad(format!("vocab must be >= 3, got {}", self.vocab));
        }
        if self.d_model == 0 || self.n_layer == 0 || self.n_head == 0 || self.block == 0 {
            return bad("d_model, n_layer, n_head and block must all be > 0".into());
        }
        // Upper bounds before anything is allocated from these numbers (a planner.json is
        // input: it may claim 2^60 layers).
        for (name, v, max) in [
            ("vocab", self.vocab, 1usize << 22),
            ("d_model", self.d_model, 1 << 15),
            ("n_layer", self.n_layer, 1024),
            ("n_head", self.n_head, 1024),
            ("block", self.block, 1 << 20),
        ] {
            if v > max {
                return bad(format!("{name} = {v} is more than {max}"));
            }
        }
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.rope_theta as f64) || !positive(self.ln_eps) {
            return bad("rope_theta and ln_eps must be positive numbers".into());
        }
        if !self.d_model.is_multiple_of(self.n_head) {
            return bad(format!(
                "d_model ({}) must be divisible by n_head ({})",
                self.d_model, self.n_head
            ));
        }
        if self.pos == PosEncoding::Rope && !(self.d_model / self.n_head).is_multiple_of(2) {
            return bad(format!(
                "rope needs an even head dimension, got {}",
                self.d_model / self.n_head
            ));
        }
        Ok(())
    }

    fn head_dim(&self) -> usize {
        self.d_model / self.n_head
    }

    /// Scalar parameters a model of this configuration has (`None` when it overflows);
    /// call [`TinyGptConfig::validate`] first.
    pub fn param_count(&self) -> Option<usize> {
        param_specs(self)
            .iter()
            .try_fold(0usize, |acc, (_, shape, _)| {
                shape
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .and_then(|n| acc.checked_add(n))
            })
    }
}

/// One block's parameters by role. `T` is a tensor here, a flat vector in [`crate::infer`] and
/// an offset into the parameter vector in [`crate::fast`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockParams<T> {
    pub ln1_w: T,
    pub ln1_b: T,
    pub qkv_w: T,
    pub qkv_b: T,
    pub proj_w: T,
    pub proj_b: T,
    pub ln2_w: T,
    pub ln2_b: T,
    pub fc_w: T,
    pub fc_b: T,
    pub out_w: T,
    pub out_b: T,
}

impl<T> BlockParams<T> {
    /// Block `i`'s parameters, each looked up by its persistent name (`blocks.{i}.ln1.weight`).
    pub(crate) fn by_name<E>(
        i: usize,
        mut get: impl FnMut(&str) -> std::result::Result<T, E>,
    ) -> std::result::Result<Self, E> {
        let mut p = |s: &str| get(&format!("blocks.{i}.{s}"));
        Ok(BlockParams {
            ln1_w: p("ln1.weight")?,
            ln1_b: p("ln1.bias")?,
            qkv_w: p("attn.qkv.weight")?,
            qkv_b: p("attn.qkv.bias")?,
            proj_w: p("attn.proj.weight")?,
            proj_b: p("attn.proj.bias")?,
            ln2_w: p("ln2.weight")?,
            ln2_b: p("ln2.bias")?,
            fc_w: p("mlp.0.weight")?,
            fc_b: p("mlp.0.bias")?,
            out_w: p("mlp.2.weight")?,
            out_b: p("mlp.2.bias")?,
        })
    }
}

/// The weights of one block (plain tensors: either variable-backed for training or detached).
type LayerW = BlockParams<Tensor>;

#[derive(Clone)]
struct Weights {
    tok: Tensor,
    pos: Option<Tensor>,
    layers: Vec<LayerW>,
    lnf_w: Tensor,
    lnf_b: Tensor,
}

/// Per-layer key/value tensors of a single sequence, `(1, n_head, len, head_dim)` each.
///
/// Cloning is cheap (reference-counted tensors), which is what [`KvCache::snapshot`] relies on:
/// appending creates new tensors, so a snapshot never sees later tokens.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl KvCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Drop everything.
    pub fn clear(&mut self) {
        self.layers.clear();
        self.len = 0;
    }
    /// A cheap copy of the current state (no tensor data is copied).
    pub fn snapshot(&self) -> KvCache {
        self.clone()
    }
    /// Return to a snapshot taken earlier (from this or any cache of the same model).
    pub fn restore(&mut self, snap: &KvCache) {
        *self = snap.clone();
    }
}

/// A tiny causal transformer LM. See the module docs.
pub struct TinyGpt {
    cfg: TinyGptConfig,
    device: Device,
    /// Trainable variables in a fixed order, with their persistent names.
    vars: Vec<(String, Var)>,
    /// Variable-backed weights (graph tracking, for training).
    train_w: Weights,
    /// Detached views on the same storage (no graph tracking, for inference).
    infer_w: Weights,
    /// RoPE tables `(block, head_dim/2)`.
    rope: Option<(Tensor, Tensor)>,
}

impl std::fmt::Debug for TinyGpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TinyGpt")
            .field("cfg", &self.cfg)
            .field("params", &self.num_params())
            .finish()
    }
}

/// Standard normal draw (Box–Muller), deterministic for a seeded rng.
fn randn(rng: &mut StdRng) -> f32 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

fn param_specs(cfg: &TinyGptConfig) -> Vec<(String, Vec<usize>, Init)> {
    let d = cfg.d_model;
    let std = 0.02f32;
    let resid_std = std / (2.0 * cfg.n_layer as f32).sqrt();
    let mut specs = vec![(
        "tok.weight".to_string(),
        vec![cfg.vocab, d],
        Init::Normal(std),
    )];
    if cfg.pos == PosEncoding::Learned {
        specs.push(("pos.weight".into(), vec![cfg.block, d], Init::Normal(std)));
    }
    for i in 0..cfg.n_layer {
        let p = format!("blocks.{i}");
        specs.extend([
            (format!("{p}.ln1.weight"), vec![d], Init::Ones),
            (format!("{p}.ln1.bias"), vec![d], Init::Zeros),
            (
                format!("{p}.attn.qkv.weight"),
                vec![3 * d, d],
                Init::Normal(std),
            ),
            (format!("{p}.attn.qkv.bias"), vec![3 * d], Init::Zeros),
            (
                format!("{p}.attn.proj.weight"),
                vec![d, d],
                Init::Normal(resid_std),
            ),
            (format!("{p}.attn.proj.bias"), vec![d], Init::Zeros),
            (format!("{p}.ln2.weight"), vec![d], Init::Ones),
            (format!("{p}.ln2.bias"), vec![d], Init::Zeros),
            (
                format!("{p}.mlp.0.weight"),
                vec![4 * d, d],
                Init::Normal(std),
            ),
            (format!("{p}.mlp.0.bias"), vec![4 * d], Init::Zeros),
            (
                format!("{p}.mlp.2.weight"),
                vec![d, 4 * d],
                Init::Normal(resid_std),
            ),
            (format!("{p}.mlp.2.bias"), vec![d], Init::Zeros),
        ]);
    }
    specs.push(("ln.weight".into(), vec![d], Init::Ones));
    specs.push(("ln.bias".into(), vec![d], Init::Zeros));
    specs
}

#[derive(Clone, Copy)]
enum Init {
    Normal(f32),
    Ones,
    Zeros,
}

fn linear(x: &Tensor, w: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    x.matmul(&w.t()?)?.broadcast_add(b)
}

/// LayerNorm written out with differentiable primitives (candle's fused kernel has no CPU grad).
fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let xc = x.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let xn = xc.broadcast_div(&(var + eps)?.sqrt()?)?;
    xn.broadcast_mul(w)?.broadcast_add(b)
}

/// Additive causal mask for `n` queries at absolute positions `offset..offset+n` over
/// `offset + n` keys.
fn causal_mask(n: usize, offset: usize, device: &Device) -> candle_core::Result<Tensor> {
    let total = offset + n;
    let mut m = vec![0f32; n * total];
    for i in 0..n {
        for j in (offset + i + 1)..total {
            m[i * total + j] = f32::NEG_INFINITY;
        }
    }
    Tensor::from_vec(m, (n, total), device)
}

impl TinyGpt {
    /// A freshly initialised model (GPT-2 style init: N(0, 0.02), residual projections scaled by
    /// 1/sqrt(2 n_layer), zero biases, unit LayerNorm gains), deterministic for a seed.
    pub fn new(cfg: TinyGptConfig, seed: u64, device: &Device) -> Result<Self> {
        cfg.validate()?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut tensors = HashMap::new();
        for (name, shape, init) in param_specs(&cfg) {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = match init {
                Init::Normal(std) => (0..n).map(|_| randn(&mut rng) * std).collect(),
                Init::Ones => vec![1.0; n],
                Init::Zeros => vec![0.0; n],
            };
            tensors.insert(name, Tensor::from_vec(data, shape, device)?);
        }
        Self::from_tensors(cfg, tensors, device, Path::new("<init>"))
    }

    fn from_tensors(
        cfg: TinyGptConfig,
        mut tensors: HashMap<String, Tensor>,
        device: &Device,
        origin: &Path,
    ) -> Result<Self> {
        cfg.validate()?;
        let mut vars = Vec::new();
        for (name, shape, _) in param_specs(&cfg) {
            let t = tensors.remove(&name).ok_or_else(|| LmError::Weights {
                path: origin.to_path_buf(),
                reason: format!("missing tensor {name}"),
            })?;
            if t.dims() != shape.as_slice() {
                return Err(LmError::Weights {
                    path: origin.to_path_buf(),
                    reason: format!("tensor {name} has shape {:?}, expected {shape:?}", t.dims()),
                });
            }
            let t = t.to_dtype(DType::F32)?.to_device(device)?;
            vars.push((name, Var::from_tensor(&t)?));
        }
        // a tied head saved explicitly by PyTorch is redundant; anything else is unexpected
        tensors.remove("head.weight");
        if let Some(extra) = tensors.keys().next() {
            return Err(LmError::Weights {
                path: origin.to_path_buf(),
                reason: format!("unexpected tensor {extra}"),
            });
        }
        let lookup: HashMap<&str, &Var> = vars.iter().map(|(n, v)| (n.as_str(), v)).collect();
        let build = |detach: bool| -> Weights {
            let g = |n: &str| -> Tensor {
                let t = lookup[n].as_tensor();
                if detach {
                    t.detach()
                } else {
                    t.clone()
                }
            };
            Weights {
                tok: g("tok.weight"),
                pos: (cfg.pos == PosEncoding::Learned).then(|| g("pos.weight")),
                layers: (0..cfg.n_layer)
                    .map(|i| {
                        match LayerW::by_name(i, |n| Ok::<_, std::convert::Infallible>(g(n))) {
                            Ok(l) => l,
                            Err(never) => match never {},
                        }
                    })
                    .collect(),
                lnf_w: g("ln.weight"),
                lnf_b: g("ln.bias"),
            }
        };
        let train_w = build(false);
        let infer_w = build(true);
        let rope = if cfg.pos == PosEncoding::Rope {
            let (cos, sin) = crate::kernels::rope_tables(&cfg);
            let half = cfg.head_dim() / 2;
            Some((
                Tensor::from_vec(cos, (cfg.block, half), device)?,
                Tensor::from_vec(sin, (cfg.block, half), device)?,
            ))
        } else {
            None
        };
        Ok(Self {
            cfg,
            device: device.clone(),
            vars,
            train_w,
            infer_w,
            rope,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &TinyGptConfig {
        &self.cfg
    }
    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Trainable variables with their persistent names, in a fixed order.
    pub fn vars(&self) -> &[(String, Var)] {
        &self.vars
    }
    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.vars.iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Current weights by name (detached copies of the storage handles).
    pub fn named_tensors(&self) -> HashMap<String, Tensor> {
        self.vars
            .iter()
            .map(|(n, v)| (n.clone(), v.as_tensor().detach()))
            .collect()
    }

    /// Overwrite the weights with tensors by name (all names, matching shapes).
    pub fn set_weights(&self, tensors: &HashMap<String, Tensor>, origin: &Path) -> Result<()> {
        for (name, var) in &self.vars {
            let t = tensors.get(name).ok_or_else(|| LmError::Weights {
                path: origin.to_path_buf(),
                reason: format!("missing tensor {name}"),
            })?;
            if t.dims() != var.dims() {
                return Err(LmError::Weights {
                    path: origin.to_path_buf(),
                    reason: format!(
                        "tensor {name} has shape {:?}, expected {:?}",
                        t.dims(),
                        var.dims()
                    ),
                });
            }
            var.set(&t.to_dtype(DType::F32)?.to_device(&self.device)?)?;
        }
        Ok(())
    }

    /// Write the weights to a safetensors file, atomically.
    pub fn save_safetensors(&self, path: &Path) -> Result<()> {
        let tensors = self.named_tensors();
        io::atomic_write_with(path, |tmp| {
            candle_core::safetensors::save(&tensors, tmp).map_err(LmError::from)
        })
    }

    /// Build a model of shape `cfg` from a safetensors file written by [`Self::save_safetensors`]
    /// (or a mixle `state_dict` exported to safetensors with the same names).
    pub fn load_safetensors(cfg: TinyGptConfig, path: &Path, device: &Device) -> Result<Self> {
        if !path.exists() {
            return Err(LmError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::NotFound, "weights file not found"),
            ));
        }
        let tensors =
            candle_core::safetensors::load(path, device).map_err(|e| LmError::Weights {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        Self::from_tensors(cfg, tensors, device, path)
    }

    /// Save `model.safetensors` and `config.json` into `dir` (each written atomically).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| LmError::io(dir, e))?;
        self.save_safetensors(&dir.join(MODEL_FILE))?;
        io::atomic_write_json(&dir.join(CONFIG_FILE), &self.cfg)
    }

    /// Load what [`Self::save`] wrote.
    pub fn load(dir: &Path, device: &Device) -> Result<Self> {
        let cfg: TinyGptConfig = io::read_json(&dir.join(CONFIG_FILE))?;
        Self::load_safetensors(cfg, &dir.join(MODEL_FILE), device)
    }

    /// Core forward. `ids` is `(b, t)` u32 at absolute positions `offset..offset+t`; with a cache
    /// (`b` must be 1) keys/values are appended to it. Returns the final-LayerNormed hidden states
    /// `(b*t, d_model)`.
    fn run(
        &self,
        w: &Weights,
        ids: &Tensor,
        offset: usize,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let cfg = &self.cfg;
        let (d, h, hd) = (cfg.d_model, cfg.n_head, cfg.head_dim());
        if offset + t > cfg.block {
            return Err(LmError::ContextOverflow {
                needed: offset + t,
                block: cfg.block,
            });
        }
        let mut x = w.tok.index_select(&ids.flatten_all()?, 0)?; // (b*t, d)
        if let Some(pos) = &w.pos {
            let p = pos.narrow(0, offset, t)?;
            x = x
                .reshape((b, t, d))?
                .broadcast_add(&p)?
                .reshape((b * t, d))?;
        }
        let total = offset + t;
        let mask = if t > 1 {
            Some(causal_mask(t, offset, &self.device)?)
        } else {
            None
        };
        let scale = 1.0 / (hd as f64).sqrt();
        let rope = match &self.rope {
            Some((c, s)) => Some((c.narrow(0, offset, t)?, s.narrow(0, offset, t)?)),
            None => None,
        };
        for (li, l) in w.layers.iter().enumerate() {
            let a = layer_norm(&x, &l.ln1_w, &l.ln1_b, cfg.ln_eps)?;
            let qkv = linear(&a, &l.qkv_w, &l.qkv_b)?; // (b*t, 3d)
            let split = |i: usize| -> candle_core::Result<Tensor> {
                qkv.narrow(1, i * d, d)?
                    .reshape((b, t, h, hd))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let (mut q, mut k, v) = (split(0)?, split(1)?, split(2)?); // (b, h, t, hd)
            if let Some((c, s)) = &rope {
                q = candle_nn::rotary_emb::rope_slow(&q, c, s)?;
                k = candle_nn::rotary_emb::rope_slow(&k, c, s)?;
            }
            let (k, v) = match cache.as_deref_mut() {
                Some(cache) => {
                    if cache.layers.len() > li {
                        let (pk, pv) = &cache.layers[li];
                        let k = Tensor::cat(&[pk, &k], 2)?;
                        let v = Tensor::cat(&[pv, &v], 2)?;
                        cache.layers[li] = (k.clone(), v.clone());
                        (k, v)
                    } else {
                        cache.layers.push((k.clone(), v.clone()));
                        (k, v)
                    }
                }
                None => (k, v),
            };
            let q = (q * scale)?;
            let mut att = q.matmul(&k.t()?)?; // (b, h, t, total)
            if let Some(m) = &mask {
                att = att.broadcast_add(m)?;
            }
            let att = candle_nn::ops::softmax(&att, D::Minus1)?;
            let y = att.matmul(&v)?; // (b, h, t, hd)
            let y = y.transpose(1, 2)?.reshape((b * t, d))?;
            x = (x + linear(&y, &l.proj_w, &l.proj_b)?)?;
            let m = layer_norm(&x, &l.ln2_w, &l.ln2_b, cfg.ln_eps)?;
            let m = linear(&m, &l.fc_w, &l.fc_b)?.gelu_erf()?;
            x = (x + linear(&m, &l.out_w, &l.out_b)?)?;
        }
        if let Some(cache) = cache {
            cache.len = total;
        }
        Ok(layer_norm(&x, &w.lnf_w, &w.lnf_b, cfg.ln_eps)?)
    }

    /// Tied output head: `(n, d_model) -> (n, vocab)`.
    fn head(&self, w: &Weights, hidden: &Tensor) -> Result<Tensor> {
        Ok(hidden.matmul(&w.tok.t()?)?)
    }

    fn check_ids(&self, ids: &[u32], place: &'static str) -> Result<()> {
        if let Some(&id) = ids.iter().find(|&&i| i as usize >= self.cfg.vocab) {
            return Err(LmError::TokenOutOfRange {
                place,
                id,
                vocab: self.cfg.vocab,
            });
        }
        Ok(())
    }

    /// Training forward on a right-padded batch `(b, t)`: final hidden states `(b*t, d_model)`
    /// with the autograd graph attached to the variables.
    pub fn forward_hidden_train(&self, ids: &Tensor) -> Result<Tensor> {
        self.run(&self.train_w, ids, 0, None)
    }

    /// Training head on selected hidden rows (graph attached): `(n, d) -> (n, vocab)`.
    pub fn head_train(&self, hidden: &Tensor) -> Result<Tensor> {
        self.head(&self.train_w, hidden)
    }

    /// Uncached full forward of one sequence: logits at every position, `(len, vocab)`.
    /// This is the "recompute everything" path mixle's `generate` takes at each step.
    pub fn forward(&self, ids: &[u32]) -> Result<Tensor> {
        if ids.is_empty() {
            return Err(LmError::Data("forward needs at least one token".into()));
        }
        self.check_ids(ids, "forward")?;
        let t = Tensor::from_slice(ids, (1, ids.len()), &self.device)?;
        let h = self.run(&self.infer_w, &t, 0, None)?;
        self.head(&self.infer_w, &h)
    }

    /// Append `tokens` to the cache and return the logits at each appended position,
    /// `(tokens.len(), vocab)`. Errors (without touching the cache) if the block would overflow.
    pub fn forward_with_cache(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        let h = self.extend_cache(tokens, cache)?;
        self.head(&self.infer_w, &h)
    }

    /// Append `tokens` to the cache and return the next-token logits after the last of them.
    pub fn forward_step(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let h = self.extend_cache(tokens, cache)?;
        let last = h.narrow(0, tokens.len() - 1, 1)?;
        Ok(self
            .head(&self.infer_w, &last)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }

    fn extend_cache(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(LmError::Data(
                "forward_step needs at least one token".into(),
            ));
        }
        self.check_ids(tokens, "forward_with_cache")?;
        let needed = cache.len + tokens.len();
        if needed > self.cfg.block {
            return Err(LmError::ContextOverflow {
                needed,
                block: self.cfg.block,
            });
        }
        if !cache.layers.is_empty() && cache.layers.len() != self.cfg.n_layer {
            return Err(LmError::Config(format!(
                "KV cache has {} layers but the model has {}",
                cache.layers.len(),
                self.cfg.n_layer
            )));
        }
        let t = Tensor::from_slice(tokens, (1, tokens.len()), &self.device)?;
        // work on a copy so an error mid-way leaves the caller's cache unchanged
        let mut next = cache.clone();
        let h = self.run(&self.infer_w, &t, cache.len, Some(&mut next))?;
        *cache = next;
        Ok(h)
    }
}

/// File name of the weights inside a model directory.
pub const MODEL_FILE: &str = "model.safetensors";
/// File name of the config inside a model directory.
pub const CONFIG_FILE: &str = "config.json";
