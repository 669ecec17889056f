//! GGUF reading: header, metadata, Llama configuration and quantized tensors, with typed
//! errors that name the tensor / key and the file offset.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

use crate::config::{Gemma, LlamaConfig};
use crate::error::{LlamaError, Result};

/// The decoder families a GGUF may hold (`general.architecture`). They share one forward: Qwen2
/// adds q/k/v biases, Qwen3 per-head q/k RMSNorms; Gemma3 q/k norms, norms after attention and
/// feed-forward too, GeGLU, scaled embeddings and sliding-window layers ([`crate::Gemma`]). All
/// but `llama` rotate halves (NeoX RoPE), which the loader turns into the interleaved layout of
/// `llama` files by permuting q/k rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgufArch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

/// Gemma 3's sliding-window layout, which llama.cpp fixes in code rather than reading from the
/// file: five local layers, then one global, with a RoPE base of 10,000 on the local ones.
const GEMMA3_WINDOW_PATTERN: usize = 6;
const GEMMA3_LOCAL_ROPE_THETA: f64 = 10_000.0;

impl GgufArch {
    /// Every supported family, in the order error messages list them.
    pub const ALL: [GgufArch; 4] = [Self::Llama, Self::Qwen2, Self::Qwen3, Self::Gemma3];

    /// The `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether q/k are stored in rotate-half order (llama.cpp's NeoX RoPE): true for the
    /// families whose converter does not permute them, as it does for `llama`.
    pub fn rotates_halves(self) -> bool {
        !matches!(self, Self::Llama)
    }
}

/// An opened GGUF file: parsed header plus a reader for tensor data.
pub struct GgufFile {
    path: PathBuf,
    content: Content,
    reader: BufReader<File>,
    file_size: u64,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("tensors", &self.content.tensor_infos.len())
            .field("metadata", &self.content.metadata.len())
            .finish()
    }
}

fn dtype_name(d: GgmlDType) -> String {
    format!("{d:?}")
}

/// The row length (innermost dimension) a quantized type's matmul kernels assume: the
/// 32-value formats work on pairs of blocks, the K-quants on whole 256-value super-blocks.
/// Checked when a tensor is read, so a file that breaks it is refused before a kernel runs on it
/// (in release builds those kernels do not check, and a panic inside one poisons candle's shared
/// scratch buffers for the whole process).
fn row_multiple(dtype: GgmlDType) -> Option<usize> {
    match dtype {
        GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 => None,
        GgmlDType::Q4_0
        | GgmlDType::Q4_1
        | GgmlDType::Q5_0
        | GgmlDType::Q5_1
        | GgmlDType::Q8_0
        | GgmlDType::Q8_1 => Some(2 * dtype.block_size()),
        _ => Some(dtype.block_size()),
    }
}

/// ggml's tensor type names by id (ggml.h `enum ggml_type`), for refusals.
const GGML_TYPE_NAMES: [(u32, &str); 33] = [
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (6, "Q5_0"),
    (7, "Q5_1"),
    (8, "Q8_0"),
    (9, "Q8_1"),
    (10, "Q2_K"),
    (11, "Q3_K"),
    (12, "Q4_K"),
    (13, "Q5_K"),
    (14, "Q6_K"),
    (15, "Q8_K"),
    (16, "IQ2_XXS"),
    (17, "IQ2_XS"),
    (18, "IQ3_XXS"),
    (19, "IQ1_S"),
    (20, "IQ4_NL"),
    (21, "IQ3_S"),
    (22, "IQ2_S"),
    (23, "IQ4_XS"),
    (24, "I8"),
    (25, "I16"),
    (26, "I32"),
    (27, "I64"),
    (28, "F64"),
    (29, "IQ1_M"),
    (30, "BF16"),
    (34, "TQ1_0"),
    (35, "TQ2_0"),
    (39, "MXFP4"),
    (40, "NVFP4"),
];

/// The tensor types this runtime reads (candle's `GgmlDType`).
pub const SUPPORTED_TENSOR_TYPES: &str =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K";

