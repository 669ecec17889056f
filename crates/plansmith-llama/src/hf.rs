//! Hugging Face checkpoint directories: `config.json` + `model.safetensors` (or sharded via
//! `model.safetensors.index.json`) for `LlamaForCausalLM`, `Qwen2ForCausalLM` (q/k/v biases)
//! and `Qwen3ForCausalLM` (per-head q/k RMSNorm), weights in f32 / bf16 / f16 loaded as f32.
//!
//! Hugging Face stores q/k projections for "rotate-half" RoPE (pairs `(x[i], x[i + hd/2])`);
//! this runtime uses the interleaved layout of GGUF (pairs `(x[2i], x[2i+1])`). Loading permutes
//! the rows of q/k (and their biases and q/k norm weights) into the interleaved layout, so there
//! is one RoPE path for both sources, PEFT adapters keep one convention (B of q/k permuted the
//! same way), and the LoRA trainer needs no second code path. The permutation is exact (a row
//! reorder), and attention scores are invariant under the same reorder of q and k.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde_json::{json, Value};

use crate::config::LlamaConfig;
use crate::error::{LlamaError, Result};
use crate::linear::Linear;
use crate::lora::{gguf_to_hf_rows, hf_to_gguf_rows};
use crate::model::{dense_weight, Block, LlamaModel};

/// Architectures read from `config.json` `architectures[0]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HfArch {
    Llama,
    Qwen2,
    Qwen3,
    /// Gemma 3's text model (`Gemma3ForCausalLM`: Gemma-3-270M / 1B, FunctionGemma).
    Gemma3,
}

impl HfArch {
    /// The `architectures` entry.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "LlamaForCausalLM",
            Self::Qwen2 => "Qwen2ForCausalLM",
            Self::Qwen3 => "Qwen3ForCausalLM",
            Self::Gemma3 => "Gemma3ForCausalLM",
        }
    }

    fn model_type(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3_text",
        }
    }
}

/// A parsed `config.json`.
#[derive(Debug, Clone)]
pub struct HfConfig {
    pub arch: HfArch,
    pub config: LlamaConfig,
    /// `tie_word_embeddings` as written (the loader also ties when `lm_head.weight` is absent).
    pub tie_word_embeddings: bool,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
}

