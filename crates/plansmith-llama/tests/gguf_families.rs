//! GGUF files of each supported family and every quantization type, against golden files made
//! by `scripts/gguf_golden.py` (transformers' float64 logits; gguf-py's `dequantize`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use plansmith_llama::{GgufArch, GgufFile, LlamaError, LlamaModel};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf_golden")
}

fn golden() -> Json {
    let text = std::fs::read_to_string(fixtures().join("golden.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
        .0
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
    for (file, want) in models {
        let mut f = GgufFile::open(fixtures().join(file)).unwrap();
        let arch = f.architecture().unwrap();
        assert_eq!(arch.name(), want["arch"].as_str().unwrap(), "{file}");
        let model = Arc::new(LlamaModel::from_gguf(&mut f).unwrap());
        let got = model.session().prefill_all_logits(&tokens).unwrap();
        let want: Vec<Vec<f32>> = want["logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{file}");
        let scale = want
            .iter()
            .flatten()
            .fold(0f32, |m, x| m.max(x.abs()))
            .max(1e-6);
        let mut worst = 0f32;
        for (pos, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                argmax(a),
                argmax(b),
                "{file}: top-1 differs at position {pos}"
            );
            for (x, y) in a.iter().zip(b) {
                worst = worst.max((x - y).abs() / scale);
            }
        }
        assert!(
            worst <= 1e-4,
            "{file}: worst relative logit error {worst:e}"
        );
        eprintln!("{file} ({arch:?}): worst relative logit error {worst:.1e}");
    }
}

#[test]
fn dequantization_equals_gguf_py_bit_for_bit_on_every_type() {
    let g = golden();
    let mut f = GgufFile::open(fixtures().join("quants.gguf")).unwrap();
    let types = g["quant_types"].as_array().unwrap();
    assert!(types.len() >= 12, "{types:?}");
    for t in types {
        let t = t.as_str().unwrap();
        let q = f.tensor(t, Some(&[4, 256])).unwrap();
        let ours = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        let refr = f.tensor(&format!("{t}.ref"), Some(&[4, 256])).unwrap();
        let refr = refr
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap();
        let (ours, refr) = (
            ours.to_vec1::<f32>().unwrap(),
            refr.to_vec1::<f32>().unwrap(),
        );
        let differ = ours
            .iter()
            .zip(&refr)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert!(refr.iter().any(|x| *x != 0.0), "{t}: reference is all zero");
        assert_eq!(differ, 0, "{t}: {differ} of {} values differ", ours.len());
    }
}

/// A GGUF whose `general.architecture` is `arch`, with the tensors of the f32 Qwen3 golden model
/// minus `drop` (for refusals).
fn rewrite(src: &str, arch: &str, drop: Option<&str>, out: &Path) {
    let mut file = std::fs::File::open(fixtures().join(src)).unwrap();
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
    let dir = std::env::temp_dir().join(format!("plansmith-families-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("gemma2.gguf");
    rewrite("llama-f32.gguf", "gemma2", None, &p);
    let err = LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::Unsupported(_)), "{msg}");
    assert!(
        msg.contains("gemma2") && msg.contains("qwen2") && msg.contains("llama"),
        "{msg}"
    );

    // A Qwen2 file without a q bias names the tensor.
    let p = dir.join("qwen2-nobias.gguf");
    rewrite("qwen2-f32.gguf", "qwen2", Some("blk.1.attn_q.bias"), &p);
    let err = LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap_err();
    assert!(
        matches!(err, LlamaError::MissingTensor { .. })
            && err.to_string().contains("blk.1.attn_q.bias"),
        "{err}"
    );

    // The family-specific tensors are used: the Qwen3 file read as `llama` (no q/k norms, no
    // permutation) gives other logits.
    let p = dir.join("qwen3-as-llama.gguf");
    rewrite("qwen3-f32.gguf", "llama", None, &p);
    let as_llama = Arc::new(LlamaModel::from_gguf(&mut GgufFile::open(&p).unwrap()).unwrap());
    let mut f = GgufFile::open(fixtures().join("qwen3-f32.gguf")).unwrap();
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
