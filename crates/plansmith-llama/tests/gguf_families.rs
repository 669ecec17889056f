//! GGUF files of each supported family and every quantization type, against golden files made
//! by `scripts/gguf_golden.py` (transformers' float64 logits; gguf-py's `dequantize`). The GGUF
//! files are written here, from the tiny checkpoints of the LoRA golden test, the way llama.cpp's
//! converter lays them out (the script's `--gguf-dir` writes the same files with gguf-py).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use plansmith_llama::qkernel::QMatrix;
use plansmith_llama::{GgufArch, GgufFile, LlamaError, LlamaModel};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden() -> Json {
    let text = std::fs::read_to_string(fixtures().join("gguf_golden/golden.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("plansmith-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// llama.cpp's converter permutation of q/k rows for `llama` (rotate-half -> interleaved).
fn permute(w: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = w.dims2().unwrap();
    w.reshape((heads, 2, rows / heads / 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

/// Write `<arch>-<ftype>.gguf` (ftype `f32` or `f16`: the matrices' type; norms and biases
/// stay F32) from `lora_golden/<arch>/model` into `dir`, as llama.cpp's converter would.
fn write_family(arch: &str, ftype: &str, dir: &Path) -> PathBuf {
    let src = fixtures().join(format!("lora_golden/{arch}/model"));
    let cfg: Json =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    let n = |k: &str| cfg[k].as_u64().unwrap() as u32;
    let (heads, kv_heads, layers) = (
        n("num_attention_heads"),
        n("num_key_value_heads"),
        n("num_hidden_layers"),
    );
    let k = |s: &str| format!("{arch}.{s}");
    let md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (k("block_count"), Value::U32(layers)),
        (
            k("context_length"),
            Value::U32(n("max_position_embeddings")),
        ),
        (k("embedding_length"), Value::U32(n("hidden_size"))),
        (k("feed_forward_length"), Value::U32(n("intermediate_size"))),
        (k("attention.head_count"), Value::U32(heads)),
        (k("attention.head_count_kv"), Value::U32(kv_heads)),
        (k("attention.key_length"), Value::U32(n("head_dim"))),
        (k("attention.value_length"), Value::U32(n("head_dim"))),
        (
            k("rope.freq_base"),
            Value::F32(cfg["rope_parameters"]["rope_theta"].as_f64().unwrap() as f32),
        ),
        (
            k("attention.layer_norm_rms_epsilon"),
            Value::F32(cfg["rms_norm_eps"].as_f64().unwrap() as f32),
        ),
        (k("vocab_size"), Value::U32(n("vocab_size"))),
    ];
    let hf: HashMap<String, Tensor> =
        candle_core::safetensors::load(src.join("model.safetensors"), &Device::Cpu).unwrap();
    let matrix = if ftype == "f16" {
        GgmlDType::F16
    } else {
        GgmlDType::F32
    };
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut put = |name: String, t: &Tensor| {
        let dtype = if t.rank() == 2 {
            matrix
        } else {
            GgmlDType::F32
        };
        tensors.push((name, QTensor::quantize(t, dtype).unwrap()));
    };
    put("token_embd.weight".into(), &hf["model.embed_tokens.weight"]);
    for i in 0..layers {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        let (mut q, mut kk) = (
            hf[&p("self_attn.q_proj.weight")].clone(),
            hf[&p("self_attn.k_proj.weight")].clone(),
        );
        if arch == "llama" {
            q = permute(&q, heads as usize);
            kk = permute(&kk, kv_heads as usize);
        }
        put(format!("blk.{i}.attn_q.weight"), &q);
        put(format!("blk.{i}.attn_k.weight"), &kk);
        for (ours, theirs) in [
            ("attn_v.weight", "self_attn.v_proj.weight"),
            ("attn_output.weight", "self_attn.o_proj.weight"),
            ("ffn_gate.weight", "mlp.gate_proj.weight"),
            ("ffn_up.weight", "mlp.up_proj.weight"),
            ("ffn_down.weight", "mlp.down_proj.weight"),
            ("attn_norm.weight", "input_layernorm.weight"),
            ("ffn_norm.weight", "post_attention_layernorm.weight"),
            ("attn_q.bias", "self_attn.q_proj.bias"),
            ("attn_k.bias", "self_attn.k_proj.bias"),
            ("attn_v.bias", "self_attn.v_proj.bias"),
            ("attn_q_norm.weight", "self_attn.q_norm.weight"),
            ("attn_k_norm.weight", "self_attn.k_norm.weight"),
        ] {
            // Biases exist in Qwen2 checkpoints only, q/k norms in Qwen3 ones.
            if let Some(t) = hf.get(&p(theirs)) {
                put(format!("blk.{i}.{ours}"), t);
            }
        }
    }
    put("output_norm.weight".into(), &hf["model.norm.weight"]);
    if !cfg["tie_word_embeddings"].as_bool().unwrap() {
        put("output.weight".into(), &hf["lm_head.weight"]);
    }
    let out = dir.join(format!("{arch}-{ftype}.gguf"));
    let md_ref: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_ref: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut std::fs::File::create(&out).unwrap(), &md_ref, &t_ref).unwrap();
    out
}

#[test]
fn every_family_in_f32_and_f16_matches_transformers_logits() {
    let g = golden();
    let tokens: Vec<u32> = g["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    let models = g["models"].as_object().unwrap();
    assert_eq!(models.len(), 6, "three families x (f32, f16)");
    let dir = temp_dir("families");
    for (file, want) in models {
        let (arch, ftype) = file.trim_end_matches(".gguf").split_once('-').unwrap();
        let mut f = GgufFile::open(write_family(arch, ftype, &dir)).unwrap();
        let arch = f.architecture().unwrap();
        assert_eq!(arch.name(), want["arch"].as_str().unwrap(), "{file}");
        let model = Arc::new(LlamaModel::from_gguf(&mut f).unwrap());
        let got = model.session().prefill_all_logits(&tokens).unwrap();
        let worst = common::worst_logit_error(&got, &common::json_rows(&want["logits"]), file);
        assert!(
            worst <= 1e-4,
            "{file}: worst relative logit error {worst:e}"
        );
        eprintln!("{file} ({arch:?}): worst relative logit error {worst:.1e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dequantization_equals_gguf_py_bit_for_bit_on_every_type() {
    let g = golden();
    let types = g["quants"].as_object().unwrap();
    assert!(types.len() >= 12, "{:?}", types.keys());
    let mut checked_packed = Vec::new();
    for (name, case) in types {
        let dtype = match name.as_str() {
            "F16" => GgmlDType::F16,
            "BF16" => GgmlDType::BF16,
            "Q4_0" => GgmlDType::Q4_0,
            "Q4_1" => GgmlDType::Q4_1,
            "Q5_0" => GgmlDType::Q5_0,
            "Q5_1" => GgmlDType::Q5_1,
            "Q8_0" => GgmlDType::Q8_0,
            "Q2_K" => GgmlDType::Q2K,
            "Q3_K" => GgmlDType::Q3K,
            "Q4_K" => GgmlDType::Q4K,
            "Q5_K" => GgmlDType::Q5K,
            "Q6_K" => GgmlDType::Q6K,
            other => panic!("type {other} has no case here"),
        };
        let hex = case["raw"].as_str().unwrap();
        let raw: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let q = qtensor_from_ggml(dtype, &raw, vec![4, 256], &Device::Cpu).unwrap();
        let ours: Vec<f32> = q
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let refr: Vec<u32> = case["ref_bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(ours.len(), refr.len(), "{name}");
        assert!(
            refr.iter().any(|b| f32::from_bits(*b) != 0.0),
            "{name}: reference all zero"
        );
        let differ = ours
            .iter()
            .zip(&refr)
            .filter(|(a, b)| a.to_bits() != **b)
            .count();
        assert_eq!(
            differ,
            0,
            "{name}: {differ} of {} values differ",
            ours.len()
        );
        // The runtime's own repacking (the kernels' formats, and embedding rows of a model
        // whose table is one of them) must dequantize to the same bits.
        if let Some(m) = QMatrix::from_qtensor(&q).unwrap() {
            let packed = m.dequantize();
            let differ = packed
                .iter()
                .zip(&refr)
                .filter(|(a, b)| a.to_bits() != **b)
                .count();
            assert_eq!(differ, 0, "{name} repacked as {:?}", m.format());
            checked_packed.push(name.clone());
        }
    }
    for name in ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"] {
        assert!(
            checked_packed.iter().any(|n| n == name),
            "{name} not repacked"
        );
    }
}

/// A copy of the GGUF `src` whose `general.architecture` is `arch`, without the tensor `drop`
/// (for refusals).
fn rewrite(src: &Path, arch: &str, drop: Option<&str>, out: &Path) {
    let mut file = std::fs::File::open(src).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let src_arch = match &content.metadata["general.architecture"] {
        Value::String(s) => s.clone(),
        v => panic!("{v:?}"),
    };
    let md: Vec<(String, Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| {
            let k = k.replacen(&format!("{src_arch}."), &format!("{arch}."), 1);
            let v = if k == "general.architecture" {
                Value::String(arch.into())
            } else {
                v.clone()
            };
            (k, v)
        })
        .collect();
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in content.tensor_infos.keys() {
        if Some(name.as_str()) == drop {
            continue;
        }
        tensors.push((
            name.clone(),
            content.tensor(&mut file, name, &Device::Cpu).unwrap(),
        ));
    }
    let mut w = std::fs::File::create(out).unwrap();
    let md_ref: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_ref: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut w, &md_ref, &t_ref).unwrap();
}

#[test]
fn unsupported_architecture_and_missing_family_tensor_are_named() {
    let dir = temp_dir("refusals");
    let p = dir.join("gemma2.gguf");
    rewrite(&write_family("llama", "f32", &dir), "gemma2", None, &p);
    let err = LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::Unsupported(_)), "{msg}");
    assert!(
        msg.contains("gemma2") && msg.contains("qwen2") && msg.contains("llama"),
        "{msg}"
    );

    // A Qwen2 file without a q bias names the tensor.
    let p = dir.join("qwen2-nobias.gguf");
    rewrite(
        &write_family("qwen2", "f32", &dir),
        "qwen2",
        Some("blk.1.attn_q.bias"),
        &p,
    );
    let err = LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap_err();
    assert!(
        matches!(err, LlamaError::MissingTensor { .. })
            && err.to_string().contains("blk.1.attn_q.bias"),
        "{err}"
    );

    // The family-specific tensors are used: the Qwen3 file read as `llama` (no q/k norms, no
    // permutation) gives other logits.
    let p = dir.join("qwen3-as-llama.gguf");
    let qwen3_file = write_family("qwen3", "f32", &dir);
    rewrite(&qwen3_file, "llama", None, &p);
    let as_llama = Arc::new(LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap());
    let mut f = GgufFile::open(&qwen3_file).unwrap();
    assert_eq!(f.architecture().unwrap(), GgufArch::Qwen3);
    let qwen3 = Arc::new(LlamaModel::from_gguf(&mut f).unwrap());
    let a = as_llama.session().prefill(&[1, 5, 9, 3]).unwrap();
    let b = qwen3.session().prefill(&[1, 5, 9, 3]).unwrap();
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(
        diff > 1e-3,
        "logits identical without the Qwen3 tensors ({diff})"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_quantized_q_projection_is_permuted_row_by_row_exactly() {
    // Q8_0 rows of 64 values: permuting whole rows then dequantizing equals dequantizing then
    // permuting (rows are independent runs of blocks).
    let dir = std::env::temp_dir().join(format!("plansmith-permute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("q.gguf");
    let (heads, hd, cols) = (2usize, 8usize, 64usize);
    let w = Tensor::randn(0f32, 1.0, (heads * hd, cols), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
    let deq = q
        .dequantize(&Device::Cpu)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let md = [("general.architecture", &Value::String("qwen2".into()))];
    gguf_file::write(&mut std::fs::File::create(&p).unwrap(), &md, &[("w", &q)]).unwrap();
    let mut f = GgufFile::open(&p).unwrap();
    let got = f
        .tensor_rope_interleaved("w", &[heads * hd, cols], heads, hd)
        .unwrap()
        .dequantize(&Device::Cpu)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    for h in 0..heads {
        for i in 0..hd / 2 {
            for j in 0..2 {
                assert_eq!(got[h * hd + 2 * i + j], deq[h * hd + j * hd / 2 + i]);
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unsupported_tensor_type_is_named_with_the_supported_list() {
    // A GGUF holding one IQ4_NL tensor (ggml type 20): header as gguf-py writes it.
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"GGUF");
    bytes.extend_from_slice(&3u32.to_le_bytes()); // version
    bytes.extend_from_slice(&1u64.to_le_bytes()); // tensors
    bytes.extend_from_slice(&1u64.to_le_bytes()); // metadata entries
    let key = b"general.architecture";
    bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key);
    bytes.extend_from_slice(&8u32.to_le_bytes()); // string
    bytes.extend_from_slice(&5u64.to_le_bytes());
    bytes.extend_from_slice(b"llama");
    bytes.extend_from_slice(&1u64.to_le_bytes()); // tensor name
    bytes.push(b'x');
    bytes.extend_from_slice(&2u32.to_le_bytes()); // dims
    bytes.extend_from_slice(&32u64.to_le_bytes());
    bytes.extend_from_slice(&4u64.to_le_bytes());
    bytes.extend_from_slice(&20u32.to_le_bytes()); // IQ4_NL
    bytes.extend_from_slice(&0u64.to_le_bytes()); // offset
    while bytes.len() % 32 != 0 {
        bytes.push(0);
    }
    bytes.extend(std::iter::repeat_n(0u8, 4 * 18));
    let dir = std::env::temp_dir().join(format!("plansmith-iq4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("iq4.gguf");
    std::fs::write(&p, &bytes).unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::GgufHeader { .. }), "{msg}");
    assert!(
        msg.contains("IQ4_NL") && msg.contains("Q4_K") && msg.contains("supported"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "one line, no backtrace: {msg}");
    std::fs::remove_dir_all(&dir).ok();
}