fn io_err(path: &Path, source: std::io::Error) -> LlamaError {
    LlamaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| io_err(path, e))?;
    serde_json::from_str(&text).map_err(|source| LlamaError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `path` looks like a Hugging Face checkpoint directory.
pub fn is_hf_dir(path: &Path) -> bool {
    path.is_dir() && path.join("config.json").is_file()
}

impl HfConfig {
    /// Read and check `dir/config.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let v = read_json(&path)?;
        Self::from_json(&v, &path)
    }

    /// Check a parsed `config.json` (`path` is named in errors).
    pub fn from_json(v: &Value, path: &Path) -> Result<Self> {
        let err = |key: &str, reason: String| LlamaError::Metadata {
            path: path.to_path_buf(),
            key: key.to_string(),
            reason,
        };
        let arch_name = v
            .get("architectures")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .ok_or_else(|| err("architectures", "missing or not a list of strings".into()))?;
        let arch = match arch_name {
            "LlamaForCausalLM" => HfArch::Llama,
            "Qwen2ForCausalLM" => HfArch::Qwen2,
            "Qwen3ForCausalLM" => HfArch::Qwen3,
            "Gemma3ForCausalLM" => HfArch::Gemma3,
            other => {
                return Err(LlamaError::Unsupported(format!(
                    "{}: architecture `{other}` (supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM)",
                    path.display()
                )))
            }
        };
        let unsupported = |what: String| {
            LlamaError::Unsupported(format!("{}: {arch_name} with {what}", path.display()))
        };
        let usize_key = |key: &str| -> Result<Option<usize>> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x
                    .as_u64()
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| err(key, format!("expected a non-negative integer, got {x}"))),
            }
        };
        let req = |key: &str| -> Result<usize> {
            usize_key(key)?.ok_or_else(|| err(key, "missing".into()))
        };
        let f64_key = |key: &str, default: f64| -> Result<f64> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(x) => x
                    .as_f64()
                    .ok_or_else(|| err(key, format!("expected a number, got {x}"))),
            }
        };
        let bool_key = |key: &str| v.get(key).and_then(Value::as_bool);
        let gemma = arch == HfArch::Gemma3;
        // Gemma names its activation `hidden_activation` (GELU, tanh approximation).
        let act = v
            .get(if gemma {
                "hidden_activation"
            } else {
                "hidden_act"
            })
            .and_then(Value::as_str)
            .unwrap_or(if gemma { "gelu_pytorch_tanh" } else { "silu" });
        let expected = if gemma { "gelu_pytorch_tanh" } else { "silu" };
        if act != expected {
            return Err(unsupported(format!("hidden activation `{act}`")));
        }
        // RoPE: `rope_theta` at the top level (transformers 4) or inside `rope_parameters`
        // (transformers 5); any scaling other than "default" is refused.
        for key in ["rope_scaling", "rope_parameters"] {
            match v.get(key) {
                None | Some(Value::Null) => {}
                Some(r) => {
                    let ty = r
                        .get("rope_type")
                        .or_else(|| r.get("type"))
                        .and_then(Value::as_str)
                        .unwrap_or("default");
                    if ty != "default" {
                        return Err(unsupported(format!("{key} of type `{ty}`")));
                    }
                }
            }
        }
        if !gemma {
            if let Some(types) = v.get("layer_types").and_then(Value::as_array) {
                if let Some(t) = types.iter().find(|t| t.as_str() != Some("full_attention")) {
                    return Err(unsupported(format!("layer type {t} (only full_attention)")));
                }
            }
        }
        let rope_theta = match (v.get("rope_theta"), v.get("rope_parameters")) {
            (Some(x), _) if !x.is_null() => x
                .as_f64()
                .ok_or_else(|| err("rope_theta", format!("expected a number, got {x}")))?,
            (_, Some(p)) if p.get("rope_theta").is_some() => p["rope_theta"]
                .as_f64()
                .ok_or_else(|| err("rope_parameters.rope_theta", "expected a number".into()))?,
            _ => 10_000.0,
        };
        if !(rope_theta.is_finite() && rope_theta > 0.0) {
            return Err(err("rope_theta", format!("{rope_theta} is not positive")));
        }
        if bool_key("mlp_bias") == Some(true) {
            return Err(unsupported("mlp_bias".into()));
        }
        if arch != HfArch::Qwen2 && bool_key("attention_bias") == Some(true) {
            return Err(unsupported("attention_bias".into()));
        }
        if arch == HfArch::Qwen2 && bool_key("use_sliding_window") == Some(true) {
            return Err(unsupported("use_sliding_window".into()));
        }
        let hidden = req("hidden_size")?;
        let heads = req("num_attention_heads")?;
        let kv_heads = usize_key("num_key_value_heads")?.unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 {
            return Err(err(
                "num_key_value_heads",
                format!("{kv_heads} kv heads do not divide {heads} heads"),
            ));
        }
        let head_dim = match usize_key("head_dim")? {
            Some(h) => h,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(err(
                    "num_attention_heads",
                    format!("{heads} heads do not divide hidden_size {hidden}"),
                ))
            }
        };
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(err(
                "head_dim",
                format!("{head_dim} is not a positive even number"),
            ));
        }
        // transformers' default: Gemma ties its head to the embedding, the others do not.
        let tie = bool_key("tie_word_embeddings").unwrap_or(gemma);
        let ids = |key: &str| -> Vec<u32> {
            match v.get(key) {
                Some(Value::Number(n)) => n.as_u64().map(|x| vec![x as u32]).unwrap_or_default(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_u64)
                    .map(|x| x as u32)
                    .collect(),
                _ => Vec::new(),
            }
        };
        let gemma_cfg = if gemma {
            gemma_variations(v, head_dim, req("num_hidden_layers")?, &err, &unsupported)?
        } else {
            Default::default()
        };
        let config = LlamaConfig {
            vocab_size: req("vocab_size")?,
            hidden_size: hidden,
            intermediate_size: req("intermediate_size")?,
            num_layers: req("num_hidden_layers")?,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
            rope_theta,
            rms_eps: f64_key("rms_norm_eps", 1e-6)?,
            max_position: usize_key("max_position_embeddings")?.unwrap_or(2048),
            tie_embeddings: tie,
            gemma: gemma_cfg,
        };
        if let Err((field, reason)) = config.check() {
            let key = match field {
                "hidden_size" => "hidden_size",
                "intermediate_size" => "intermediate_size",
                "num_layers" => "num_hidden_layers",
                "num_heads" => "num_attention_heads",
                "num_kv_heads" => "num_key_value_heads",
                "head_dim" => "head_dim",
                "max_position" => "max_position_embeddings",
                "rope_theta" => "rope_theta",
                "rms_eps" => "rms_norm_eps",
                _ => "vocab_size",
            };
            return Err(err(key, reason));
        }
        Ok(Self {
            arch,
            config,
            tie_word_embeddings: tie,
            bos_token_id: ids("bos_token_id").first().copied(),
            eos_token_ids: ids("eos_token_id"),
        })
    }
}

