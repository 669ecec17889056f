//! The GGUF reader and the model loader on truncated, bit-flipped and size-lying files. The
//! quantized kernels use `unsafe`, so a file must be refused (typed error) before any kernel
//! runs on a shape it does not hold; a file that loads must run a forward pass.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{self, Value as GValue};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use plansmith_llama::{GgufFile, LlamaModel};

use crate::mutate::{self, Rng};
use crate::{Target, Verdict};

pub struct GgufTarget {
    seed: Vec<u8>,
    path: PathBuf,
}

/// A two-layer Llama with F32, Q8_0 and Q4_1 tensors (the kernels the runtime has).
fn tiny_gguf() -> Result<Vec<u8>, String> {
    let e = |x: candle_core::Error| x.to_string();
    let dev = Device::Cpu;
    let (d, ff, nh, nkv, hd, vocab, layers) =
        (64usize, 128usize, 4usize, 2usize, 16usize, 64usize, 2usize);
    let md: Vec<(String, GValue)> = vec![
        (
            "general.architecture".into(),
            GValue::String("llama".into()),
        ),
        ("llama.block_count".into(), GValue::U32(layers as u32)),
        ("llama.context_length".into(), GValue::U32(128)),
        ("llama.embedding_length".into(), GValue::U32(d as u32)),
        ("llama.feed_forward_length".into(), GValue::U32(ff as u32)),
        ("llama.attention.head_count".into(), GValue::U32(nh as u32)),
        (
            "llama.attention.head_count_kv".into(),
            GValue::U32(nkv as u32),
        ),
        ("llama.rope.freq_base".into(), GValue::F32(10000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            GValue::F32(1e-5),
        ),
        ("llama.vocab_size".into(), GValue::U32(vocab as u32)),
    ];
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>, dtype: GgmlDType| -> Result<(), String> {
        let t = Tensor::randn(0f32, 0.1, shape, &dev).map_err(e)?;
        tensors.push((name, QTensor::quantize(&t, dtype).map_err(e)?));
        Ok(())
    };
    add("token_embd.weight".into(), vec![vocab, d], GgmlDType::Q8_0)?;
    add("output_norm.weight".into(), vec![d], GgmlDType::F32)?;
    for i in 0..layers {
        let q = if i == 0 {
            GgmlDType::Q8_0
        } else {
            GgmlDType::Q4_1
        };
        add(format!("blk.{i}.attn_norm.weight"), vec![d], GgmlDType::F32)?;
        add(format!("blk.{i}.ffn_norm.weight"), vec![d], GgmlDType::F32)?;
        add(format!("blk.{i}.attn_q.weight"), vec![nh * hd, d], q)?;
        add(format!("blk.{i}.attn_k.weight"), vec![nkv * hd, d], q)?;
        add(format!("blk.{i}.attn_v.weight"), vec![nkv * hd, d], q)?;
        add(format!("blk.{i}.attn_output.weight"), vec![d, nh * hd], q)?;
        add(format!("blk.{i}.ffn_gate.weight"), vec![ff, d], q)?;
        add(format!("blk.{i}.ffn_up.weight"), vec![ff, d], q)?;
        add(format!("blk.{i}.ffn_down.weight"), vec![d, ff], q)?;
    }
    let mut out = Cursor::new(Vec::new());
    let md_refs: Vec<(&str, &GValue)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut out, &md_refs, &t_refs).map_err(e)?;
    Ok(out.into_inner())
}

impl GgufTarget {
    pub fn new() -> Result<Self, String> {
        let seed = tiny_gguf()?;
        // A RAM-backed directory when there is one: every case is written to a file.
        let base = ["/dev/shm"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let path = base.join(format!("plansmith-fuzz-{}.gguf", std::process::id()));
        Ok(GgufTarget { seed, path })
    }

    /// Where the header ends (metadata and tensor infos): the bytes mutations hit most.
    fn header_len(&self) -> usize {
        3000.min(self.seed.len())
    }
}

impl Drop for GgufTarget {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Target for GgufTarget {
    fn name(&self) -> &'static str {
        "gguf"
    }

    fn input(&mut self, rng: &mut Rng) -> Vec<u8> {
        let mut data = self.seed.clone();
        let rounds = 1 + rng.below(4);
        let hot = self.header_len();
        mutate::bytes(rng, &mut data, rounds, hot);
        data
    }

    fn check(&mut self, input: &[u8]) -> Result<Verdict, String> {
        std::fs::write(&self.path, input).map_err(|e| format!("cannot write the case: {e}"))?;
        let mut g = match GgufFile::open(&self.path) {
            Ok(g) => g,
            Err(_) => return Ok(Verdict::Refused),
        };
        if g.llama_config().is_err() {
            return Ok(Verdict::Refused);
        }
        let model = match LlamaModel::from_gguf(&mut g) {
            Ok(m) => Arc::new(m),
            Err(_) => return Ok(Verdict::Refused),
        };
        let mut s = model.session();
        match s.prefill(&[1, 2, 3]) {
            Ok(logits) if logits.is_empty() => Err("a loaded model returned no logits".into()),
            Ok(_) => Ok(Verdict::Accepted),
            Err(_) => Ok(Verdict::Refused),
        }
    }
}
