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

/// Write a tiny GGUF with the given metadata overrides and tensor dtype.
fn write_with(path: &std::path::Path, extra: &[(&str, Value)], dtype: GgmlDType, d: usize) {
    let dev = Device::Cpu;
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.block_count".into(), Value::U32(1)),
        ("llama.context_length".into(), Value::U32(64)),
        ("llama.embedding_length".into(), Value::U32(d as u32)),
        ("llama.feed_forward_length".into(), Value::U32(2 * d as u32)),
        ("llama.attention.head_count".into(), Value::U32(2)),
        ("llama.rope.freq_base".into(), Value::F32(10000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.vocab_size".into(), Value::U32(64)),
    ];
    for (k, v) in extra {
        md.retain(|(key, _)| key != k);
        md.push((k.to_string(), v.clone()));
    }
    let t = Tensor::randn(0f32, 0.1, vec![64, d], &dev).unwrap();
    let q = QTensor::quantize(&t, dtype).unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &md_refs, &[("token_embd.weight", &q)]).unwrap();
}

/// Found by plansmith-fuzz: header numbers were trusted before anything checked them. A
/// block count or context length of 2^32 asked for terabytes (an abort, not an error); a
/// shape whose product overflows wrapped past the range check; a 32-value row reached a
/// kernel that works on pairs of blocks (a panic that poisoned candle's shared scratch
/// buffers for the process). Each is a typed error now, before any allocation or kernel.
#[test]
fn hostile_headers_are_refused_before_any_allocation_or_kernel() {
    let dir = common::temp_dir("hostile");
    let p = dir.join("h.gguf");
    for (key, value, named) in [
        (
            "llama.block_count",
            Value::U32(u32::MAX),
            "llama.block_count",
        ),
        (
            "llama.context_length",
            Value::U64(1 << 40),
            "llama.context_length",
        ),
        ("llama.vocab_size", Value::U32(0), "llama.vocab_size"),
        (
            "llama.rope.freq_base",
            Value::F32(f32::NAN),
            "llama.rope.freq_base",
        ),
    ] {
        write_with(&p, &[(key, value)], GgmlDType::F32, 64);
        let g = GgufFile::open(&p).unwrap();
        let err = g.llama_config().unwrap_err();
        assert!(
            matches!(err, LlamaError::Metadata { .. }) && err.to_string().contains(named),
            "{key}: {err}"
        );
    }
    // A Q8_0 matrix with rows of 32 values: refused when read, naming the tensor.
    write_with(&p, &[], GgmlDType::Q8_0, 32);
    let mut g = GgufFile::open(&p).unwrap();
    let err = g.tensor("token_embd.weight", None).unwrap_err();
    assert!(
        err.to_string().contains("token_embd.weight") && err.to_string().contains("multiple of 64"),
        "{err}"
    );
    // Rows of 64 are fine.
    write_with(&p, &[], GgmlDType::Q8_0, 64);
    GgufFile::open(&p)
        .unwrap()
        .tensor("token_embd.weight", None)
        .unwrap();
    // Dimensions whose product overflows: patch the tensor info's two u64 dims to 2^62.
    let mut bytes = std::fs::read(&p).unwrap();
    let name = b"token_embd.weight";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("the tensor info names the tensor");
    let dims = at + name.len() + 4; // after the name: n_dims (u32), then the dims (u64 each)
    for i in 0..2 {
        bytes[dims + 8 * i..dims + 8 * i + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
    }
    std::fs::write(&p, &bytes).unwrap();
    match GgufFile::open(&p) {
        Err(e) => assert!(
            matches!(
                e,
                LlamaError::TensorData { .. } | LlamaError::GgufHeader { .. }
            ),
            "{e}"
        ),
        Ok(_) => panic!("a shape of 2^124 elements was accepted"),
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A model's fingerprint (what checkpoints and cached prefixes are matched against) follows the
/// file's contents, not the path it was opened by.
#[test]
fn the_fingerprint_follows_the_contents_not_the_path() {
    let dir = common::temp_dir("fingerprint");
    let a = dir.join("a.gguf");
    write_tiny(&a, false);
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    let copy = dir.join("elsewhere/renamed.gguf");
    std::fs::copy(&a, &copy).unwrap();
    let other = dir.join("other.gguf");
    write_tiny(&other, false); // the same layout, other random weights
    let fingerprint = |p: &std::path::Path| {
        let mut g = GgufFile::open(p).unwrap();
        LlamaModel::from_gguf(&mut g).unwrap().fingerprint()
    };
    assert_eq!(fingerprint(&a), fingerprint(&copy));
    assert_eq!(
        fingerprint(&a),
        fingerprint(&dir.join("elsewhere/../a.gguf"))
    );
    assert_ne!(fingerprint(&a), fingerprint(&other));
}