/// The Gemma 3 block variations `config.json` describes: the sliding window and which layers
/// use it (`layer_types`, or `sliding_window_pattern`: every n-th layer global), the local
/// RoPE base. What the forward does not compute is refused: attention scaled other than by
/// `1/sqrt(head_dim)` (`query_pre_attn_scalar`), logit soft-capping, a layer pattern other than
/// "every n-th layer global".
fn gemma_variations(
    v: &Value,
    head_dim: usize,
    layers: usize,
    err: &dyn Fn(&str, String) -> LlamaError,
    unsupported: &dyn Fn(String) -> LlamaError,
) -> Result<crate::config::Gemma> {
    for key in ["final_logit_softcapping", "attn_logit_softcapping"] {
        if let Some(x) = v.get(key).filter(|x| !x.is_null()) {
            return Err(unsupported(format!("{key} = {x}")));
        }
    }
    if let Some(x) = v.get("query_pre_attn_scalar").filter(|x| !x.is_null()) {
        if x.as_f64() != Some(head_dim as f64) {
            return Err(unsupported(format!(
                "query_pre_attn_scalar = {x} (attention is scaled by 1/sqrt(head_dim = {head_dim}))"
            )));
        }
    }
    let window = v
        .get("sliding_window")
        .and_then(Value::as_u64)
        .ok_or_else(|| err("sliding_window", "missing or not a positive integer".into()))?
        as usize;
    let pattern = match v.get("layer_types").and_then(Value::as_array) {
        Some(types) => {
            if types.len() != layers {
                return Err(err(
                    "layer_types",
                    format!("{} entries for {layers} layers", types.len()),
                ));
            }
            let global: Vec<bool> = types
                .iter()
                .map(|t| match t.as_str() {
                    Some("full_attention") => Ok(true),
                    Some("sliding_attention") => Ok(false),
                    _ => Err(unsupported(format!("layer type {t}"))),
                })
                .collect::<Result<_>>()?;
            // every n-th layer global: n is one past the first global layer (or no global)
            let n = global.iter().position(|&g| g).map_or(layers + 1, |i| i + 1);
            if global
                .iter()
                .enumerate()
                .any(|(i, &g)| g != (i + 1).is_multiple_of(n))
            {
                return Err(unsupported(format!(
                    "layer_types {types:?} (only every n-th layer global)"
                )));
            }
            n
        }
        None => v
            .get("sliding_window_pattern")
            .and_then(Value::as_u64)
            .map_or(6, |n| n as usize),
    };
    let local = match v.get("rope_local_base_freq") {
        None | Some(Value::Null) => 10_000.0,
        Some(x) => x
            .as_f64()
            .filter(|f| f.is_finite() && *f > 0.0)
            .ok_or_else(|| err("rope_local_base_freq", format!("{x} is not positive")))?,
    };
    Ok(crate::config::Gemma {
        scale_embeddings: true,
        gelu_gate: true,
        sliding_window: Some(window),
        sliding_window_pattern: pattern,
        rope_theta_local: Some(local),
    })
}

/// The safetensors files of a checkpoint with the tensors each holds (loaded, original dtype).
struct Weights {
    /// tensor name -> (file, tensor)
    tensors: HashMap<String, (PathBuf, Tensor)>,
    /// Where a tensor would be, for "missing" errors: the index file or the single file.
    home: PathBuf,
    /// Files named by the index, for hashing.
    files: Vec<(PathBuf, u64)>,
}