/// A header error in words: candle says "unknown dtype for tensor 20" (the number is ggml's
/// type id, not a tensor's); name the type and what is supported instead. Only the message's
/// first line is kept (candle appends a backtrace when one was captured).
fn header_reason(e: &candle_core::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default().to_string();
    let Some(id) = first
        .strip_prefix("unknown dtype for tensor ")
        .and_then(|n| n.trim().parse::<u32>().ok())
    else {
        return first;
    };
    let name = GGML_TYPE_NAMES.iter().find(|(i, _)| *i == id).map_or_else(
        || format!("ggml type {id}"),
        |(_, n)| format!("{n} (ggml type {id})"),
    );
    format!("tensor type {name} is not supported (supported: {SUPPORTED_TENSOR_TYPES})")
}

impl GgufFile {
    /// Open and parse the header. Every tensor's data range is checked against the file
    /// size up front, so a truncated file fails here naming the first tensor that does not fit.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|source| LlamaError::Io {
            path: path.clone(),
            source,
        })?;
        let file_size = file
            .metadata()
            .map_err(|source| LlamaError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        let mut reader = BufReader::new(file);
        let content = Content::read(&mut reader).map_err(|e| LlamaError::GgufHeader {
            path: path.clone(),
            reason: format!("{} (file is {file_size} bytes)", header_reason(&e)),
        })?;
        let this = Self {
            path,
            content,
            reader,
            file_size,
        };
        this.check_ranges()?;
        Ok(this)
    }

    fn check_ranges(&self) -> Result<()> {
        // Check in file order so the error names the first tensor that is cut off.
        let mut infos: Vec<_> = self.content.tensor_infos.iter().collect();
        infos.sort_by_key(|(_, i)| i.offset);
        for (name, info) in infos {
            let (bytes, start) = self.tensor_extent(name)?;
            let _ = info;
            let end = start.checked_add(bytes);
            if !matches!(end, Some(e) if e <= self.file_size) {
                return Err(LlamaError::TensorData {
                    path: self.path.clone(),
                    tensor: name.clone(),
                    dtype: dtype_name(self.content.tensor_infos[name].ggml_dtype),
                    bytes,
                    offset: start,
                    reason: format!(
                        "file is truncated: data ends at {} but the file has {} bytes",
                        end.map_or_else(|| "overflow".to_string(), |e| e.to_string()),
                        self.file_size
                    ),
                });
            }
        }
        Ok(())
    }

    /// (size in bytes, absolute file offset) of a tensor's data.
    fn tensor_extent(&self, name: &str) -> Result<(u64, u64)> {
        let info =
            self.content
                .tensor_infos
                .get(name)
                .ok_or_else(|| LlamaError::MissingTensor {
                    path: self.path.clone(),
                    tensor: name.to_string(),
                })?;
        // A header may claim dimensions whose product overflows: refuse it here, before a
        // wrapped element count could pass the range check and reach a kernel.
        let elems = info
            .shape
            .dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| LlamaError::TensorData {
                path: self.path.clone(),
                tensor: name.to_string(),
                dtype: dtype_name(info.ggml_dtype),
                bytes: 0,
                offset: self.content.tensor_data_offset.saturating_add(info.offset),
                reason: format!(
                    "shape {:?} has more elements than memory can hold",
                    info.shape.dims()
                ),
            })?;
        let bs = info.ggml_dtype.block_size();
        if elems % bs != 0 {
            return Err(LlamaError::TensorData {
                path: self.path.clone(),
                tensor: name.to_string(),
                dtype: dtype_name(info.ggml_dtype),
                bytes: 0,
                offset: self.content.tensor_data_offset.saturating_add(info.offset),
                reason: format!("{elems} elements is not a multiple of the block size {bs}"),
            });
        }
        let bytes = ((elems / bs) as u64)
            .checked_mul(info.ggml_dtype.type_size() as u64)
            .ok_or_else(|| LlamaError::TensorData {
                path: self.path.clone(),
                tensor: name.to_string(),
                dtype: dtype_name(info.ggml_dtype),
                bytes: 0,
                offset: self.content.tensor_data_offset.saturating_add(info.offset),
                reason: "the tensor's size in bytes overflows".into(),
            })?;
        Ok((
            bytes,
            self.content.tensor_data_offset.saturating_add(info.offset),
        ))
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// A hash of 16 windows of 4 KiB spread evenly over the file: it tells files apart by
    /// what they hold, wherever they are (the same file reached through another path is the
    /// same model; two fine-tunes of one base with the same layout are not), for 64 KiB of
    /// reads.
    pub fn content_sample_hash(&mut self) -> Result<u64> {
        use std::hash::{Hash, Hasher};
        const WINDOWS: u64 = 16;
        const WINDOW: u64 = 4096;
        let io = |source| LlamaError::Io {
            path: self.path.clone(),
            source,
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut buf = vec![0u8; WINDOW as usize];
        let span = self.file_size.saturating_sub(WINDOW);
        for i in 0..WINDOWS {
            let at = span / (WINDOWS - 1) * i;
            self.reader.seek(SeekFrom::Start(at)).map_err(io)?;
            let len = WINDOW.min(self.file_size - at) as usize;
            self.reader.read_exact(&mut buf[..len]).map_err(io)?;
            buf[..len].hash(&mut h);
        }
        Ok(h.finish())
    }

    /// All metadata.
    pub fn metadata(&self) -> &HashMap<String, Value> {
        &self.content.metadata
    }

    /// Names of all tensors.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.content.tensor_infos.keys().map(String::as_str)
    }

    /// Whether a tensor exists.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// Shape of a tensor in candle order (outermost first).
    pub fn tensor_shape(&self, name: &str) -> Option<Vec<usize>> {
        self.content
            .tensor_infos
            .get(name)
            .map(|i| i.shape.dims().to_vec())
    }

    /// Read one tensor, checking its shape when `expected` is given.
    pub fn tensor(&mut self, name: &str, expected: Option<&[usize]>) -> Result<QTensor> {
        let (bytes, offset) = self.tensor_extent(name)?;
        let info = &self.content.tensor_infos[name];
        let dtype = info.ggml_dtype;
        let dims = info.shape.dims().to_vec();
        if let Some(exp) = expected {
            if exp != dims.as_slice() {
                return Err(LlamaError::TensorShape {
                    path: self.path.clone(),
                    tensor: name.to_string(),
                    found: dims,
                    expected: exp.to_vec(),
                });
            }
        }
        let err = |reason: String| LlamaError::TensorData {
            path: self.path.clone(),
            tensor: name.to_string(),
            dtype: dtype_name(dtype),
            bytes,
            offset,
            reason,
        };
        if let Some(need) = row_multiple(dtype) {
            let row = dims.last().copied().unwrap_or(0);
            if row % need != 0 {
                return Err(err(format!(
                    "rows of {row} values: the {} kernels need a multiple of {need}",
                    dtype_name(dtype)
                )));
            }
        }
        let mut raw = vec![0u8; bytes as usize];
        self.reader
            .seek(SeekFrom::Start(offset))
            .and_then(|_| self.reader.read_exact(&mut raw))
            .map_err(|e| err(e.to_string()))?;
        let storage = candle_core::quantized::QStorage::from_data(
            std::borrow::Cow::Owned(raw),
            &Device::Cpu,
            dtype,
        )
        .map_err(|e| err(e.to_string()))?;
        QTensor::new(storage, dims).map_err(|e| err(e.to_string()))
    }

    /// Read a q or k tensor (weight `[heads * head_dim, in]`, bias or norm `[heads * head_dim]`)
    /// stored in rotate-half order and return it with its rows in the interleaved-RoPE order
    /// the runtime uses: within each head, new row `2i + j` is old row `j * head_dim / 2 + i`.
    /// Quantized rows are moved whole (a row is a run of blocks), so the permutation is exact
    /// for every quantization type.
    pub fn tensor_rope_interleaved(
        &mut self,
        name: &str,
        expected: &[usize],
        heads: usize,
        head_dim: usize,
    ) -> Result<QTensor> {
        let q = self.tensor(name, Some(expected))?;
        let rows = expected[0];
        let err = |reason: String| LlamaError::TensorData {
            path: self.path.clone(),
            tensor: name.to_string(),
            dtype: dtype_name(q.dtype()),
            bytes: 0,
            offset: 0,
            reason,
        };
        if rows != heads * head_dim || !head_dim.is_multiple_of(2) {
            return Err(err(format!(
                "{rows} rows are not {heads} heads of an even head size {head_dim}"
            )));
        }
        if expected.len() == 1 && q.dtype().block_size() != 1 {
            return Err(err(format!(
                "a quantized ({}) vector cannot be permuted value by value",
                dtype_name(q.dtype())
            )));
        }
        // A vector (bias, norm) is permuted value by value: each value is its own "row".
        let data = q.data().map_err(|e| err(e.to_string()))?;
        let row_bytes = data.len() / rows;
        let mut out = Vec::with_capacity(data.len());
        let half = head_dim / 2;
        for h in 0..heads {
            for i in 0..half {
                for j in 0..2 {
                    let src = h * head_dim + j * half + i;
                    out.extend_from_slice(&data[src * row_bytes..(src + 1) * row_bytes]);
                }
            }
        }
        let (dtype, dims) = (q.dtype(), q.shape().dims().to_vec());
        drop(data);
        let storage = candle_core::quantized::QStorage::from_data(
            std::borrow::Cow::Owned(out),
            &Device::Cpu,
            dtype,
        )
        .map_err(|e| err(e.to_string()))?;
        QTensor::new(storage, dims).map_err(|e| err(e.to_string()))
    }

    // ---- metadata helpers ----

    fn meta_err(&self, key: &str, reason: impl Into<String>) -> LlamaError {
        LlamaError::Metadata {
            path: self.path.clone(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// A metadata value, or a typed error naming the key.
    pub fn get(&self, key: &str) -> Result<&Value> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.meta_err(key, "missing"))
    }

    /// An unsigned integer metadata value (any integer width).
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        let v = self.get(key)?;
        let n: Option<u64> = match v {
            Value::U8(x) => Some(*x as u64),
            Value::U16(x) => Some(*x as u64),
            Value::U32(x) => Some(*x as u64),
            Value::U64(x) => Some(*x),
            Value::I8(x) => u64::try_from(*x).ok(),
            Value::I16(x) => u64::try_from(*x).ok(),
            Value::I32(x) => u64::try_from(*x).ok(),
            Value::I64(x) => u64::try_from(*x).ok(),
            _ => None,
        };
        n.map(|n| n as usize).ok_or_else(|| {
            self.meta_err(key, format!("expected a non-negative integer, got {v:?}"))
        })
    }

    /// An optional unsigned integer.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        if self.content.metadata.contains_key(key) {
            self.get_usize(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A float metadata value.
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        match self.get(key)? {
            Value::F32(x) => Ok(*x as f64),
            Value::F64(x) => Ok(*x),
            v => Err(self.meta_err(key, format!("expected a float, got {v:?}"))),
        }
    }

    /// A string metadata value.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            v => Err(self.meta_err(key, format!("expected a string, got {:?}", v.value_type()))),
        }
    }

    /// An optional string.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        if self.content.metadata.contains_key(key) {
            self.get_str(key).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An optional bool.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.content.metadata.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.meta_err(key, format!("expected a bool, got {v:?}"))),
        }
    }

    /// A string array.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<String>> {
        match self.get(key)? {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(self.meta_err(
                        key,
                        format!(
                            "element {i}: expected a string, got {:?}",
                            other.value_type()
                        ),
                    )),
                })
                .collect(),
            v => Err(self.meta_err(key, format!("expected an array, got {:?}", v.value_type()))),
        }
    }

    /// A float array (F32 or F64 elements; SentencePiece scores).
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        match self.get(key)? {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::F32(x) => Ok(*x),
                    Value::F64(x) => Ok(*x as f32),
                    other => Err(self.meta_err(
                        key,
                        format!(
                            "element {i}: expected a float, got {:?}",
                            other.value_type()
                        ),
                    )),
                })
                .collect(),
            v => Err(self.meta_err(key, format!("expected an array, got {:?}", v.value_type()))),
        }
    }

    /// An integer array (any integer width).
    pub fn get_int_array(&self, key: &str) -> Result<Vec<i64>> {
        match self.get(key)? {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::I32(x) => Ok(*x as i64),
                    Value::U32(x) => Ok(*x as i64),
                    Value::I8(x) => Ok(*x as i64),
                    Value::U8(x) => Ok(*x as i64),
                    Value::I16(x) => Ok(*x as i64),
                    Value::U16(x) => Ok(*x as i64),
                    Value::I64(x) => Ok(*x),
                    Value::U64(x) => Ok(*x as i64),
                    other => Err(self.meta_err(
                        key,
                        format!(
                            "element {i}: expected an integer, got {:?}",
                            other.value_type()
                        ),
                    )),
                })
                .collect(),
            v => Err(self.meta_err(key, format!("expected an array, got {:?}", v.value_type()))),
        }
    }

    /// The decoder family named by `general.architecture`.
    pub fn architecture(&self) -> Result<GgufArch> {
        let arch = self.get_str("general.architecture")?;
        GgufArch::from_name(arch).ok_or_else(|| {
            LlamaError::Unsupported(format!(
                "{}: architecture `{arch}` (supported: {})",
                self.path.display(),
                GgufArch::ALL
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    /// The Llama-family configuration described by the metadata (any [`GgufArch`]).
    pub fn llama_config(&self) -> Result<LlamaConfig> {
        let family = self.architecture()?;
        let arch = family.name();
        let k = |s: &str| format!("{arch}.{s}");
        let hidden = self.get_usize(&k("embedding_length"))?;
        let n_heads = self.get_usize(&k("attention.head_count"))?;
        let n_kv_heads = self
            .opt_usize(&k("attention.head_count_kv"))?
            .unwrap_or(n_heads);
        if n_heads == 0 || hidden % n_heads != 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
            return Err(self.meta_err(
                &k("attention.head_count"),
                format!("{n_heads} heads / {n_kv_heads} kv heads do not divide embedding length {hidden}"),
            ));
        }
        let head_dim = self
            .opt_usize(&k("attention.key_length"))?
            .unwrap_or(hidden / n_heads);
        let vocab_size = match self.opt_usize(&k("vocab_size"))? {
            Some(v) => v,
            None => self
                .tensor_shape("token_embd.weight")
                .map(|s| s[0])
                .ok_or_else(|| self.meta_err(&k("vocab_size"), "missing"))?,
        };
        let rope_theta = if self.content.metadata.contains_key(&k("rope.freq_base")) {
            self.get_f64(&k("rope.freq_base"))?
        } else {
            10_000.0
        };
        let cfg = LlamaConfig {
            vocab_size,
            hidden_size: hidden,
            intermediate_size: self.get_usize(&k("feed_forward_length"))?,
            num_layers: self.get_usize(&k("block_count"))?,
            num_heads: n_heads,
            num_kv_heads: n_kv_heads,
            head_dim,
            rope_theta,
            rms_eps: self.get_f64(&k("attention.layer_norm_rms_epsilon"))?,
            max_position: self.opt_usize(&k("context_length"))?.unwrap_or(2048),
            tie_embeddings: !self.has_tensor("output.weight"),
            gemma: match family {
                GgufArch::Gemma3 => Gemma {
                    scale_embeddings: true,
                    gelu_gate: true,
                    sliding_window: self.opt_usize(&k("attention.sliding_window"))?,
                    sliding_window_pattern: GEMMA3_WINDOW_PATTERN,
                    rope_theta_local: Some(GEMMA3_LOCAL_ROPE_THETA),
                },
                _ => Gemma::default(),
            },
        };
        cfg.check().map_err(|(field, reason)| {
            let key = match field {
                "vocab_size" => "vocab_size",
                "hidden_size" => "embedding_length",
                "intermediate_size" => "feed_forward_length",
                "num_layers" => "block_count",
                "num_heads" => "attention.head_count",
                "num_kv_heads" => "attention.head_count_kv",
                "head_dim" => "attention.key_length",
                "max_position" => "context_length",
                "rope_theta" => "rope.freq_base",
                "sliding_window" => "attention.sliding_window",
                _ => "attention.layer_norm_rms_epsilon",
            };
            self.meta_err(&k(key), reason)
        })?;
        Ok(cfg)
    }
}
