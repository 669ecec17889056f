mod common;

use std::io::Write;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use plansmith_llama::{GgufFile, LlamaError, LlamaModel};

#[test]
fn truncated_gguf_names_a_tensor_and_offset() {
    let src = std::fs::read(common::gguf_path()).unwrap();
    let dir = common::temp_dir("trunc");
    let p = dir.join("cut.gguf");
    // Cut in the middle of the tensor data.
    std::fs::File::create(&p)
        .unwrap()
        .write_all(&src[..src.len() * 6 / 10])
        .unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::TensorData { .. }), "{msg}");
    assert!(msg.contains("blk.") && msg.contains("offset"), "{msg}");
    assert!(msg.contains("truncated"), "{msg}");
    // Cut inside the header/metadata: a header error, never a panic.
    std::fs::File::create(&p)
        .unwrap()
        .write_all(&src[..5000])
        .unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    assert!(matches!(err, LlamaError::GgufHeader { .. }), "{err}");
    // Not a GGUF at all.
    std::fs::write(&p, b"hello world, not a gguf file").unwrap();
    assert!(GgufFile::open(&p).is_err());
    // Missing file.
    let err = GgufFile::open(dir.join("nope.gguf")).unwrap_err();
    assert!(matches!(err, LlamaError::Io { .. }), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Write a tiny Llama GGUF with f32 tensors; `bad_q` gives attn_q a wrong shape.
fn write_tiny(path: &std::path::Path, bad_q: bool) {
    let dev = Device::Cpu;
    let (d, ff, nh, nkv, hd, vocab, layers) =
        (32usize, 64usize, 4usize, 2usize, 8usize, 40usize, 2usize);
    let md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), Value::U32(layers as u32)),
        ("llama.context_length".into(), Value::U32(128)),
        ("llama.embedding_length".into(), Value::U32(d as u32)),
        ("llama.feed_forward_length".into(), Value::U32(ff as u32)),
        ("llama.attention.head_count".into(), Value::U32(nh as u32)),
        (
            "llama.attention.head_count_kv".into(),
            Value::U32(nkv as u32),
        ),
        ("llama.rope.freq_base".into(), Value::F32(10000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.vocab_size".into(), Value::U32(vocab as u32)),
    ];
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut add = |name: String, shape: Vec<usize>| {
        let t = Tensor::randn(0f32, 0.1, shape, &dev).unwrap();
        tensors.push((name, QTensor::quantize(&t, GgmlDType::F32).unwrap()));
    };
    add("token_embd.weight".into(), vec![vocab, d]);
    add("output_norm.weight".into(), vec![d]);
    for i in 0..layers {
        add(format!("blk.{i}.attn_norm.weight"), vec![d]);
        add(format!("blk.{i}.ffn_norm.weight"), vec![d]);
        add(
            format!("blk.{i}.attn_q.weight"),
            if bad_q {
                vec![nh * hd, d + 1]
            } else {
                vec![nh * hd, d]
            },
        );
        add(format!("blk.{i}.attn_k.weight"), vec![nkv * hd, d]);
        add(format!("blk.{i}.attn_v.weight"), vec![nkv * hd, d]);
        add(format!("blk.{i}.attn_output.weight"), vec![d, nh * hd]);
        add(format!("blk.{i}.ffn_gate.weight"), vec![ff, d]);
        add(format!("blk.{i}.ffn_up.weight"), vec![ff, d]);
        add(format!("blk.{i}.ffn_down.weight"), vec![d, ff]);
    }
    let mut f = std::fs::File::create(path).unwrap();
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &md_refs, &t_refs).unwrap();
}

#[test]
fn tiny_gguf_loads_and_mismatched_shape_is_typed() {
    let dir = common::temp_dir("tiny");
    let ok = dir.join("ok.gguf");
    write_tiny(&ok, false);
    let mut g = GgufFile::open(&ok).unwrap();
    let cfg = g.llama_config().unwrap();
    assert_eq!(cfg.head_dim, 8);
    assert!(cfg.tie_embeddings);
    let m = std::sync::Arc::new(LlamaModel::from_gguf(&mut g).unwrap());
    let mut s = m.session();
    let a = s.prefill(&[1, 2, 3, 4, 5]).unwrap();
    assert_eq!(a.len(), 40);
    // Incremental decoding equals one-shot prefill.
    let mut s2 = m.session();
    s2.prefill(&[1, 2]).unwrap();
    s2.step(3).unwrap();
    s2.step(4).unwrap();
    let b = s2.step(5).unwrap();
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(diff < 1e-4, "incremental vs one-shot differ by {diff}");
    // Out-of-vocabulary token is an error.
    assert!(matches!(
        s2.step(999),
        Err(LlamaError::TokenOutOfRange { .. })
    ));

    let bad = dir.join("bad.gguf");
    write_tiny(&bad, true);
    let mut g = GgufFile::open(&bad).unwrap();
    let err = LlamaModel::from_gguf(&mut g).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::TensorShape { .. }), "{msg}");
    assert!(msg.contains("blk.0.attn_q.weight"), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}