/// Name the first tensor a truncated / corrupt safetensors file cannot hold.
fn diagnose(path: &Path, bytes: &[u8], cause: candle_core::Error) -> LlamaError {
    let header_err = |reason: String| LlamaError::Safetensors {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < 8 {
        return header_err(format!("{} bytes: too short for a header", bytes.len()));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
    let Some(header) = usize::try_from(n)
        .ok()
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
    else {
        return header_err(format!(
            "header of {n} bytes does not fit in the {}-byte file (truncated?)",
            bytes.len()
        ));
    };
    let Ok(Value::Object(h)) = serde_json::from_slice::<Value>(header) else {
        return header_err(format!("header is not a JSON object ({cause})"));
    };
    let data_len = (bytes.len() - 8 - header.len()) as u64;
    let mut cut: Vec<(u64, u64, &str, &str)> = h
        .iter()
        .filter(|(k, _)| k.as_str() != "__metadata__")
        .filter_map(|(k, v)| {
            let off = v.get("data_offsets")?.as_array()?;
            let (s, e) = (off.first()?.as_u64()?, off.get(1)?.as_u64()?);
            let dt = v.get("dtype").and_then(Value::as_str).unwrap_or("?");
            (e > data_len).then_some((s, e, k.as_str(), dt))
        })
        .collect();
    cut.sort_unstable();
    match cut.first() {
        Some(&(s, e, name, dt)) => LlamaError::SafetensorsTensor {
            path: path.to_path_buf(),
            tensor: name.to_string(),
            reason: format!(
                "{dt}, data bytes {s}..{e} but the file holds only {data_len} data bytes (truncated)"
            ),
        },
        None => header_err(cause.to_string()),
    }
}

impl Weights {
    fn load(dir: &Path) -> Result<Self> {
        let index = dir.join("model.safetensors.index.json");
        let (files, home): (Vec<PathBuf>, PathBuf) = if index.is_file() {
            let v = read_json(&index)?;
            let map = v
                .get("weight_map")
                .and_then(Value::as_object)
                .ok_or_else(|| LlamaError::Metadata {
                    path: index.clone(),
                    key: "weight_map".into(),
                    reason: "missing or not an object".into(),
                })?;
            let mut files: Vec<PathBuf> = Vec::new();
            for (k, f) in map {
                let f = f.as_str().ok_or_else(|| LlamaError::Metadata {
                    path: index.clone(),
                    key: format!("weight_map.{k}"),
                    reason: "not a file name".into(),
                })?;
                if f.contains('/') || f.contains('\\') || f.starts_with('.') {
                    return Err(LlamaError::Metadata {
                        path: index.clone(),
                        key: format!("weight_map.{k}"),
                        reason: format!("`{f}` is not a plain file name"),
                    });
                }
                let p = dir.join(f);
                if !files.contains(&p) {
                    files.push(p);
                }
            }
            (files, index)
        } else {
            let p = dir.join("model.safetensors");
            (vec![p.clone()], p)
        };
        let mut tensors = HashMap::new();
        let mut sizes = Vec::new();
        for f in files {
            let bytes = std::fs::read(&f).map_err(|e| io_err(&f, e))?;
            sizes.push((f.clone(), bytes.len() as u64));
            let loaded = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
                .map_err(|e| diagnose(&f, &bytes, e))?;
            for (name, t) in loaded {
                tensors.insert(name, (f.clone(), t));
            }
        }
        Ok(Self {
            tensors,
            home,
            files: sizes,
        })
    }

    /// A tensor as f32 with the expected shape.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let (path, t) = self
            .tensors
            .get(name)
            .ok_or_else(|| LlamaError::MissingTensor {
                path: self.home.clone(),
                tensor: name.to_string(),
            })?;
        if t.dims() != shape {
            return Err(LlamaError::TensorShape {
                path: path.clone(),
                tensor: name.to_string(),
                found: t.dims().to_vec(),
                expected: shape.to_vec(),
            });
        }
        match t.dtype() {
            DType::F32 => Ok(t.clone()),
            DType::BF16 | DType::F16 | DType::F64 => Ok(t.to_dtype(DType::F32)?),
            other => Err(LlamaError::Unsupported(format!(
                "{}: tensor `{name}` has dtype {other:?} (supported: f32, bf16, f16)",
                path.display()
            ))),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

/// Permute a vector laid out per head in rotate-half order into the interleaved order.
fn hf_to_gguf_vec(v: &Tensor, heads: usize, head_dim: usize) -> Result<Tensor> {
    let n = v.dim(0)?;
    Ok(hf_to_gguf_rows(&v.reshape((n, 1))?, heads, head_dim)?.reshape(n)?)
}

fn gguf_to_hf_vec(v: &Tensor, heads: usize, head_dim: usize) -> Result<Tensor> {
    let n = v.dim(0)?;
    Ok(gguf_to_hf_rows(&v.reshape((n, 1))?, heads, head_dim)?.reshape(n)?)
}

/// Load the model of a Hugging Face checkpoint directory.
pub fn load_hf_model(dir: &Path) -> Result<(LlamaModel, HfConfig)> {
    let hc = HfConfig::load(dir)?;
    let w = Weights::load(dir)?;
    let mut cfg = hc.config.clone();
    let (d, hd, nh, nkv, ff) = (
        cfg.hidden_size,
        cfg.head_dim,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.intermediate_size,
    );
    let embed = w.get("model.embed_tokens.weight", &[cfg.vocab_size, d])?;
    let mut blocks = Vec::with_capacity(cfg.num_layers);
    for i in 0..cfg.num_layers {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        let mm = |name: &str, shape: &[usize]| -> Result<Linear> {
            Ok(Linear::dense(w.get(&p(name), shape)?))
        };
        let wq = hf_to_gguf_rows(
            &w.get(&p("self_attn.q_proj.weight"), &[nh * hd, d])?,
            nh,
            hd,
        )?;
        let wk = hf_to_gguf_rows(
            &w.get(&p("self_attn.k_proj.weight"), &[nkv * hd, d])?,
            nkv,
            hd,
        )?;
        // Gemma's RMSNorms scale by (1 + w) and name the MLP's norm `pre_feedforward_`;
        // its `post_attention_layernorm` normalizes the attention's output instead.
        let gemma = hc.arch == HfArch::Gemma3;
        let norm_w = |name: &str, n: usize| -> Result<Tensor> {
            let t = w.get(&p(name), &[n])?;
            Ok(if gemma { (t + 1.0)? } else { t })
        };
        let ffn_norm = if gemma {
            "pre_feedforward_layernorm.weight"
        } else {
            "post_attention_layernorm.weight"
        };
        let mut b = Block::plain(
            norm_w("input_layernorm.weight", d)?,
            Linear::dense(wq),
            Linear::dense(wk),
            mm("self_attn.v_proj.weight", &[nkv * hd, d])?,
            mm("self_attn.o_proj.weight", &[d, nh * hd])?,
            norm_w(ffn_norm, d)?,
            mm("mlp.gate_proj.weight", &[ff, d])?,
            mm("mlp.up_proj.weight", &[ff, d])?,
            mm("mlp.down_proj.weight", &[d, ff])?,
        );
        match hc.arch {
            HfArch::Llama => {}
            HfArch::Qwen2 => {
                b.bq = Some(hf_to_gguf_vec(
                    &w.get(&p("self_attn.q_proj.bias"), &[nh * hd])?,
                    nh,
                    hd,
                )?);
                b.bk = Some(hf_to_gguf_vec(
                    &w.get(&p("self_attn.k_proj.bias"), &[nkv * hd])?,
                    nkv,
                    hd,
                )?);
                b.bv = Some(w.get(&p("self_attn.v_proj.bias"), &[nkv * hd])?);
            }
            HfArch::Qwen3 | HfArch::Gemma3 => {
                b.q_norm = Some(hf_to_gguf_vec(
                    &norm_w("self_attn.q_norm.weight", hd)?,
                    1,
                    hd,
                )?);
                b.k_norm = Some(hf_to_gguf_vec(
                    &norm_w("self_attn.k_norm.weight", hd)?,
                    1,
                    hd,
                )?);
            }
        }
        if gemma {
            b.post_attn_norm = Some(norm_w("post_attention_layernorm.weight", d)?);
            b.post_ffn_norm = Some(norm_w("post_feedforward_layernorm.weight", d)?);
        }
        blocks.push(b);
    }
    let norm = w.get("model.norm.weight", &[d])?;
    let norm = if hc.arch == HfArch::Gemma3 {
        (norm + 1.0)?
    } else {
        norm
    };
    let output = if hc.tie_word_embeddings || !w.has("lm_head.weight") {
        cfg.tie_embeddings = true;
        None
    } else {
        cfg.tie_embeddings = false;
        Some(w.get("lm_head.weight", &[cfg.vocab_size, d])?)
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "hf".hash(&mut h);
    serde_json::to_string(&cfg).unwrap_or_default().hash(&mut h);
    hc.arch.name().hash(&mut h);
    dir.hash(&mut h);
    w.files.hash(&mut h);
    let mut names: Vec<&String> = w.tensors.keys().collect();
    names.sort_unstable();
    names.hash(&mut h);
    let model = LlamaModel::from_parts(cfg, embed, blocks, norm, output, h.finish())?;
    Ok((model, hc))
}

/// The HF architecture a model's blocks correspond to.
fn arch_of(model: &LlamaModel) -> Result<HfArch> {
    let b = model.blocks();
    let g = &model.config().gemma;
    if !g.is_off() {
        // Gemma 3 as `Gemma3ForCausalLM` holds it: every variation at once, on every block.
        let whole = g.scale_embeddings
            && g.gelu_gate
            && g.sliding_window.is_some()
            && g.rope_theta_local.is_some()
            && b.iter().all(|x| {
                x.q_norm.is_some()
                    && x.k_norm.is_some()
                    && x.post_attn_norm.is_some()
                    && x.post_ffn_norm.is_some()
                    && x.bq.is_none()
                    && x.bk.is_none()
                    && x.bv.is_none()
            });
        return if whole {
            Ok(HfArch::Gemma3)
        } else {
            Err(LlamaError::Unsupported(format!(
                "exporting a model with only some of Gemma 3's block variations ({g:?})"
            )))
        };
    }
    let all = |f: &dyn Fn(&Block) -> bool| b.iter().all(f);
    let none = |f: &dyn Fn(&Block) -> bool| b.iter().all(|x| !f(x));
    let bias = |x: &Block| x.bq.is_some() && x.bk.is_some() && x.bv.is_some();
    let any_bias = |x: &Block| x.bq.is_some() || x.bk.is_some() || x.bv.is_some();
    let norms = |x: &Block| x.q_norm.is_some() && x.k_norm.is_some();
    let any_norm = |x: &Block| x.q_norm.is_some() || x.k_norm.is_some();
    if none(&any_bias) && none(&any_norm) {
        Ok(HfArch::Llama)
    } else if all(&bias) && none(&any_norm) {
        Ok(HfArch::Qwen2)
    } else if all(&norms) && none(&any_bias) {
        Ok(HfArch::Qwen3)
    } else {
        Err(LlamaError::Unsupported(
            "exporting a model whose blocks mix biases and q/k norms".into(),
        ))
    }
}

/// `config.json` and the tensors (HF names, HF rotate-half q/k layout, f32) of a model.
pub(crate) fn hf_export_tensors(
    model: &LlamaModel,
    bos: Option<u32>,
    eos: Option<u32>,
) -> Result<(Value, BTreeMap<String, Tensor>)> {
    let cfg = model.config();
    let arch = arch_of(model)?;
    let gemma = arch == HfArch::Gemma3;
    // Gemma's RMSNorms scale by `1 + w` and store `w`; the runtime holds `1 + w`.
    let norm = |w: &Tensor| -> Result<Tensor> { Ok(if gemma { (w - 1.0)? } else { w.clone() }) };
    let (nh, nkv, hd) = (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
    let mut t = BTreeMap::new();
    t.insert(
        "model.embed_tokens.weight".to_string(),
        model.embed_dense()?,
    );
    for (i, b) in model.blocks().iter().enumerate() {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        t.insert(p("input_layernorm.weight"), norm(&b.attn_norm)?);
        t.insert(
            p("self_attn.q_proj.weight"),
            gguf_to_hf_rows(&dense_weight(&b.wq)?, nh, hd)?,
        );
        t.insert(
            p("self_attn.k_proj.weight"),
            gguf_to_hf_rows(&dense_weight(&b.wk)?, nkv, hd)?,
        );
        t.insert(p("self_attn.v_proj.weight"), dense_weight(&b.wv)?);
        t.insert(p("self_attn.o_proj.weight"), dense_weight(&b.wo)?);
        if let (true, Some(post_attn), Some(post_ffn)) =
            (gemma, &b.post_attn_norm, &b.post_ffn_norm)
        {
            // Gemma names the feed-forward's input norm `pre_feedforward_`; its
            // `post_attention_layernorm` normalizes the attention's output.
            t.insert(p("pre_feedforward_layernorm.weight"), norm(&b.ffn_norm)?);
            t.insert(p("post_attention_layernorm.weight"), norm(post_attn)?);
            t.insert(p("post_feedforward_layernorm.weight"), norm(post_ffn)?);
        } else {
            t.insert(p("post_attention_layernorm.weight"), b.ffn_norm.clone());
        }
        t.insert(p("mlp.gate_proj.weight"), dense_weight(&b.gate)?);
        t.insert(p("mlp.up_proj.weight"), dense_weight(&b.up)?);
        t.insert(p("mlp.down_proj.weight"), dense_weight(&b.down)?);
        if let (Some(q), Some(k), Some(v)) = (&b.bq, &b.bk, &b.bv) {
            t.insert(p("self_attn.q_proj.bias"), gguf_to_hf_vec(q, nh, hd)?);
            t.insert(p("self_attn.k_proj.bias"), gguf_to_hf_vec(k, nkv, hd)?);
            t.insert(p("self_attn.v_proj.bias"), v.clone());
        }
        if let (Some(q), Some(k)) = (&b.q_norm, &b.k_norm) {
            t.insert(
                p("self_attn.q_norm.weight"),
                norm(&gguf_to_hf_vec(q, 1, hd)?)?,
            );
            t.insert(
                p("self_attn.k_norm.weight"),
                norm(&gguf_to_hf_vec(k, 1, hd)?)?,
            );
        }
    }
    t.insert("model.norm.weight".to_string(), norm(model.norm_weight())?);
    if !cfg.tie_embeddings {
        t.insert("lm_head.weight".to_string(), model.output_dense()?);
    }
    for v in t.values_mut() {
        *v = v.to_dtype(DType::F32)?.contiguous()?;
    }
    let mut config = json!({
        "architectures": [arch.name()],
        "model_type": arch.model_type(),
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "head_dim": hd,
        "hidden_act": "silu",
        "rope_theta": cfg.rope_theta,
        "rms_norm_eps": cfg.rms_eps,
        "max_position_embeddings": cfg.max_position,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": arch == HfArch::Qwen2,
        "torch_dtype": "float32",
        "bos_token_id": bos,
        "eos_token_id": eos,
    });
    if gemma {
        let g = &cfg.gemma;
        let layer_types: Vec<&str> = (0..cfg.num_layers)
            .map(|l| match cfg.layer_window(l) {
                Some(_) => "sliding_attention",
                None => "full_attention",
            })
            .collect();
        let extra = json!({
            "hidden_activation": "gelu_pytorch_tanh",
            "sliding_window": g.sliding_window,
            "layer_types": layer_types,
            "sliding_window_pattern": g.sliding_window_pattern,
            "rope_local_base_freq": g.rope_theta_local,
            "query_pre_attn_scalar": hd,
            "final_logit_softcapping": null,
            "attn_logit_softcapping": null,
            "rope_scaling": null,
        });
        if let (Some(c), Value::Object(e)) = (config.as_object_mut(), extra) {
            c.remove("hidden_act");
            c.extend(e);
        }
    }
    Ok((config, t))
}

/// Write `bytes` to `dir/name` through a temporary file and a rename.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(name);
    let mut f = std::fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    f.sync_all().map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, &dst).map_err(|e| io_err(&dst, e))
}

/// Save tensors as `dir/model.safetensors` (temporary file, fsync, rename).
pub(crate) fn write_safetensors(dir: &Path, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
    let tmp = dir.join(".model.safetensors.tmp");
    let dst = dir.join("model.safetensors");
    let map: HashMap<&str, Tensor> = tensors
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    candle_core::safetensors::save(&map, &tmp)?;
    // The safetensors writer creates its file readable by the owner only; an exported model is
    // meant to be read like the other files beside it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| io_err(&tmp, e))?;
    }
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, &dst).map_err(|e| io_err(&dst, e))
}
